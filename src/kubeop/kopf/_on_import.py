"""Run something once a top-level package has been imported, without importing it.

kubeop.kopf configures the ``kubernetes`` library's default client, as kopf does, but importing
that library costs an operator ~20 MB and a few hundred milliseconds: it is configured at once
when the operator has imported it already, and otherwise when (if ever) it is first imported.

The only trace left is a finder at the front of ``sys.meta_path`` until the package is imported
(the package's module keeps its own loader). Callbacks run once each, after the package's module
has run, in the thread importing it; a callback that raises is logged, never the import's error.
A package another thread is importing is waited for. One race is left open: a thread that has
found the package, but not yet begun to run it, when the callback is registered from another
thread; the callback then runs on the next registration for that package.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

__all__ = ["when_imported"]

log = logging.getLogger("kubeop.kopf")
_lock = threading.RLock()
_waiting: dict[str, list[Callable[[], None]]] = {}
"""Callbacks by package, from their registration until the package has run."""


def when_imported(name: str, then: Callable[[], None]) -> None:
    """Call ``then()`` now if the top-level package ``name`` is imported (once another thread's
    import of it has finished), else right after it is first imported (not at all if it is not
    installed). An error ``then`` raises is logged."""
    with _lock:
        if name not in sys.modules:
            if name in _waiting:
                _waiting[name].append(then)
                return
            if importlib.util.find_spec(name) is None:
                return
            _waiting[name] = [then]
            sys.meta_path.insert(0, _Finder(name))
            return
        # imported: by this thread, by another one (maybe still running), or past the finder
        for finder in [f for f in sys.meta_path if isinstance(f, _Finder) and f.name == name]:
            sys.meta_path.remove(finder)
        callbacks = [*_waiting.pop(name, ()), then]
    importlib.import_module(name)  # waits for another thread still running it
    _run(name, callbacks)


def _run(name: str, callbacks: Sequence[Callable[[], None]]) -> None:
    for then in callbacks:
        try:
            then()
        except Exception:
            log.warning("a callback on importing %s failed (the import itself went on)", name, exc_info=True)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds ``name`` with the other finders, once, and wraps its loader."""

    def __init__(self, name: str) -> None:
        self.name = name

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name:
            return None
        with _lock:
            if self not in sys.meta_path:
                return None
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader, fullname)
        return spec


class _Loader(importlib.abc.Loader):
    """The package's own loader, then the callbacks; the module keeps its own loader."""

    def __init__(self, loader: importlib.abc.Loader, name: str) -> None:
        self._loader, self._name = loader, name

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        try:
            self._loader.exec_module(module)
        except BaseException:
            with _lock:  # not imported: the callbacks wait for the next try
                if self._name in _waiting:
                    sys.meta_path.insert(0, _Finder(self._name))
            raise
        with _lock:
            callbacks = _waiting.pop(self._name, [])
        _run(self._name, callbacks)

    def __getattr__(self, attribute: str) -> Any:  # resource readers, get_filename...
        return getattr(self._loader, attribute)
