"""The PROJECT file: what ``kubeop init`` and ``kubeop create api`` recorded about a project.

Like kubebuilder's, it is YAML at the project's root: the domain, the repository, the layout
(``python.kubeop.dev/v1``), the project name and Python package, and one entry per API::

    domain: example.com
    layout:
    - python.kubeop.dev/v1
    namespace: guestbook-operator-system
    package: guestbook_operator
    projectName: guestbook-operator
    repo: github.com/example/guestbook-operator
    resources:
    - api: {crdVersion: v1, namespaced: true}
      controller: true
      domain: example.com
      group: webapp
      kind: Guestbook
      path: guestbook_operator.api.v1.guestbook
      version: v1
    version: "3"

Commands find the project by walking up from the current directory to the first PROJECT file.
``namespace`` is where ``kubeop deploy`` puts the operator (``<projectName>-system`` when the key
is missing); ``kubeop init --namespace`` and ``kubeop manifests --namespace`` set it, and every
file ``kubeop manifests`` writes follows it. Keys kubeop does not know are kept as they are when
the file is written back. ``webhookCerts`` says where the webhook server's certificate comes from
in the cluster: ``self-managed`` (the default: the operator keeps it in a Secret) or
``cert-manager``; ``kubeop manifests --webhook-certs`` sets it.

``importRoot`` (optional, ``.`` when missing) is for a project whose package sits inside a larger
source tree, as the examples in kubeop's own repository do: the directory the package is imported
from, relative to the project's root and made of ``..`` only. With ``importRoot: ../..`` and
``package: examples.mysql`` the project at ``<repo>/examples/mysql`` is the package itself,
imported from ``<repo>``. The package must still live inside the project (the root's last
directories are the package's first names), so nothing outside it is read as the project's code.
"""

from __future__ import annotations

import keyword
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from kubeop.core.yaml_input import load_yaml
from kubeop.scaffold.errors import ScaffoldError, yaml_problem
from kubeop.scaffold.names import ApiNames, ProjectNames, check_domain, check_namespace, check_repo
from kubeop.scaffold.render import dump_yaml

__all__ = [
    "LAYOUT",
    "PROJECT_FILE",
    "WEBHOOK_CERTS",
    "Project",
    "Resource",
    "check_import_root",
    "check_package",
    "check_webhook_certs",
    "find_project",
    "load_project",
]

PROJECT_FILE = "PROJECT"
LAYOUT = "python.kubeop.dev/v1"
_HEADER = (
    "# Written by kubeop init and kubeop create api: it records the project's layout and APIs.\n"
    "# Commands read it; edit it only to correct what they recorded.\n"
)
_KNOWN = (
    "domain",
    "importRoot",
    "layout",
    "multigroup",
    "namespace",
    "package",
    "projectName",
    "repo",
    "resources",
    "version",
    "webhookCerts",
)
WEBHOOK_CERTS = ("self-managed", "cert-manager")


@dataclass(frozen=True)
class Resource:
    """One API of the project: a kind with (or without) its model and its controller."""

    group: str
    version: str
    kind: str
    domain: str
    namespaced: bool = True
    api: bool = True
    controller: bool = True
    path: str = ""
    plural: str = ""
    """``--plural`` when it was given (kubebuilder's ``plural``); empty: guessed from the kind."""
    external: bool = False
    """A kind the project reconciles but does not define (built-in or another operator's): its
    group is the whole API group, its domain empty (kubebuilder's ``external: true``)."""

    @property
    def full_group(self) -> str:
        """The API group with the project's domain (``cache.example.com``)."""
        return ".".join(p for p in (self.group, self.domain) if p)

    @property
    def names(self) -> ApiNames:
        """The names derived from the resource's group, version, kind, domain and plural."""
        return ApiNames(self.group, self.version, self.kind, self.domain, self.plural)

    def same_api(self, other: Resource) -> bool:
        """Whether ``other`` has the same group, domain, version and kind."""
        return (self.group, self.domain, self.version, self.kind) == (
            other.group,
            other.domain,
            other.version,
            other.kind,
        )

    def to_dict(self) -> dict[str, Any]:
        """The resource as a PROJECT file entry."""
        out: dict[str, Any] = {}
        if self.api:
            out["api"] = {"crdVersion": "v1", "namespaced": self.namespaced}
        if self.controller:
            out["controller"] = True
        out["domain"] = self.domain
        if self.external:
            out["external"] = True
        out["group"] = self.group
        out["kind"] = self.kind
        if self.path:
            out["path"] = self.path
        if self.plural:
            out["plural"] = self.plural
        out["version"] = self.version
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Resource:
        """A resource from a PROJECT file entry; raises ScaffoldError naming a malformed field."""
        api = data.get("api")
        if api is not None and not isinstance(api, dict):
            raise ScaffoldError(
                f"{PROJECT_FILE}: a resource entry's api must be a mapping (api: {{crdVersion: v1, "
                f"namespaced: true}}), not {api!r}; fix or remove the entry"
            )
        try:
            return cls(
                group=str(data.get("group") or ""),
                version=str(data["version"]),
                kind=str(data["kind"]),
                domain=str(data.get("domain") or ""),
                namespaced=bool((api or {}).get("namespaced", True)),
                api=api is not None,
                controller=bool(data.get("controller", False)),
                path=str(data.get("path") or ""),
                plural=str(data.get("plural") or ""),
                external=bool(data.get("external", False)),
            )
        except KeyError as e:
            raise ScaffoldError(
                f"{PROJECT_FILE}: a resource entry has no {e.args[0]!r}: {data!r}; fix or remove the entry"
            ) from None


@dataclass(frozen=True)
class Project:
    """A project on disk: its root directory and what its PROJECT file says."""

    root: Path
    domain: str
    repo: str
    project_name: str
    package: str
    resources: tuple[Resource, ...] = ()
    layout: tuple[str, ...] = (LAYOUT,)
    extra: dict[str, Any] = field(default_factory=dict)
    namespace: str = ""
    """Where ``deploy`` puts the operator; empty: ``<projectName>-system``."""
    webhook_certs: str = "self-managed"
    """Where the webhook server's certificate comes from in the cluster (:data:`WEBHOOK_CERTS`)."""
    import_root: str = "."
    """PROJECT's ``importRoot``: where the package is imported from, relative to ``root`` (``..`` only)."""
    multigroup: bool = False
    """PROJECT's ``multigroup``: new APIs go to ``api/<group>/<version>/`` and their controllers to
    ``controllers/<group>/`` (``kubeop edit --multigroup``), so kinds of the same name in several
    groups each have their own modules."""

    def __post_init__(self) -> None:
        if not self.namespace:
            object.__setattr__(self, "namespace", self.names.namespace)

    @property
    def names(self) -> ProjectNames:
        """The names derived from the project's name."""
        return ProjectNames(self.project_name)

    @property
    def package_root(self) -> Path:
        """The directory the package is imported from (what goes on ``sys.path``)."""
        ups = self.import_root.count("..")
        return self.root.parents[ups - 1] if ups else self.root

    @property
    def package_dir(self) -> Path:
        """The package's directory: ``<root>/<package>`` unless PROJECT has an ``importRoot``."""
        return self.package_root.joinpath(*self.package.split("."))

    def require_own_package(
        self, command: str, fix: str = "add the files by hand, following a project made by kubeop init"
    ) -> None:
        """Refuse ``command`` (one that writes into ``<root>/<package>`` or copies it into an image)
        in a project with an ``importRoot``; ``fix`` says what to do instead."""
        if self.import_root != ".":
            raise ScaffoldError(
                f"kubeop {command} works on <root>/{self.package}/ (the layout kubeop init makes), but "
                f"this project's package {self.package} is imported from {self.import_root} "
                f"(importRoot in {PROJECT_FILE}): {fix}"
            )

    def find(self, api: Resource) -> Resource | None:
        """The project's resource of the same group, domain, version and kind as ``api``, or None."""
        return next((r for r in self.resources if r.same_api(api)), None)

    def with_resource(self, resource: Resource) -> Project:
        """This project with ``resource`` added, or replacing the entry for the same API."""
        kept = [r for r in self.resources if not r.same_api(resource)]
        index = next((i for i, r in enumerate(self.resources) if r.same_api(resource)), len(kept))
        kept.insert(index, resource)
        return replace(self, resources=tuple(kept))

    def to_yaml(self) -> str:
        """The PROJECT file's text."""
        data: dict[str, Any] = {
            "domain": self.domain,
            "layout": list(self.layout),
            "namespace": self.namespace,
            "package": self.package,
            "projectName": self.project_name,
            "repo": self.repo,
        }
        if self.resources:
            data["resources"] = [r.to_dict() for r in self.resources]
        data["version"] = "3"
        if self.webhook_certs != "self-managed":
            data["webhookCerts"] = self.webhook_certs
        if self.import_root != ".":
            data["importRoot"] = self.import_root
        if self.multigroup:
            data["multigroup"] = True
        data.update(self.extra)
        return _HEADER + dump_yaml(dict(sorted(data.items())))

    def save(self) -> None:
        """Write the project's PROJECT file."""
        (self.root / PROJECT_FILE).write_text(self.to_yaml())


def load_project(root: Path) -> Project:
    """Read ``root/PROJECT``; a clear error if it is missing or not kubeop's."""
    path = root / PROJECT_FILE
    try:
        data = load_yaml(path.read_text())
    except FileNotFoundError:
        raise ScaffoldError(f"{root} has no {PROJECT_FILE} file: run kubeop init there first") from None
    except yaml.YAMLError as e:
        raise ScaffoldError(
            f"{path} is not valid YAML ({yaml_problem(e)}); fix it or run kubeop init again"
        ) from None
    if not isinstance(data, dict):
        raise ScaffoldError(f"{path} does not describe a project; run kubeop init again")
    raw_layout = data.get("layout") or ()
    if not isinstance(raw_layout, list | tuple):
        raise ScaffoldError(f"{path}: layout must be a list (layout: [{LAYOUT}]), not {raw_layout!r}")
    layout = tuple(str(x) for x in raw_layout)
    if "helm.kubeop.dev/v1" in layout:
        raise ScaffoldError(
            f"{path} is a Helm operator project (layout helm.kubeop.dev/v1): this command works on "
            "Python projects only; a Helm project takes create api --helm-chart, manifests, install, "
            "run, docker-build and deploy"
        )
    if LAYOUT not in layout:
        raise ScaffoldError(
            f"{path} is a project of layout {', '.join(layout) or '(none)'}, not {LAYOUT}: kubeop works on "
            "projects made by kubeop init (a Go kubebuilder project needs kubebuilder)"
        )
    name = _text(data, "projectName", path, "")
    if not name:
        raise ScaffoldError(f"{path} has no projectName; add one (the name kubeop init was given)")
    names = ProjectNames(name)
    namespace = _text(data, "namespace", path, names.namespace)
    check_namespace(namespace, source=f"{path}: namespace")
    certs = _text(data, "webhookCerts", path, "self-managed")
    check_webhook_certs(certs, source=f"{path}: webhookCerts")
    domain = _text(data, "domain", path, "")
    if domain:
        check_domain(domain, source=f"{path}: domain")
    repo = _text(data, "repo", path, "")
    if repo:
        check_repo(repo, source=f"{path}: repo")
    package = _text(data, "package", path, names.package)
    # it becomes a directory every command writes into: never '..', '/' or a line break
    check_package(package, source=f"{path}: package", default=names.package)
    import_root = check_import_root(
        data.get("importRoot", "."), root=root, package=package, source=f"{path}: importRoot"
    )
    if "." in package and import_root == ".":
        raise ScaffoldError(
            f"{path}: package {package!r} has dots, so it is imported from an ancestor of the project's "
            f"root: say which with importRoot (importRoot: {'/'.join(['..'] * package.count('.'))}/..)"
        )
    resources = data.get("resources") or []
    if not isinstance(resources, list) or not all(isinstance(r, dict) for r in resources):
        raise ScaffoldError(
            f"{path}: resources must be a list of entries (- {{group: .., version: .., kind: ..}}), "
            f"not {resources!r}; fix it or run kubeop create api again"
        )
    return Project(
        root=root,
        domain=domain,
        repo=repo,
        project_name=name,
        package=package,
        resources=tuple(Resource.from_dict(r) for r in resources),
        layout=layout,
        extra={k: v for k, v in data.items() if k not in _KNOWN},
        namespace=namespace,
        webhook_certs=certs,
        import_root=import_root,
        multigroup=_flag(data, "multigroup", path),
    )


def _flag(data: dict[str, Any], key: str, path: Path) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise ScaffoldError(f"{path}: {key} must be true or false, not {value!r}")
    return value


def _text(data: dict[str, Any], key: str, path: Path, default: str) -> str:
    """A string field of PROJECT (a number reads as its text); missing or empty is ``default``."""
    value = data.get(key)
    if value is None or value == "":
        return default
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ScaffoldError(
            f"{path}: {key} must be a string, not {value!r}: write it as {key}: <value> (or remove the line)"
        )
    return str(value)


def check_package(value: str, *, source: str, default: str = "") -> str:
    """A Python package name: an identifier, or dotted identifiers (``examples.mysql``) in a
    project with an ``importRoot``."""
    if not all(part.isidentifier() and not keyword.iskeyword(part) for part in value.split(".")):
        raise ScaffoldError(
            f"{source} {value!r} is not a Python package name: use the project's package directory"
            + (f" (package: {default})" if default else "")
        )
    return value


def check_import_root(value: object, *, root: Path, package: str, source: str = "importRoot") -> str:
    """PROJECT's ``importRoot``, normalized (``.`` or ``..``/``../..``...): relative, made of ``..``
    only, and such that ``package`` lives inside ``root`` (the root's last ``n`` directory names
    are the package's first ``n`` names)."""
    if not isinstance(value, str):
        raise ScaffoldError(
            f"{source} must be a string such as '../..' (got {type(value).__name__} {value!r}); "
            "remove the key when the package is <root>/<package>"
        )
    if any(c in value for c in "\r\n\0\\"):
        raise ScaffoldError(
            f"{source} {value!r} has a line break, NUL or backslash: "
            "write a relative path with / such as ../.."
        )
    if value.startswith("/") or (len(value) > 1 and value[1] == ":"):
        raise ScaffoldError(
            f"{source} {value!r} is absolute: write it relative to the project's root, such as ../.."
        )
    parts = [p for p in value.split("/") if p not in ("", ".")]
    if any(p != ".." for p in parts):
        raise ScaffoldError(
            f"{source} {value!r} must be made of '..' only (the directory the package is imported from "
            "is an ancestor of the project's root), such as ../.."
        )
    ups = len(parts)
    names = package.split(".")
    if ups and (ups > len(names) or ups >= len(root.parts) or list(root.parts[-ups:]) != names[:ups]):
        raise ScaffoldError(
            f"{source} {value!r} with package {package!r} puts the package outside the project "
            f"({root}): with importRoot {value!r} the root's last {ups} directories must be "
            f"{'/'.join(names[:ups])!r}; fix importRoot or package"
        )
    return "/".join(parts) if parts else "."


def check_webhook_certs(value: str, *, source: str = "--webhook-certs") -> str:
    if value not in WEBHOOK_CERTS:
        raise ScaffoldError(
            f"{source} {value!r} is not a certificate source: use self-managed (the operator keeps a CA "
            "and a certificate in a Secret) or cert-manager (a Certificate; cert-manager must be installed)"
        )
    return value


def find_project(start: Path) -> Project:
    """The project containing ``start``: the nearest directory upwards with a PROJECT file."""
    start = start.resolve()
    for directory in (start, *start.parents):
        if (directory / PROJECT_FILE).is_file():
            return load_project(directory)
    raise ScaffoldError(
        f"{start} is not inside a kubeop project (no {PROJECT_FILE} file here or above): "
        "cd into the project, pass --dir, or create one with kubeop init --domain example.com --repo ..."
    )
