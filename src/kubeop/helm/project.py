"""Helm operator projects: what ``kubeop init --plugin helm`` and ``kubeop create api --helm-chart``
write (operator-sdk's Helm plugin layout, with ``python -m kubeop.helm`` as the manager).

::

    PROJECT                     layout helm.kubeop.dev/v1, one resource per kind
    watches.yaml                kind -> chart (kubeop.helm.watches)
    helm-charts/<chart>/        the charts, copied in by create api
    Dockerfile, Makefile, README.md
    config/crd/bases/           one CRD per kind (crd_for_chart: open, or from values.schema.json)
    config/rbac/                the manager's ClusterRole: Helm's storage, the kinds, and what
                                the charts render
    config/manager/, config/default/, config/samples/

Everything here computes file contents (``path -> text``) without writing, except
:func:`copy_chart`; the command line writes them without clobbering files the user changed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubeop.crd.names import check_group, check_kind, check_version, guess_plural
from kubeop.helm.crd import HelmChartError, crd_for_chart
from kubeop.helm.watches import Watch, WatchesError, parse_watches

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
    "rbac_rules",
]

HELM_LAYOUT = "helm.kubeop.dev/v1"
PROJECT_FILE = "PROJECT"
HELM_VERSION = "v3.22.0"
_PROJECT_NAME = re.compile(r"^[a-z][a-z0-9-]{0,29}$")
_DOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$")

# Plurals the naive English rule gets wrong, for the kinds charts commonly render.
_PLURALS = {"Endpoints": "endpoints", "PodSecurityPolicy": "podsecuritypolicies", "Ingress": "ingresses"}


class HelmProjectError(ValueError):
    """A project or an API that cannot be scaffolded; the message says how to fix it."""


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

    def to_yaml(self) -> str:
        data: dict[str, Any] = {
            "domain": self.domain,
            "layout": [HELM_LAYOUT],
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
        return header + yaml.safe_dump(data, sort_keys=False)


def find_helm_project(start: Path) -> HelmProject | None:
    """The Helm project containing ``start`` (nearest PROJECT upwards), None when that PROJECT
    belongs to another layout or there is none."""
    start = start.resolve()
    for directory in (start, *start.parents):
        path = directory / PROJECT_FILE
        if path.is_file():
            try:
                data = yaml.safe_load(path.read_text()) or {}
            except yaml.YAMLError as e:
                raise HelmProjectError(f"{path} is not valid YAML: {e}") from None
            if not isinstance(data, dict) or HELM_LAYOUT not in (data.get("layout") or ()):
                return None
            domain = str(data.get("domain") or "")
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
            known = ("domain", "layout", "projectName", "repo", "resources", "version")
            return HelmProject(
                root=directory,
                domain=domain,
                repo=str(data.get("repo") or ""),
                project_name=str(data.get("projectName") or directory.name),
                apis=apis,
                extra={k: v for k, v in data.items() if k not in known},
            )
    return None


# -- init -------------------------------------------------------------------------------------------


def helm_project_files(*, domain: str, repo: str, project_name: str) -> dict[str, str]:
    """The files of a new Helm operator project (path -> content)."""
    if not _DOMAIN.match(domain):
        raise HelmProjectError(
            f"--domain {domain!r} is not a DNS domain with a dot (for example example.com)"
        )
    if not _PROJECT_NAME.match(project_name):
        raise HelmProjectError(
            f"project name {project_name!r} is not a lower-case DNS label of at most 30 characters "
            "starting with a letter: pass --project-name"
        )
    project = HelmProject(Path("."), domain, repo, project_name)
    ns = f"{project_name}-system"
    return {
        PROJECT_FILE: project.to_yaml(),
        "watches.yaml": "# Use `kubeop create api --helm-chart` to add watches to this file.\n[]\n",
        "helm-charts/.gitkeep": "",
        "Dockerfile": _DOCKERFILE,
        ".dockerignore": "*\n!watches.yaml\n!helm-charts/\n",
        "Makefile": _MAKEFILE.replace("{{name}}", project_name),
        "README.md": _README.replace("{{name}}", project_name),
        "config/crd/kustomization.yaml": _kustomization([]),
        "config/samples/kustomization.yaml": _kustomization([]),
        "config/rbac/role.yaml": _role(project_name, rbac_rules([])),
        "config/rbac/service_account.yaml": yaml.safe_dump(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "controller-manager"}},
            sort_keys=False,
        ),
        "config/rbac/role_binding.yaml": yaml.safe_dump(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "manager-rolebinding"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "manager-role",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "controller-manager", "namespace": ns}],
            },
            sort_keys=False,
        ),
        "config/rbac/kustomization.yaml": _kustomization(
            ["service_account.yaml", "role.yaml", "role_binding.yaml"]
        ),
        "config/manager/manager.yaml": _MANAGER,
        "config/manager/kustomization.yaml": _kustomization(["manager.yaml"]),
        "config/default/kustomization.yaml": yaml.safe_dump(
            {
                "namespace": ns,
                "namePrefix": f"{project_name}-",
                "resources": ["../crd", "../rbac", "../manager"],
            },
            sort_keys=False,
        ),
    }


# -- create api ---------------------------------------------------------------------------------------


def copy_chart(chart: Path, project_root: Path) -> tuple[str, bool]:
    """Copy ``chart`` to ``helm-charts/<name>`` (unless it already is there); returns the
    relative path and whether anything was copied. An existing different directory is kept."""
    chart = chart.resolve()
    meta = _chart_meta(chart)
    name = str(meta.get("name") or chart.name)
    target = project_root / "helm-charts" / name
    rel = f"helm-charts/{name}"
    if chart == target.resolve():
        return rel, False
    if target.exists():
        return rel, False
    shutil.copytree(chart, target, ignore=shutil.ignore_patterns(".git"))
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
    (relative to the project, already copied): its CRD, sample, watches.yaml entry, the
    manager's ClusterRole and the PROJECT entry."""
    check_kind(kind)
    check_version(version)
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
    watch = Watch(full_group, version, kind, chart_dir)
    if any((w.group, w.version, w.kind) == (full_group, version, kind) for w in existing):
        raise HelmProjectError(f"watches.yaml already has {full_group}/{version} {kind}")
    try:
        crd = crd_for_chart(
            chart_dir, full_group, version, kind, scope="Namespaced" if namespaced else "Cluster"
        )
    except HelmChartError as e:
        raise HelmProjectError(str(e)) from None
    crd_file = f"bases/{full_group}_{api.plural}.yaml"
    sample_file = f"{group or full_group}_{version}_{kind.lower()}.yaml"
    apis = (*project.apis, api)
    updated = HelmProject(
        project.root, project.domain, project.repo, project.project_name, apis, project.extra
    )
    charts = [project.root / a.chart for a in apis]
    watches_body = yaml.safe_dump([w.to_dict(project.root) for w in [*existing, watch]], sort_keys=False)
    return {
        PROJECT_FILE: updated.to_yaml(),
        "watches.yaml": "# Use `kubeop create api --helm-chart` to add watches to this file.\n"
        + watches_body,
        f"config/crd/{crd_file}": yaml.safe_dump(crd, sort_keys=False, width=1 << 16),
        "config/crd/kustomization.yaml": _kustomization(
            [*_resources(project.root / "config/crd/kustomization.yaml"), crd_file]
        ),
        f"config/samples/{sample_file}": yaml.safe_dump(_sample(api, chart_dir), sort_keys=False),
        "config/samples/kustomization.yaml": _kustomization(
            [*_resources(project.root / "config/samples/kustomization.yaml"), sample_file]
        ),
        "config/rbac/role.yaml": _role(project.project_name, rbac_rules(apis, charts, helm=helm)),
    }


def _sample(api: HelmApi, chart: Path) -> dict[str, Any]:
    """A resource whose spec is the chart's default values (operator-sdk does the same)."""
    values = _read_yaml(chart / "values.yaml") or {}
    md: dict[str, Any] = {"name": f"{api.kind.lower()}-sample"}
    return {"apiVersion": f"{api.group}/{api.version}", "kind": api.kind, "metadata": md, "spec": values}


def chart_kinds(chart: Path, *, helm: str | None = None) -> list[tuple[str, str]]:
    """The (apiVersion, kind) pairs a chart renders with its default values: ``helm template``
    when a helm binary is available and the chart renders without values, else the ``kind:``
    lines of its templates."""
    found: dict[tuple[str, str], None] = {}
    rendered = _helm_template(chart, helm)
    if rendered is not None:
        for doc in yaml.safe_load_all(rendered):
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
    binary = helm
    if binary is None:
        try:
            from kubeop.helm.engine import find_helm

            binary = str(find_helm())
        except Exception:
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
) -> list[dict[str, Any]]:
    """The manager's rules: Helm's release storage, events, leader election, each kind (with its
    status and finalizers), and every kind the charts render (Helm creates, updates and deletes
    them; the operator watches them)."""
    rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": _ALL},
        {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": _ALL},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]},
    ]
    for api in apis:
        rules.append({"apiGroups": [api.group], "resources": [api.plural], "verbs": _ALL})
        rules.append(
            {
                "apiGroups": [api.group],
                "resources": [f"{api.plural}/status", f"{api.plural}/finalizers"],
                "verbs": ["get", "patch", "update"],
            }
        )
    by_group: dict[str, set[str]] = {}
    for chart in charts:
        for api_version, kind in chart_kinds(chart, helm=helm):
            group = api_version.rpartition("/")[0] if "/" in api_version else ""
            by_group.setdefault(group, set()).add(_PLURALS.get(kind, guess_plural(kind)))
    for group in sorted(by_group):
        resources = sorted(by_group[group] - ({"secrets"} if group == "" else set()))
        if resources:
            rules.append({"apiGroups": [group], "resources": resources, "verbs": _ALL})
    return rules


_ALL = ["create", "delete", "get", "list", "patch", "update", "watch"]


def _role(project_name: str, rules: list[dict[str, Any]]) -> str:
    doc = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "manager-role"},
        "rules": rules,
    }
    return f"# The {project_name} manager's permissions (rewritten by kubeop create api --helm-chart).\n" + (
        yaml.safe_dump(doc, sort_keys=False)
    )


def _kustomization(resources: list[str]) -> str:
    seen = list(dict.fromkeys(resources))
    return yaml.safe_dump({"resources": seen}, sort_keys=False)


def _resources(path: Path) -> list[str]:
    data = _read_yaml(path)
    return [str(r) for r in (data or {}).get("resources") or []] if isinstance(data, dict) else []


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text())
    except FileNotFoundError:
        return None
    except yaml.YAMLError as e:
        raise HelmProjectError(f"{path} is not valid YAML: {e}") from None


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


_DOCKERFILE = f"""# The Helm operator: kubeop's generic controller, this project's watches.yaml and charts,
# and the helm binary (built from its Go module, pinned).
FROM golang:1.26 AS helm
RUN CGO_ENABLED=0 go install helm.sh/helm/v3/cmd/helm@{HELM_VERSION}

FROM python:3.12-slim
RUN pip install --no-cache-dir kubeop
COPY --from=helm /go/bin/helm /usr/local/bin/helm
ENV KUBEOP_HELM=/usr/local/bin/helm HOME=/tmp
WORKDIR /operator
COPY watches.yaml watches.yaml
COPY helm-charts/ helm-charts/
USER 65532:65532
ENTRYPOINT ["python", "-m", "kubeop.helm", "--watches-file", "watches.yaml"]
"""

_MAKEFILE = """IMG ?= controller:latest

.PHONY: run install uninstall deploy undeploy docker-build

run: ## Run the operator against the current kubeconfig's cluster.
\tpython -m kubeop.helm --watches-file watches.yaml --metrics-bind-address 127.0.0.1:8080

install: ## Install the CRDs.
\tkubectl apply -k config/crd

uninstall: ## Remove the CRDs (and every resource of their kinds).
\tkubectl delete -k config/crd

docker-build: ## Build the operator image.
\tdocker build -t $(IMG) .

deploy: ## Deploy the operator (CRDs, RBAC, Deployment) to the cluster.
\tcd config/manager && kustomize edit set image controller=$(IMG)
\tkubectl apply -k config/default

undeploy: ## Remove the operator.
\tkubectl delete -k config/default
"""

_README = """# {{name}}

A Helm-based operator made with `kubeop init --plugin helm`: each custom resource is a Helm
release of the chart `watches.yaml` names for its kind, with the resource's `spec` as the
chart's values, kept alive by the operator (`python -m kubeop.helm`).

    kubeop create api --group <group> --version v1 --kind <Kind> --helm-chart path/to/chart
    make install run
    kubectl apply -k config/samples
"""

_MANAGER = yaml.safe_dump(
    {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "controller-manager", "labels": {"control-plane": "controller-manager"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"control-plane": "controller-manager"}},
            "template": {
                "metadata": {"labels": {"control-plane": "controller-manager"}},
                "spec": {
                    "serviceAccountName": "controller-manager",
                    "securityContext": {"runAsNonRoot": True},
                    "containers": [
                        {
                            "name": "manager",
                            "image": "controller:latest",
                            "args": [
                                "--leader-elect",
                                "--metrics-bind-address=0.0.0.0:8080",
                                "--health-probe-bind-address=0.0.0.0:8081",
                            ],
                            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8081}},
                            "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8081}},
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "128Mi"},
                                "limits": {"memory": "512Mi"},
                            },
                        }
                    ],
                },
            },
        },
    },
    sort_keys=False,
)
