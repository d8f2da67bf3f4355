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

from dataclasses import dataclass, field
from pathlib import Path

from kubeop.scaffold.errors import ScaffoldError
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


def _values(project: Project, api: ApiNames, namespaced: bool) -> dict[str, str]:
    return {
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
    return (project.root / project.package / "api" / api.version / f"{api.module}.py").is_file()


def create_api(
    project: Project,
    *,
    group: str,
    version: str,
    kind: str,
    resource: bool = True,
    controller: bool = True,
    namespaced: bool = True,
) -> ApiResult:
    """Add an API to ``project`` (see the module docstring)."""
    project.require_own_package("create api")
    api = ApiNames(group, version, kind, project.domain)
    if not resource and not controller:
        raise ScaffoldError("nothing to create: --no-resource and --no-controller; drop one of them")
    pkg = project.package
    recorded = project.find(Resource(group, version, kind, project.domain))
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
            f"--no-resource: the project has no {kind} model ({pkg}/api/{version}/{api.module}.py) for the "
            "controller to reconcile; create the kind first (drop --no-resource). Controllers for built-in "
            "kinds are not scaffolded"
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
        path=f"{pkg}.api.{version}.{api.module}",
    )
    values = _values(project, api, wanted.namespaced)
    if resource and not has_api and other is not None and not _storage_declared(project, api):
        # Several versions of a kind are one CRD with exactly one storage version: a second version
        # becomes it (objects are stored as the newest API) until the user moves storage=True.
        values["version_options"] = "\n    storage=True,"
    files: dict[str, str] = {}
    if resource and not has_api:
        files[f"{pkg}/api/{version}/__init__.py"] = "api/version__init__.py.tmpl"
        files[f"{pkg}/api/{version}/{api.module}.py"] = "api/kind.py.tmpl"
        files[f"config/samples/{api.sample_file}"] = "api/sample.yaml.tmpl"
        files[f"tests/test_{api.module}_{version}.py"] = "api/test_api.py.tmpl"
    if controller:
        files[f"{pkg}/controllers/{api.module}.py"] = "api/controller.py.tmpl"
        files[f"tests/test_{api.module}_controller.py"] = "api/test_controller.py.tmpl"
    plans = [Planned(path, render_template(template, values)) for path, template in files.items()]
    result = ApiResult(project.with_resource(wanted), wanted)
    result.changes = write_planned(project.root, plans)
    if controller:
        _register(project.root, pkg, api, result)
    result.changes += write_planned(project.root, [Planned("PROJECT", result.project.to_yaml(), _always)])
    # Files are written by now: if the code does not import, fixing it and running manifests is the way.
    found = generated(result.project, command="manifests")
    result.changes += write_planned(project.root, plan_manifests(result.project, found))
    return result


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


def _register(root: Path, package: str, api: ApiNames, result: ApiResult) -> None:
    """Add the controller's import and ``controller()`` call to main.py at the scaffold markers."""
    path = root / package / "main.py"
    alias = f"{api.module}_controller"
    lines = {  # marker -> (line, below the marker)
        "imports": (f"from {package}.controllers import {api.module} as {alias}", True),
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
