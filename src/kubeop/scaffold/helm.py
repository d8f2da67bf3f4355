"""Helm operator projects: what ``kubeop init --plugin helm`` and ``kubeop create api --helm-chart``
write (operator-sdk's Helm plugin layout, with ``python -m kubeop.helm`` as the manager).

::

    PROJECT                     layout helm.kubeop.dev/v1, one resource per kind (with its chart)
    watches.yaml                kind -> chart (kubeop.helm.watches)
    helm-charts/<chart>/        the charts, copied in by create api
    Dockerfile, Makefile, README.md       from templates/helm
    config/manager/             the Deployment
    config/default/             the deploy namespace (PROJECT's ``namespace``) and its Namespace
                                object, the metrics Service
    config/crd/                 one CRD per kind (crd_for_chart: open, or from values.schema.json)
    config/rbac/                the manager's ClusterRole (Helm's storage, the kinds, what the
                                charts render), its service account, bindings, leader election
    config/samples/             a sample per kind: the chart's default values as its spec

The files come from templates with the same mechanism as a Python project's (the metrics Service
is the very same template); config/crd, config/rbac and config/default are derived from the
PROJECT and the charts by :func:`plan_helm_manifests` (``kubeop manifests``), config/default by
the same function as a Python project's; they carry the generated header and are rewritten on
every run. ``kubeop deploy`` (and ``kubectl apply -k config/default``) needs no kustomize.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from kubeop.binaries import HELM_VERSION, find_helm
from kubeop.core.yaml_input import load_yaml, load_yaml_all
from kubeop.crd import check_group, check_kind, check_version, guess_plural
from kubeop.crd.rbac import (
    PolicyRule,
)
from kubeop.helm.crd import HelmChartError, crd_for_chart
from kubeop.helm.watches import Watch, WatchesError, load_watches, parse_watches
from kubeop.scaffold.confined_copy import copy_entry, existing_entries
from kubeop.scaffold.errors import ScaffoldError, yaml_problem
from kubeop.scaffold.files import Planned, pending
from kubeop.scaffold.image import BuildContext, copy_into_context, prepare_context, write_kubeop_source
from kubeop.scaffold.manifests import GENERATED, default_config, operator_rbac
from kubeop.scaffold.names import ProjectNames, check_domain, check_namespace
from kubeop.scaffold.project import PROJECT_FILE
from kubeop.scaffold.render import render_template

__all__ = [
    "HELM_LAYOUT",
    "HelmApi",
    "HelmProject",
    "HelmProjectError",
    "chart_kinds",
    "copy_chart",
    "find_helm_project",
    "helm_api_files",
    "helm_project_files",
    "plan_helm_manifests",
    "rbac_rules",
    "stale_helm_manifests",
    "write_helm_build_context",
]

HELM_LAYOUT = "helm.kubeop.dev/v1"

_FILES: dict[str, str | None] = {  # output path -> template (None: an empty file)
    "Dockerfile": "helm/Dockerfile.tmpl",
    ".dockerignore": "helm/dockerignore.tmpl",
    ".gitignore": "helm/gitignore.tmpl",
    "Makefile": "helm/Makefile.tmpl",
    "README.md": "helm/README.md.tmpl",
    "watches.yaml": "helm/watches.yaml.tmpl",
    "pytest.ini": "helm/pytest.ini.tmpl",
    "tests/__init__.py": None,
    "tests/conftest.py": "helm/conftest.py.tmpl",
    "config/manager/manager.yaml": "helm/manager.yaml.tmpl",
    "config/manager/kustomization.yaml": "config/manager_kustomization.yaml.tmpl",
    "config/default/metrics_service.yaml": "config/metrics_service.yaml.tmpl",
}
_WATCHES_HEADER = "# Use `kubeop create api --helm-chart` to add watches to this file.\n"

# Plurals the naive English rule gets wrong, for the kinds charts commonly render.
_PLURALS = {"Endpoints": "endpoints", "PodSecurityPolicy": "podsecuritypolicies", "Ingress": "ingresses"}
_ALL = ("create", "delete", "get", "list", "patch", "update", "watch")


class HelmProjectError(ScaffoldError, ValueError):
    """A Helm project or API that cannot be scaffolded; the message says how to fix it."""


class _Dumper(yaml.SafeDumper):
    """Plain YAML: never anchors and aliases (``&id001``), multi-line strings as ``|`` blocks."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1 << 16)


@dataclass(frozen=True)
class HelmApi:
    group: str  # the full API group (<group>.<domain>)
    version: str
    kind: str
    chart: str  # relative to the project: helm-charts/<name>
    namespaced: bool = True

    @property
    def plural(self) -> str:
        return guess_plural(self.kind)


@dataclass(frozen=True)
class HelmProject:
    """A Helm operator project on disk (what its PROJECT file says)."""

    root: Path
    domain: str
    repo: str
    project_name: str
    apis: tuple[HelmApi, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)
    namespace: str = ""
    """Where ``deploy`` puts the operator; empty: ``<projectName>-system``."""

    def __post_init__(self) -> None:
        if not self.namespace:
            object.__setattr__(self, "namespace", self.names.namespace)

    @property
    def names(self) -> ProjectNames:
        """The names derived from the project's name."""
        return ProjectNames(self.project_name)

    def save(self) -> None:
        """Write the project's PROJECT file."""
        (self.root / PROJECT_FILE).write_text(self.to_yaml())

    def to_yaml(self) -> str:
        """The PROJECT file's text."""
        data: dict[str, Any] = {
            "domain": self.domain,
            "layout": [HELM_LAYOUT],
            "namespace": self.namespace,
            "projectName": self.project_name,
            "repo": self.repo,
        }
        if self.apis:
            data["resources"] = [
                {
                    "api": {"crdVersion": "v1", "namespaced": a.namespaced},
                    "domain": self.domain,
                    "group": a.group.removesuffix(f".{self.domain}"),
                    "kind": a.kind,
                    "version": a.version,
                    "chart": a.chart,
                }
                for a in self.apis
            ]
        data["version"] = "3"
        data.update(self.extra)
        header = "# Written by kubeop init --plugin helm and kubeop create api --helm-chart.\n"
        return header + dump_yaml(data)


def find_helm_project(start: Path) -> HelmProject | None:
    """The Helm project containing ``start`` (nearest PROJECT upwards), None when that PROJECT
    belongs to another layout or there is none."""
    start = start.resolve()
    for directory in (start, *start.parents):
        path = directory / PROJECT_FILE
        if path.is_file():
            data = _read_yaml(path)
            if not isinstance(data, dict) or HELM_LAYOUT not in (data.get("layout") or ()):
                return None
            domain = str(data.get("domain") or "")
            try:
                apis = tuple(
                    HelmApi(
                        group=f"{r['group']}.{r.get('domain') or domain}" if r.get("group") else domain,
                        version=str(r["version"]),
                        kind=str(r["kind"]),
                        chart=str(r.get("chart") or ""),
                        namespaced=bool((r.get("api") or {}).get("namespaced", True)),
                    )
                    for r in data.get("resources") or ()
                )
            except (KeyError, TypeError, AttributeError) as e:
                raise HelmProjectError(
                    f"{path}: a resource entry is malformed ({type(e).__name__}: {e}); fix or remove it"
                ) from None
            for api in apis:
                _check_chart(directory, api, path)
            known = ("domain", "layout", "namespace", "projectName", "repo", "resources", "version")
            name = str(data.get("projectName") or directory.name)
            namespace = str(data.get("namespace") or f"{name}-system")
            try:
                ProjectNames(name)
                check_namespace(namespace, source=f"{path}: namespace")
            except ScaffoldError as e:
                raise HelmProjectError(
                    f"{path}: projectName: {e}" if "project name" in str(e) else str(e)
                ) from None
            return HelmProject(
                root=directory,
                domain=domain,
                repo=str(data.get("repo") or ""),
                project_name=name,
                apis=apis,
                extra={k: v for k, v in data.items() if k not in known},
                namespace=namespace,
            )
    return None


def _check_chart(root: Path, api: HelmApi, path: Path) -> None:
    """A kind's chart is a directory under the project's helm-charts/ (the image has only those):
    never an absolute path or one that climbs out with '..'."""
    fix = "use helm-charts/<chart> (kubeop create api --helm-chart copies a chart there)"
    if not api.chart:
        raise HelmProjectError(f"{path}: the resource of kind {api.kind} has no chart; {fix}")
    charts = (root / "helm-charts").resolve()
    target = (root / api.chart).resolve()
    if Path(api.chart).is_absolute() or target == charts or not target.is_relative_to(charts):
        raise HelmProjectError(
            f"{path}: the chart {api.chart!r} of kind {api.kind} is outside the project's helm-charts/; {fix}"
        )


def _api_values(api: HelmApi, sample_file: str) -> dict[str, str]:
    return {
        "kind": api.kind,
        "helm_resource": f"{api.plural}.{api.group}",
        "helm_chart": api.chart,
        "helm_sample": sample_file,
    }


def _values(names: ProjectNames, namespace: str | None = None) -> dict[str, str]:
    return {
        "project_name": names.name,
        "namespace": namespace or names.namespace,
        "deployment": names.deployment,
        "service_account": names.service_account,
        "leader_election_id": names.leader_election_id,
        "helm_version": HELM_VERSION,
    }


# -- init -------------------------------------------------------------------------------------------


def helm_project_files(
    *, domain: str, repo: str, project_name: str, namespace: str | None = None
) -> dict[str, str]:
    """The files of a new Helm operator project (path -> content), generated config included;
    the operator deploys to ``namespace`` (default ``<project_name>-system``)."""
    try:
        check_domain(domain)
    except ScaffoldError as e:
        raise HelmProjectError(str(e)) from None
    if "." not in domain:
        raise HelmProjectError(
            f"--domain {domain!r} is not a DNS domain with a dot (for example example.com): "
            "API groups are <group>.<domain>"
        )
    try:
        names = ProjectNames(project_name)
    except ScaffoldError as e:
        raise HelmProjectError(str(e)) from None
    if namespace is not None:
        try:
            check_namespace(namespace)
        except ScaffoldError as e:
            raise HelmProjectError(str(e)) from None
    project = HelmProject(Path("."), domain, repo, names.name, namespace=namespace or "")
    values = _values(names, project.namespace)
    files = {path: render_template(template, values) if template else "" for path, template in _FILES.items()}
    files[PROJECT_FILE] = project.to_yaml()
    files["helm-charts/.gitkeep"] = ""
    files.update({p.path: p.content for p in plan_helm_manifests(project)})
    return files


# -- create api ---------------------------------------------------------------------------------------


_CHART_NAME = re.compile(r"^[A-Za-z0-9._-]+\Z")


def copy_chart(chart: Path, project_root: Path) -> tuple[str, bool]:
    """Copy ``chart`` to ``helm-charts/<name>`` (unless it already is there); returns the
    relative path and whether anything was copied. An existing different directory is kept."""
    chart = chart.resolve()
    meta = _chart_meta(chart)
    name = meta.get("name") or chart.name
    # it names a directory of helm-charts/: never '..', a '/' or a line break (Helm's own rule)
    if not isinstance(name, str) or not _CHART_NAME.match(name) or name in (".", ".."):
        raise HelmProjectError(
            f"{chart / 'Chart.yaml'}: name {name!r} is not a chart name: use letters, digits, '.', '_' "
            "and '-' (Helm's rule), e.g. name: my-chart"
        )
    target = project_root / "helm-charts" / name
    rel = f"helm-charts/{name}"
    if chart == target.resolve() or target.exists():
        return rel, False
    target.parent.mkdir(parents=True, exist_ok=True)
    try:  # links as links, none leaving the chart; no FIFO or device
        copy_entry(chart, target, within=chart, ignore=shutil.ignore_patterns(".git"))
    except ScaffoldError as e:
        shutil.rmtree(target, ignore_errors=True)
        raise HelmProjectError(f"{e} (copying the chart {chart})") from None
    return rel, True


def helm_api_files(
    project: HelmProject,
    *,
    group: str,
    version: str,
    kind: str,
    chart: str,
    namespaced: bool = True,
    helm: str | None = None,
) -> dict[str, str]:
    """The files ``create api --helm-chart`` writes or updates for a kind served by ``chart``
    (relative to the project, already copied): the PROJECT entry, its watches.yaml entry, its
    sample, and config/crd and config/rbac regenerated for every kind."""
    check_kind(kind)
    check_version(version)
    if project.domain and (group == project.domain or group.endswith("." + project.domain)):
        group = group[: -len(project.domain)].rstrip(".")  # given in full: webapp.example.com -> webapp
    full_group = f"{group}.{project.domain}" if group else project.domain
    check_group(full_group)
    chart_dir = project.root / chart
    api = HelmApi(full_group, version, kind, chart, namespaced)
    if any((a.group, a.version, a.kind) == (api.group, api.version, api.kind) for a in project.apis):
        raise HelmProjectError(f"{kind} ({full_group}/{version}) is already in this project")
    try:
        existing = parse_watches(
            _read_yaml(project.root / "watches.yaml"), base_dir=project.root, check_charts=False
        )
    except WatchesError as e:
        raise HelmProjectError(str(e)) from None
    if any((w.group, w.version, w.kind) == (full_group, version, kind) for w in existing):
        raise HelmProjectError(f"watches.yaml already has {full_group}/{version} {kind}")
    updated = replace(project, apis=(*project.apis, api))
    watches = [w.to_dict(project.root) for w in [*existing, Watch(full_group, version, kind, chart_dir)]]
    sample_file = f"config/samples/{group or full_group}_{version}_{kind.lower()}.yaml"
    files = {
        PROJECT_FILE: updated.to_yaml(),
        "watches.yaml": _WATCHES_HEADER + dump_yaml(watches),
        sample_file: dump_yaml(_sample(api, chart_dir)),
        f"tests/test_{kind.lower()}.py": render_template(
            "helm/test_kind.py.tmpl", _api_values(api, sample_file.rpartition("/")[2])
        ),
    }
    plans = plan_helm_manifests(updated, helm=helm, new_samples=[sample_file.rpartition("/")[2]])
    files.update({p.path: p.content for p in plans})
    return files


def _sample(api: HelmApi, chart: Path) -> dict[str, Any]:
    """A resource whose spec is the chart's default values (operator-sdk does the same)."""
    values = _read_yaml(chart / "values.yaml") or {}
    md: dict[str, Any] = {"name": f"{api.kind.lower()}-sample"}
    return {"apiVersion": f"{api.group}/{api.version}", "kind": api.kind, "metadata": md, "spec": values}


# -- manifests ----------------------------------------------------------------------------------------


def _generated(path: str, body: str) -> Planned:
    return Planned(path, f"{GENERATED}\n{body}", lambda current: current.startswith(GENERATED))


def _kustomization(resources: Iterable[str]) -> str:
    return dump_yaml({"resources": list(dict.fromkeys(resources))})


def plan_helm_manifests(
    project: HelmProject, *, helm: str | None = None, new_samples: Iterable[str] = ()
) -> list[Planned]:
    """What ``kubeop manifests`` writes in a Helm project: a CRD per kind from its chart, the RBAC
    from the kinds and what the charts render, and the index of the samples in config/samples
    (and ``new_samples``, about to be written there)."""
    names = project.names
    labels = {"app.kubernetes.io/name": names.name, "app.kubernetes.io/managed-by": "kubeop"}
    plans: list[Planned] = []
    bases: list[str] = []
    for api in project.apis:
        chart_dir = project.root / api.chart
        try:
            crd = crd_for_chart(
                chart_dir,
                api.group,
                api.version,
                api.kind,
                scope="Namespaced" if api.namespaced else "Cluster",
            )
        except HelmChartError as e:
            raise HelmProjectError(str(e)) from None
        base = f"bases/{api.group}_{api.plural}.yaml"
        if base not in bases:
            bases.append(base)
            plans.append(_generated(f"config/crd/{base}", dump_yaml(crd)))
    plans.append(_generated("config/crd/kustomization.yaml", _kustomization(bases)))

    namespace = project.namespace
    charts = [project.root / a.chart for a in project.apis]
    rbac = operator_rbac(names, namespace, rbac_rules(project.apis, charts, helm=helm), labels)
    plans.extend(_generated(f"config/rbac/{f}", dump_yaml(obj)) for f, obj in rbac.items())
    plans.append(_generated("config/rbac/kustomization.yaml", _kustomization(rbac)))

    samples_dir = project.root / "config" / "samples"
    samples = {p.name for p in samples_dir.glob("*.yaml") if p.name != "kustomization.yaml"}
    samples.update(new_samples)
    plans.append(_generated("config/samples/kustomization.yaml", _kustomization(sorted(samples))))
    plans.extend(default_config(project.project_name, namespace, labels, webhooks=False))
    return plans


def write_helm_build_context(
    project: HelmProject, dest: Path, kubeop_from: str | None = None
) -> BuildContext:
    """The image build context of a Helm project in ``dest`` (replacing an earlier one): the
    Dockerfile, watches.yaml, the charts, and where the image gets kubeop as for a Python project
    (:func:`kubeop.scaffold.image.write_kubeop_source`: this kubeop's wheel in ``wheels/`` by
    default, or ``kubeop_from``, an index or VCS URL)."""
    root = project.root
    entries = ("Dockerfile", ".dockerignore", "watches.yaml", "helm-charts")
    # Every entry is checked before anything is read: no link out of the project, no FIFO.
    try:
        copied = existing_entries(root, entries)
    except ScaffoldError as e:
        raise HelmProjectError(str(e)) from None
    for needed in ("Dockerfile", "watches.yaml", "helm-charts"):
        if needed not in copied:
            raise HelmProjectError(
                f"{root / needed} is missing: restore it (kubeop init --plugin helm --force) to build "
                "an image"
            )
    try:
        watches = load_watches(root / "watches.yaml")
    except WatchesError as e:
        raise HelmProjectError(f"{e}; fix it to build an image") from None
    charts = (root / "helm-charts").resolve()
    for watch in watches:  # the image holds helm-charts/ only
        if not watch.chart.resolve().is_relative_to(charts):
            raise HelmProjectError(
                f"{root / 'watches.yaml'}: the chart {watch.chart} of kind {watch.kind} is outside the "
                "project's helm-charts/, which is all the image gets: kubeop create api --helm-chart "
                "copies it there"
            )
    prepare_context(dest, (root / "helm-charts",))
    origin, netrc = write_kubeop_source(dest, kubeop_from)
    try:
        copy_into_context(dest, root, copied, ignore=shutil.ignore_patterns(".git"))
    except ScaffoldError as e:
        raise HelmProjectError(str(e)) from None
    return BuildContext(dest, sorted(p.name for p in dest.iterdir()), origin, netrc)


def stale_helm_manifests(project: HelmProject) -> list[str]:
    """The files under config/ that ``kubeop manifests`` would create or rewrite (empty: up to date)."""
    plans = plan_helm_manifests(project)
    return [c.path for c in pending(project.root, plans) if c.action in ("created", "updated")]


def chart_kinds(chart: Path, *, helm: str | None = None) -> list[tuple[str, str]]:
    """The (apiVersion, kind) pairs a chart renders with its default values: ``helm template``
    when a helm binary is available and the chart renders without values, else the ``kind:``
    lines of its templates."""
    found: dict[tuple[str, str], None] = {}
    rendered = _helm_template(chart, helm)
    try:
        docs = load_yaml_all(rendered) if rendered is not None else None
    except yaml.YAMLError:
        docs = None  # what helm rendered is not YAML kubeop reads: the templates' kind: lines then
    if docs is not None:
        for doc in docs:
            if isinstance(doc, dict) and isinstance(doc.get("kind"), str):
                found.setdefault((str(doc.get("apiVersion") or ""), doc["kind"]), None)
        return list(found)
    for path in sorted((chart / "templates").rglob("*")):
        if not path.is_file() or path.suffix not in (".yaml", ".yml", ".tpl"):
            continue
        api_version = ""
        for line in path.read_text(errors="replace").splitlines():
            m = re.match(r"^apiVersion:\s*[\"']?([\w./-]+)", line)
            if m:
                api_version = m.group(1)
            m = re.match(r"^kind:\s*[\"']?([A-Z]\w*)", line)
            if m and api_version:
                found.setdefault((api_version, m.group(1)), None)
    return list(found)


def _helm_template(chart: Path, helm: str | None) -> str | None:
    try:
        binary = helm or str(find_helm())
    except FileNotFoundError:
        return None
    with tempfile.TemporaryDirectory(prefix="kubeop-helm-template-") as home:
        env = {
            "HELM_CACHE_HOME": home,
            "HELM_CONFIG_HOME": home,
            "HELM_DATA_HOME": home,
            "PATH": "/usr/bin:/bin",
        }
        try:
            done = subprocess.run(
                [binary, "template", "release", str(chart)],
                capture_output=True,
                text=True,
                env=env,
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
    return done.stdout if done.returncode == 0 else None


def rbac_rules(
    apis: Iterable[HelmApi], charts: Iterable[Path] = (), *, helm: str | None = None
) -> list[PolicyRule]:
    """The manager's rules: Helm's release storage, events, each kind (with its status and
    finalizers), and every kind the charts render (Helm creates, updates and deletes them; the
    operator watches them). Leader election has its own Role in the operator's namespace."""
    rules = [
        PolicyRule(("",), ("secrets",), _ALL),
        PolicyRule(("", "events.k8s.io"), ("events",), ("create", "patch")),
        PolicyRule(("",), ("namespaces",), ("get",)),
    ]
    for api in apis:
        rules.append(PolicyRule((api.group,), (api.plural,), _ALL))
        rules.append(
            PolicyRule(
                (api.group,), (f"{api.plural}/status", f"{api.plural}/finalizers"), ("get", "patch", "update")
            )
        )
    by_group: dict[str, set[str]] = {}
    for chart in charts:
        for api_version, kind in chart_kinds(chart, helm=helm):
            group = api_version.rpartition("/")[0] if "/" in api_version else ""
            by_group.setdefault(group, set()).add(_PLURALS.get(kind, guess_plural(kind)))
    for group in sorted(by_group):
        resources = sorted(by_group[group] - ({"secrets"} if group == "" else set()))
        if resources:
            rules.append(PolicyRule((group,), tuple(resources), _ALL))
    return rules


def _read_yaml(path: Path) -> Any:
    try:
        return load_yaml(path.read_text())
    except FileNotFoundError:
        return None
    except yaml.YAMLError as e:
        raise HelmProjectError(f"{path} is not valid YAML: {yaml_problem(e)}") from None


def _chart_meta(chart: Path) -> Mapping[str, Any]:
    if not (chart / "Chart.yaml").is_file():
        raise HelmProjectError(
            f"{chart} is not a Helm chart (no Chart.yaml); --helm-chart takes a chart directory"
        )
    data = _read_yaml(chart / "Chart.yaml")
    deps = (data or {}).get("dependencies") or []
    remote = [
        d.get("repository") for d in deps if str(d.get("repository") or "").startswith(("http", "oci:"))
    ]
    if remote and not (chart / "charts").is_dir():
        raise HelmProjectError(
            f"{chart} depends on charts from remote repositories ({', '.join(map(str, remote))}) "
            "that are not vendored in its charts/ directory: run `helm dependency build` first"
        )
    return data if isinstance(data, dict) else {}
