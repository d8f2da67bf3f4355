"""``kubeop create api``: a kind (model, sample, test) and its controller, registered in the project.

::

    create_api(project, group="webapp", version="v1", kind="Guestbook")

writes ``<package>/api/v1/guestbook.py`` (spec and status models), ``config/samples/...``,
``<package>/controllers/guestbook.py`` (a reconciler with its ``@rbac_rule`` declarations),
tests, adds the controller to main.py at its scaffold markers, records the API in PROJECT and
regenerates the manifests.

Guarantees: a file that exists is never rewritten, a line already in main.py is not added
again, and a second run for the same API changes nothing and says so.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from kubeop.scaffold.errors import ScaffoldError
from kubeop.scaffold.existing_kind import ExistingKind, builtin_kind, external_kind
from kubeop.scaffold.files import Change, Planned, write_planned
from kubeop.scaffold.manifests import generated, plan_manifests
from kubeop.scaffold.markers import MarkerMissing, insert_at_marker
from kubeop.scaffold.names import ApiNames
from kubeop.scaffold.project import Project, Resource
from kubeop.scaffold.render import render_template

__all__ = ["ApiResult", "create_api"]


@dataclass
class ApiResult:
    """What ``create api`` did: the files, the updated project, and anything left to do by hand."""

    project: Project
    resource: Resource
    changes: list[Change] = field(default_factory=list)
    exists: bool = False
    todo: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Places:
    """Where an API's files go: ``api/<version>/`` and ``controllers/``, or in a multigroup project
    ``api/<group>/<version>/`` and ``controllers/<group>/`` (kubebuilder's multigroup layout)."""

    package: str
    version: str
    module: str
    group_dir: str
    """"" in a single-group project; else the group's package name (``cache``, ``batch_tools``)."""

    @classmethod
    def of(cls, project: Project, api: ApiNames) -> _Places:
        group_dir = ""
        if project.multigroup:
            group_dir = re.sub(r"[^a-z0-9_]", "_", api.group or api.group_prefix)
        return cls(project.package, api.version, api.module, group_dir)

    @property
    def api_package(self) -> str:
        return ".".join(p for p in (self.package, "api", self.group_dir, self.version) if p)

    @property
    def model_module(self) -> str:
        return f"{self.api_package}.{self.module}"

    @property
    def controllers_package(self) -> str:
        return ".".join(p for p in (self.package, "controllers", self.group_dir) if p)

    @property
    def test_prefix(self) -> str:
        return f"tests/test_{self.group_dir}_" if self.group_dir else "tests/test_"

    @staticmethod
    def file(module: str) -> str:
        return module.replace(".", "/") + ".py"


def _values(project: Project, api: ApiNames, namespaced: bool) -> dict[str, str]:
    model_module = _Places.of(project, api).model_module
    return {
        "model_module": model_module,
        "model_path": _Places.file(model_module),
        "version_options": "",
        "project_name": project.project_name,
        "package": project.package,
        "kind": api.kind,
        "lower": api.lower,
        "module": api.module,
        "plural": api.plural,
        "full_group": api.full_group,
        "version": api.version,
        "api_version": api.api_version,
        "scope": "Namespaced" if namespaced else "Cluster",
        "sample_file": api.sample_file,
    }


def _model_exists(project: Project, api: ApiNames) -> bool:
    return (project.root / _Places.file(_Places.of(project, api).model_module)).is_file()


def create_api(
    project: Project,
    *,
    group: str,
    version: str,
    kind: str,
    resource: bool = True,
    controller: bool = True,
    namespaced: bool = True,
    plural: str = "",
    external_api_domain: str = "",
) -> ApiResult:
    """Add an API to ``project`` (see the module docstring). With ``resource=False`` and a kind
    the project does not define (a built-in kind, or with ``external_api_domain`` another
    operator's), only its controller is written (:mod:`kubeop.scaffold.existing_kind`)."""
    project.require_own_package("create api")
    if not resource:
        existing = _existing_kind(project, group, version, kind, external_api_domain, plural)
        if existing is not None:
            return _create_existing_controller(project, existing, namespaced)
    elif external_api_domain:
        raise ScaffoldError(
            "--external-api-domain is for a controller of another operator's kind: add --no-resource "
            "(the kind's CRD is that operator's to define)"
        )
    api = ApiNames(group, version, kind, project.domain, plural)
    group = api.group  # webapp.example.com -> webapp
    _refuse_other_group(project, api)
    api = _with_plural(project, api)
    if not resource and not controller:
        raise ScaffoldError("nothing to create: --no-resource and --no-controller; drop one of them")
    pkg = project.package
    places = _Places.of(project, api)
    recorded = project.find(Resource(group, version, kind, project.domain))
    # a recorded model stays where it was written (a project switched to multigroup keeps its old APIs)
    model_module = (
        recorded.path if recorded is not None and recorded.api and recorded.path else places.model_module
    )
    if recorded is not None:
        if (recorded.api or not resource) and (recorded.controller or not controller):
            return ApiResult(project, recorded, exists=True)
        if recorded.api and resource and recorded.namespaced != namespaced:
            scope = "namespaced" if recorded.namespaced else "cluster-scoped"
            raise ScaffoldError(
                f"{kind} ({api.api_version}) exists and is {scope}; change scope= in its model by hand "
                "instead of creating it again"
            )
    if not resource and not (recorded is not None and recorded.api) and not _model_exists(project, api):
        raise ScaffoldError(
            f"--no-resource: the project has no {kind} model ({_Places.file(places.model_module)}) for the "
            "controller to reconcile, and kubeop.kinds has no built-in kind of that name; create the kind "
            "first (drop --no-resource), or for another operator's kind pass its group's domain with "
            "--external-api-domain (e.g. --group cert-manager --external-api-domain io)"
        )
    has_api = recorded is not None and recorded.api
    other = next(iter(_other_versions(project, api)), None)
    if resource and not has_api and other is not None and other.namespaced != namespaced:
        scope, flag = ("namespaced", "--namespaced") if other.namespaced else ("cluster-scoped", "--cluster")
        raise ScaffoldError(
            f"{kind} {other.version} is {scope}, and the versions of a kind share their scope: pass {flag}"
        )
    wanted = Resource(
        group=group,
        version=version,
        kind=kind,
        domain=project.domain,
        namespaced=recorded.namespaced if recorded is not None and has_api else namespaced,
        api=has_api or resource,
        controller=(recorded is not None and recorded.controller) or controller,
        path=model_module,
        plural=api.explicit_plural,
    )
    values = _values(project, api, wanted.namespaced)
    values["model_module"] = model_module
    values["model_path"] = _Places.file(model_module)
    if api.explicit_plural:
        values["version_options"] += f'\n    plural="{api.plural}",'
    if resource and not has_api and other is not None and not _storage_declared(project, api):
        # Several versions of a kind are one CRD with exactly one storage version: a second version
        # becomes it (objects are stored as the newest API) until the user moves storage=True.
        values["version_options"] += "\n    storage=True,"
    files: dict[str, str] = {}
    packages: dict[str, str] = {}  # a group's package in a multigroup project: path -> docstring
    if resource and not has_api:
        if places.group_dir:
            packages[_Places.file(f"{pkg}.api.{places.group_dir}.__init__")] = f"The {api.full_group} APIs."
        files[_Places.file(f"{places.api_package}.__init__")] = "api/version__init__.py.tmpl"
        files[_Places.file(model_module)] = "api/kind.py.tmpl"
        files[f"config/samples/{api.sample_file}"] = "api/sample.yaml.tmpl"
        files[f"{places.test_prefix}{api.module}_{version}.py"] = "api/test_api.py.tmpl"
    if controller:
        if places.group_dir:
            packages[_Places.file(f"{places.controllers_package}.__init__")] = (
                f"The controllers of the {api.full_group} kinds."
            )
        files[_Places.file(f"{places.controllers_package}.{api.module}")] = "api/controller.py.tmpl"
        files[f"{places.test_prefix}{api.module}_controller.py"] = "api/test_controller.py.tmpl"
    plans = [Planned(path, f'"""{doc}"""\n') for path, doc in packages.items()]
    plans += [Planned(path, render_template(template, values)) for path, template in files.items()]
    result = ApiResult(project.with_resource(wanted), wanted)
    result.changes = write_planned(project.root, plans)
    if controller:
        _register(project.root, pkg, api.module, result, places.controllers_package, places.group_dir)
    result.changes += write_planned(project.root, [Planned("PROJECT", result.project.to_yaml(), _always)])
    # Files are written by now: if the code does not import, fixing it and running manifests is the way.
    found = generated(result.project, command="manifests")
    result.changes += write_planned(project.root, plan_manifests(result.project, found))
    return result


def _refuse_other_group(project: Project, api: ApiNames) -> None:
    """A kind's model, controller, sample and tests are named after the kind: in one project, a kind
    of the same name in another group would take the same files, unless the project keeps a
    package per group (multigroup)."""
    if project.multigroup:
        return
    for other in project.resources:
        if other.kind == api.kind and other.full_group != api.full_group:
            raise ScaffoldError(
                f"{api.kind} exists in this project in group {other.full_group} ({other.version}): "
                f"a {api.kind} of group {api.full_group} would share its module, controller and tests. "
                "Name the kind differently, or switch the project to one package per group first: "
                "kubeop edit --multigroup"
            )


def _existing_kind(
    project: Project, group: str, version: str, kind: str, external_domain: str, plural: str
) -> ExistingKind | None:
    """The kind a ``--no-resource`` controller reconciles when the project does not define it."""
    if external_domain:
        return external_kind(group, version, kind, external_domain, plural)
    defined = any(r.api and r.kind == kind and not r.external for r in project.resources)
    module = kind.lower() + "_" if keyword.iskeyword(kind.lower()) else kind.lower()
    if defined or (project.root / project.package / "api" / version / f"{module}.py").is_file():
        return None
    return builtin_kind(group, version, kind)


def _create_existing_controller(project: Project, kind: ExistingKind, namespaced: bool) -> ApiResult:
    pkg = project.package
    wanted = Resource(
        group=kind.group,
        version=kind.version,
        kind=kind.kind,
        domain="",
        api=False,
        controller=True,
        path="kubeop.kinds" if kind.builtin else "",
        external=True,
    )
    recorded = project.find(wanted)
    if recorded is not None and recorded.controller:
        return ApiResult(project, recorded, exists=True)
    group_dir = re.sub(r"[^a-z0-9_]", "_", kind.group.split(".")[0] or "core") if project.multigroup else ""
    controllers = ".".join(p for p in (pkg, "controllers", group_dir) if p)
    for other in project.resources:
        if not project.multigroup and other.kind == kind.kind and other.full_group != kind.group:
            raise ScaffoldError(
                f"{kind.kind} exists in this project in group {other.full_group} ({other.version}): a "
                f"controller for {kind.api_version} {kind.kind} would take its module "
                f"{pkg}/controllers/{kind.module}.py; switch the project to one package per group first: "
                "kubeop edit --multigroup"
            )
    values = kind.template_values(namespaced)
    plans = []
    if group_dir:
        plans.append(
            Planned(
                _Places.file(f"{controllers}.__init__"),
                f'"""The controllers of {kind.group or "core"} kinds."""\n',
            )
        )
    plans.append(
        Planned(
            _Places.file(f"{controllers}.{kind.module}"),
            render_template("api/controller_existing.py.tmpl", values),
        )
    )
    result = ApiResult(project.with_resource(wanted), wanted)
    result.changes = write_planned(project.root, plans)
    _register(project.root, pkg, kind.module, result, controllers, group_dir)
    result.changes += write_planned(project.root, [Planned("PROJECT", result.project.to_yaml(), _always)])
    found = generated(result.project, command="manifests")
    result.changes += write_planned(project.root, plan_manifests(result.project, found))
    return result


def _with_plural(project: Project, api: ApiNames) -> ApiNames:
    """The versions of a kind are one CRD, with one plural: a new version takes the recorded one,
    and ``--plural`` cannot change it."""
    recorded = {
        r.plural
        for r in project.resources
        if r.plural and (r.kind, r.full_group) == (api.kind, api.full_group)
    }
    if not recorded:
        return api
    plural = recorded.pop()
    if api.explicit_plural and api.explicit_plural != plural:
        raise ScaffoldError(
            f"--plural {api.explicit_plural}: {api.kind} ({api.full_group}) is recorded with plural {plural} "
            "(the versions of a kind share their CRD and its plural); drop --plural"
        )
    return replace(api, explicit_plural=plural)


def _always(_: str) -> bool:
    return True


def _other_versions(project: Project, api: ApiNames) -> list[Resource]:
    """The project's models of the same kind in other versions."""
    return [
        r
        for r in project.resources
        if r.api and (r.group, r.kind) == (api.group, api.kind) and r.version != api.version
    ]


def _storage_declared(project: Project, api: ApiNames) -> bool:
    """Whether a model of another version of this kind already says storage=True."""
    found = generated(project, command="create api")
    return any(
        m.kind == api.kind and m.__crd__.group == api.full_group and m.__crd__.storage is True
        for m in found.models
    )


def _register(
    root: Path, package: str, module: str, result: ApiResult, controllers: str = "", group_dir: str = ""
) -> None:
    """Add the controller's import and ``controller()`` call to main.py at the scaffold markers."""
    path = root / package / "main.py"
    alias = f"{group_dir}_{module}_controller" if group_dir else f"{module}_controller"
    lines = {  # marker -> (line, below the marker)
        "imports": (f"from {controllers or package + '.controllers'} import {module} as {alias}", True),
        "controllers": (f"{alias}.controller(),", False),
    }
    try:
        text = path.read_text()
    except FileNotFoundError:
        result.todo.append(
            f"{package}/main.py is missing: add {lines['controllers'][0]!r} to its controllers()"
        )
        return
    changed = False
    for marker, (line, below) in lines.items():
        try:
            text, added = insert_at_marker(text, marker, line, below=below)
        except MarkerMissing as e:
            result.todo.append(f"{package}/main.py has no '{e.args[0]}' line: add {line!r} there by hand")
            continue
        changed = changed or added
    if changed:
        path.write_text(text)
    result.changes.append(Change(f"{package}/main.py", "updated" if changed else "unchanged"))
