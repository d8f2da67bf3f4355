"""The public names of kubeop.queue are pinned; kubeop.queue depends on nothing else in kubeop."""

from __future__ import annotations

import ast
import pathlib

import kubeop.queue


def test_all_is_sorted_and_complete() -> None:
    # isidentifier(): pytest's assertion rewriting adds "@py_builtins" to rewritten modules.
    public = sorted(name for name in vars(kubeop.queue) if name.isidentifier() and not name.startswith("_"))
    modules = {"clock", "delaying", "limiters", "metrics", "ratelimiting", "workqueue"}
    assert kubeop.queue.__all__ == sorted(kubeop.queue.__all__)
    assert kubeop.queue.__all__ == [name for name in public if name not in modules]


def test_imports_stay_inside_the_package() -> None:
    package = pathlib.Path(kubeop.queue.__file__).parent
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kubeop"):
                assert node.module.startswith(("kubeop.queue", "kubeop.core")), (path.name, node.module)
            if isinstance(node, ast.Import):
                for alias in node.names:
                    assert not alias.name.startswith("kubeop") or alias.name.startswith("kubeop.queue")
