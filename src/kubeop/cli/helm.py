"""``kubeop init --plugin helm`` and ``kubeop create api --helm-chart``: Helm operator projects.

The files come from :mod:`kubeop.scaffold.helm`; they are written like every scaffolded file
(never over a file the user changed; generated files while they keep the generated header).
"""

from __future__ import annotations

from pathlib import Path

from kubeop.cli.output import fail, fail_if_stale, move_namespace, report, say
from kubeop.crd import CRDError
from kubeop.helm import HelmChartError, WatchesError
from kubeop.scaffold import (
    GENERATED,
    PROJECT_FILE,
    HelmProject,
    HelmProjectError,
    Planned,
    ScaffoldError,
    copy_chart,
    find_helm_project,
    find_project,
    helm_api_files,
    helm_project_files,
    plan_helm_manifests,
    write_planned,
)
from kubeop.scaffold.new_project import IGNORED_ENTRIES

__all__ = ["create_helm_api", "helm_manifests", "init_helm"]

# Files create api rewrites as a whole (they list every kind); the rest are the user's once
# written, except generated ones that still carry the generated header.
_REWRITTEN = frozenset({PROJECT_FILE, "watches.yaml"})


def _plans(files: dict[str, str]) -> list[Planned]:
    def policy(path: str, content: str) -> Planned:
        if path in _REWRITTEN:
            return Planned(path, content, lambda _: True)
        if content.startswith(GENERATED):
            return Planned(path, content, lambda current: current.startswith(GENERATED))
        return Planned(path, content)

    return [policy(path, content) for path, content in files.items()]


def _python_project(start: Path) -> bool:
    try:
        find_project(start)
    except ScaffoldError:
        return False
    return True


def init_helm(
    root: Path, *, domain: str, repo: str, project_name: str | None, force: bool, namespace: str | None = None
) -> None:
    root = root.resolve()
    try:
        files = helm_project_files(
            domain=domain, repo=repo, project_name=project_name or root.name, namespace=namespace
        )
    except HelmProjectError as e:
        fail(str(e))
    if not force and root.is_dir():
        entries = sorted(p.name for p in root.iterdir() if p.name not in IGNORED_ENTRIES)
        if entries:
            fail(
                f"{root} is not empty ({', '.join(entries[:5])}): run kubeop init in an empty directory, "
                "or pass --force to add the project's files and keep every file already there"
            )
    root.mkdir(parents=True, exist_ok=True)
    # --force adds what is missing and never replaces a file (PROJECT lists the kinds already made).
    report(write_planned(root, [Planned(path, content) for path, content in files.items()]))
    say(
        f"\nA Helm operator project is ready in {root}. Next:\n"
        "  kubeop create api --group <group> --version v1 --kind <Kind> --helm-chart path/to/chart\n"
        "  make install run"
    )


def create_helm_api(
    directory: Path | None, *, group: str, version: str, kind: str, chart: Path, namespaced: bool
) -> None:
    start = directory or Path.cwd()
    try:
        project = find_helm_project(start)
        if project is None:
            if _python_project(start):
                fail(
                    f"{start.resolve()} is in a Python kubeop project, which has no charts: drop "
                    "--helm-chart to scaffold a kind with its controller, or make a Helm project with "
                    "kubeop init --plugin helm"
                )
            fail(
                f"{start.resolve()} is not inside a Helm operator project: create one with "
                "kubeop init --plugin helm --domain example.com --repo ..."
            )
        rel, copied = copy_chart(chart, project.root)
        files = helm_api_files(
            project, group=group, version=version, kind=kind, chart=rel, namespaced=namespaced
        )
    except (HelmProjectError, HelmChartError, WatchesError, CRDError) as e:
        fail(str(e))
    if copied:
        say(f"created {rel}/ (copied from {chart})")
    report(write_planned(project.root, _plans(files)))
    say(
        f"\n{kind} is served by {rel}. Next: make install run, then kubectl apply -k config/samples "
        f"(the sample's spec holds the chart's default values)"
    )


def helm_manifests(project: HelmProject, *, check: bool, namespace: str | None = None) -> None:
    """``kubeop manifests`` in a Helm project: the CRDs from the charts' values.schema.json, the
    ClusterRole from the kinds and what the charts render, the samples index, config/default
    (``namespace`` moves the operator there and records it in PROJECT)."""
    project, moved = move_namespace(project, namespace, check=check)
    plans = plan_helm_manifests(project)
    kinds = ", ".join(a.kind for a in project.apis) or "no kinds yet"
    if check:
        fail_if_stale(project.root, plans)
        say(f"config/ is up to date ({kinds})")
        return
    if moved:
        project.save()
        say(moved)
    report(write_planned(project.root, plans))
    say(f"config/ is written for {kinds} (from the charts in helm-charts/)")
