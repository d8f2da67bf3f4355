"""Run something once a top-level package has been imported, without importing it.

kubeop.kopf configures the ``kubernetes`` library's default client, as kopf does, but importing
that library costs an operator ~20 MB and a few hundred milliseconds: it is configured at once
when the operator has imported it already, and otherwise when (if ever) it is first imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

__all__ = ["when_imported"]

_lock = threading.Lock()


def when_imported(name: str, then: Callable[[], None]) -> None:
    """Call ``then()`` now if the top-level package ``name`` is imported, else right after it is
    first imported (not at all if it is not installed). ``then`` must not raise."""
    if name in sys.modules:
        then()
        return
    if importlib.util.find_spec(name) is None:
        return
    with _lock:
        for finder in sys.meta_path:
            if isinstance(finder, _Finder) and finder.name == name:
                finder.then.append(then)
                return
        sys.meta_path.insert(0, _Finder(name, [then]))


class _Finder(importlib.abc.MetaPathFinder):
    """Finds ``name`` with the other finders, once, and wraps its loader."""

    def __init__(self, name: str, then: list[Callable[[], None]]) -> None:
        self.name, self.then = name, then

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        with _lock:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader, self.then)
        return spec


class _Loader(importlib.abc.Loader):
    """The package's own loader, then the callbacks."""

    def __init__(self, loader: importlib.abc.Loader, then: list[Callable[[], None]]) -> None:
        self._loader, self._then = loader, then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        for then in self._then:
            then()

    def __getattr__(self, attribute: str) -> Any:  # resource readers, get_filename...
        return getattr(self._loader, attribute)
