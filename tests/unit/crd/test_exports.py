"""The public names of kubeop.crd are pinned, and kubeop.crd imports only kubeop.core."""

from __future__ import annotations

import ast
import pathlib

import kubeop.crd
import kubeop.crd.rbac

MODULES = {"declaration", "errors", "manifest", "markers", "names", "resource", "schema", "structural"}


def public(module: object) -> list[str]:
    # isidentifier(): pytest's assertion rewriting adds "@py_builtins" to rewritten modules.
    return sorted(n for n in vars(module) if n.isidentifier() and not n.startswith("_"))


def test_all_is_complete() -> None:
    # Order is ruff's business (RUF022); here: nothing public is missing or listed twice.
    assert sorted(kubeop.crd.__all__) == [n for n in public(kubeop.crd) if n not in MODULES]
    rbac_modules = {"permissions", "roles", "rules"}
    assert sorted(kubeop.crd.rbac.__all__) == [n for n in public(kubeop.crd.rbac) if n not in rbac_modules]


def test_imports_stay_inside_crd_and_core() -> None:
    package = pathlib.Path(kubeop.crd.__file__).parent
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.startswith("kubeop"):
                    assert name.startswith(("kubeop.crd", "kubeop.core")), (path.name, name)
