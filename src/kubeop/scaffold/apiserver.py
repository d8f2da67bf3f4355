"""``kubeop create apiserver``: a kind served by the project's own aggregated API server.

::

    create_apiserver(project, group="metrics", version="v1alpha1", kind="Usage", namespaced=True)

writes, once, the package ``<package>/apiserver/`` (``kinds()`` with its scaffold markers, and
``__main__.py``: ``python -m <package>.apiserver serve`` runs the server, ``... manifests``
prints its Service, APIService and RBAC), then per kind ``<package>/apiserver/<module>.py`` (the
model, a ``CustomResource`` of the group version) and ``tests/test_<module>_apiserver.py``, and
adds the kind to ``kinds()``. The kinds live outside ``<package>.api``, so ``kubeop manifests``
makes no CRD of them. One APIService serves one group version: a second group version is
refused. Guarantees as ``create api``: an existing file is never rewritten; a second run
changes nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kubeop.scaffold.errors import ScaffoldError
from kubeop.scaffold.files import Change, Planned, write_planned
from kubeop.scaffold.markers import MarkerMissing, insert_at_marker
from kubeop.scaffold.names import ApiNames
from kubeop.scaffold.project import Project
from kubeop.scaffold.render import render_template

__all__ = ["ApiServerResult", "create_apiserver"]

_GROUP_VERSION = re.compile(r'group="([^"]+)",\s*version="([^"]+)"')


@dataclass
class ApiServerResult:
    path: str
    changes: list[Change] = field(default_factory=list)
    exists: bool = False
    todo: list[str] = field(default_factory=list)


def create_apiserver(
    project: Project, *, group: str, version: str, kind: str, namespaced: bool = True, plural: str = ""
) -> ApiServerResult:
    """Scaffold ``kind`` into the project's aggregated API (see the module docstring)."""
    project.require_own_package("create apiserver")
    api = ApiNames(group, version, kind, project.domain, plural)
    pkg = project.package
    package_dir = project.package_dir / "apiserver"
    module_path = f"{pkg.replace('.', '/')}/apiserver/{api.module}.py"
    result = ApiServerResult(module_path)
    if (project.root / module_path).exists():
        result.exists = True
        return result
    served = _served_group_versions(package_dir)
    if served and served != {(api.full_group, version)}:
        (other_group, other_version), *_ = sorted(served)
        raise ScaffoldError(
            f"this project's aggregated API serves {other_group}/{other_version}; one APIService serves "
            f"one group version, so {api.api_version} needs a server of its own (--group "
            f"{other_group.split('.')[0]} --version {other_version} adds a kind to this one)"
        )
    values = _values(project, api, namespaced)
    base = f"{pkg.replace('.', '/')}/apiserver"
    plans = [
        Planned(f"{base}/__init__.py", render_template("apiserver/__init__.py.tmpl", values)),
        Planned(f"{base}/__main__.py", render_template("apiserver/__main__.py.tmpl", values)),
        Planned(module_path, render_template("apiserver/kind.py.tmpl", values)),
        Planned(
            f"tests/test_{api.module}_apiserver.py",
            render_template("apiserver/test_apiserver.py.tmpl", values),
        ),
    ]
    result.changes = write_planned(project.root, plans)
    init = project.root / base / "__init__.py"
    text = init.read_text(encoding="utf-8")
    try:
        text, _ = insert_at_marker(
            text, "imports", f"from {pkg}.apiserver.{api.module} import {api.kind}", below=True
        )
        text, added = insert_at_marker(text, "kinds", f"{api.kind},")
    except MarkerMissing as missing:
        result.todo.append(
            f"add {api.kind} (from {pkg}.apiserver.{api.module}) to kinds() in {base}/__init__.py "
            f"by hand: its {missing} marker is gone"
        )
        return result
    if added:
        init.write_text(text, encoding="utf-8")
        result.changes.append(Change(f"{base}/__init__.py", "updated"))
    return result


def _values(project: Project, api: ApiNames, namespaced: bool) -> dict[str, str]:
    """What the apiserver templates are given for ``api`` in ``project``."""
    return {
        "project_name": project.project_name,
        "package": project.package,
        "kind": api.kind,
        "module": api.module,
        "full_group": api.full_group,
        "version": api.version,
        "api_version": api.api_version,
        "plural": api.plural,
        "scope": "Namespaced" if namespaced else "Cluster",
        "service": project.names.prefixed("apiserver"),
        "namespace": project.namespace,
    }


def _served_group_versions(directory: Path) -> set[tuple[str, str]]:
    """The (group, version) of the kinds already in ``<package>/apiserver`` (read, not imported)."""
    found: set[tuple[str, str]] = set()
    if directory.is_dir():
        for path in directory.glob("*.py"):
            found.update(_GROUP_VERSION.findall(path.read_text(encoding="utf-8")))
    return found
