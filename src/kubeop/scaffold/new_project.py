"""``kubeop init``: a new operator project, laid out like kubebuilder's, in Python.

::

    init_project(Path("."), domain="example.com", repo="github.com/example/guestbook-operator")

writes PROJECT, pyproject.toml, Makefile, Dockerfile, README.md, the package (main.py, api/,
controllers/), config/manager, config/default's metrics Service, grafana/'s dashboards and
tests/, then the generated
config/{default,crd,rbac,samples}. ``namespace`` (default ``<project>-system``) is recorded in
PROJECT: config/default's kustomization puts every object there.

Guarantees: an existing file is never overwritten unless ``force`` is given *and* the file is
still exactly what an earlier ``init`` wrote for the parameters recorded in PROJECT (an
untouched template); everything else is kept and reported as such.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from kubeop.scaffold.errors import ScaffoldError
from kubeop.scaffold.files import Change, Planned, write_planned
from kubeop.scaffold.grafana import dashboards
from kubeop.scaffold.image import local_kubeop
from kubeop.scaffold.manifests import generated, plan_manifests
from kubeop.scaffold.names import (
    ProjectNames,
    check_domain,
    check_namespace,
    check_repo,
    suggest_project_name,
)
from kubeop.scaffold.project import LAYOUT, PROJECT_FILE, Project, load_project
from kubeop.scaffold.render import render_template

__all__ = ["IGNORED_ENTRIES", "init_project", "project_files"]

# What may already be in a directory that is otherwise empty (kubebuilder allows a few too).
IGNORED_ENTRIES = frozenset(
    {".git", ".venv", "venv", ".idea", ".vscode", ".DS_Store", "LICENSE", "LICENSE.md"}
)

_FILES = {  # output path -> template (paths use {package})
    "pyproject.toml": "project/pyproject.toml.tmpl",
    "Makefile": "project/Makefile.tmpl",
    "Dockerfile": "project/Dockerfile.tmpl",
    ".dockerignore": "project/dockerignore.tmpl",
    ".gitignore": "project/gitignore.tmpl",
    "README.md": "project/README.md.tmpl",
    "{package}/__init__.py": "project/__init__.py.tmpl",
    "{package}/__main__.py": "project/__main__.py.tmpl",
    "{package}/main.py": "project/main.py.tmpl",
    "{package}/api/__init__.py": "project/api__init__.py.tmpl",
    "{package}/api/conditions.py": "project/conditions.py.tmpl",
    "{package}/controllers/__init__.py": "project/controllers__init__.py.tmpl",
    "tests/__init__.py": None,
    "tests/conftest.py": "project/conftest.py.tmpl",
    "tests/test_manifests.py": "project/test_manifests.py.tmpl",
    "config/default/metrics_service.yaml": "config/metrics_service.yaml.tmpl",
    "config/manager/kustomization.yaml": "config/manager_kustomization.yaml.tmpl",
    "config/manager/manager.yaml": "config/manager.yaml.tmpl",
}


# The README's install step, as it works today: kubeop is not on a package index yet, so it comes
# from a wheel (or a checkout) first; `pip install -e '.[dev]'` then finds it installed.
_INSTALL_FROM_WHEEL = """\
kubeop is not on a package index yet: install it from a wheel first (build one in a kubeop
checkout with `python -m build --wheel`, or use the one a release ships), then this project:

    python3 -m venv .venv && . .venv/bin/activate
    pip install '/path/to/kubeop-<version>-py3-none-any.whl[cli]'   # or: pip install '/path/to/kubeop[cli]'
    pip install -e '.[dev]'

Once kubeop is published, `pip install -e '.[dev]'` alone does it. `kubeop[cli]` is the command
line (`kubeop`, which the Makefile runs); the operator itself, and its image, need only `kubeop`."""

_INSTALL_FROM_SOURCE = """\
This project takes kubeop from the checkout it was created with (`{source}`, a path dependency
in pyproject.toml), so one command installs both:

    python3 -m venv .venv && . .venv/bin/activate
    pip install -e '.[dev]'

`kubeop[cli]` is the command line (`kubeop`, which the Makefile runs); the operator itself, and its
image, need only `kubeop`."""


@dataclass(frozen=True)
class _Params:
    domain: str
    repo: str
    names: ProjectNames
    kubeop_source: str | None
    namespace: str = ""

    def values(self) -> dict[str, str]:
        names = self.names
        repo_url = self.repo if "://" in self.repo else f"https://{self.repo}"
        if self.kubeop_source:
            source = Path(self.kubeop_source).resolve().as_uri()
            requirement, cli = f"kubeop @ {source}", f"kubeop[cli] @ {source}"
            hatch = "\n[tool.hatch.metadata]\nallow-direct-references = true\n"
            install = _INSTALL_FROM_SOURCE.format(source=self.kubeop_source)
        else:
            requirement, cli, hatch = "kubeop>=0.1", "kubeop[cli]>=0.1", ""
            install = _INSTALL_FROM_WHEEL
        return {
            "project_name": names.name,
            "package": names.package,
            "domain": self.domain,
            "repo": self.repo,
            "repo_url": repo_url,
            "namespace": self.namespace or names.namespace,
            "service_account": names.service_account,
            "deployment": names.deployment,
            "leader_election_id": names.leader_election_id,
            "kubeop_requirement": requirement,
            "kubeop_cli_requirement": cli,
            "hatch_metadata": hatch,
            "install_steps": install,
        }


def project_files(
    domain: str,
    repo: str,
    project_name: str,
    kubeop_source: str | None = None,
    namespace: str | None = None,
) -> dict[str, str]:
    """The files ``init`` renders from templates (path -> content), before the generated ones."""
    names = ProjectNames(project_name)
    params = _Params(domain, repo, names, kubeop_source, namespace or names.namespace)
    values = params.values()
    out = {}
    for path, template in _FILES.items():
        out[path.format(package=params.names.package)] = render_template(template, values) if template else ""
    out.update(dashboards(names.name))  # grafana/: kubebuilder's grafana plugin's equivalent
    return out


def _untouched(old: str | None) -> Callable[[str], bool]:
    """The replace policy of ``init --force``: only a file that is still the old template."""
    return lambda current: old is not None and current == old


def _check_empty(root: Path) -> None:
    if not root.exists():
        return
    if not root.is_dir():
        raise ScaffoldError(f"{root} is a file, not a directory: choose another --dir")
    entries = sorted(p.name for p in root.iterdir() if p.name not in IGNORED_ENTRIES)
    if entries:
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        hint = (
            "it already holds a kubeop project: add APIs with kubeop create api, or rerun init with --force "
            "to restore the scaffolded files you have not changed"
            if PROJECT_FILE in entries
            else "run kubeop init in an empty directory (mkdir my-operator && cd my-operator), or pass "
            "--force to add the project's files and keep every file that is already there"
        )
        raise ScaffoldError(f"{root} is not empty ({shown}): {hint}")


def init_project(
    root: Path,
    *,
    domain: str,
    repo: str,
    project_name: str | None = None,
    plugin: str = "python",
    force: bool = False,
    kubeop_source: str | None = None,
    namespace: str | None = None,
) -> list[Change]:
    """Scaffold a project in ``root`` (see the module docstring); returns what happened to each file."""
    if plugin != "python":
        raise ScaffoldError(
            f"--plugin {plugin!r} is not available: use --plugin python (a kubeop controller project) "
            "or --plugin helm (a Helm-based operator: a chart per kind, run by kubeop.helm)"
        )
    root = root.resolve()
    check_domain(domain)
    check_repo(repo)
    if namespace is not None:
        check_namespace(namespace)
    if project_name is None:
        project_name = root.name
        suggestion = suggest_project_name(root.name)
        if suggestion != root.name:
            hint = f" (for example --project-name {suggestion})" if suggestion else ""
            raise ScaffoldError(
                f"the directory name {root.name!r} is not a valid project name (a lower-case DNS label of at "
                f"most 30 characters, starting with a letter): pass --project-name{hint}"
            )
    names = ProjectNames(project_name)
    if not force:
        _check_empty(root)
    previous: Project | None = None
    if force and (root / PROJECT_FILE).is_file():
        previous = load_project(root)
    old_files: dict[str, str] = {}
    if previous is not None:
        source = local_kubeop(previous)
        old_files = project_files(
            previous.domain,
            previous.repo,
            previous.project_name,
            str(source) if source else None,
            previous.namespace,
        )
        if namespace is None and previous.project_name == names.name:
            namespace = previous.namespace
    namespace = namespace or names.namespace
    plans = [
        Planned(path, content, _untouched(old_files.get(path)))
        for path, content in project_files(domain, repo, names.name, kubeop_source, namespace).items()
    ]
    root.mkdir(parents=True, exist_ok=True)
    changes = write_planned(root, plans)
    project = Project(root, domain, repo, names.name, names.package, layout=(LAYOUT,), namespace=namespace)
    if previous is not None:
        project = replace(project, resources=previous.resources, extra=previous.extra)
    changes.extend(write_planned(root, [Planned(PROJECT_FILE, project.to_yaml(), lambda _: True)]))
    changes.extend(write_planned(root, plan_manifests(project, generated(project, command="manifests"))))
    return changes
