"""The registry the decorators fill: which handlers exist, for which resources."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from kubeop.kopf.activities import Activity, ActivityHandler
from kubeop.kopf.handlers import ChangingHandler
from kubeop.kopf.spawning import SpawningHandler
from kubeop.kopf.watching import WatchingHandler

if TYPE_CHECKING:
    from kubeop.kopf.admission import AdmissionHandler
    from kubeop.kopf.indexing import IndexingHandler

__all__ = [
    "Registry",
    "default_registry",
    "get_default_registry",
    "handler_id",
    "resource_name",
    "set_default_registry",
]

# How these kopf names behave on kubeop where it is not as in kopf (read by scripts/kopf_compat.py
# into the compatibility table of docs/migration/from-kopf.md; a name not listed behaves as kopf's).
_DIFFERS = {
    "OperatorRegistry": "Works with the decorators' `registry=` and `kopf.operator(registry=...)`; "
    "kopf's internal registry attributes (`registry._changing`...) do not exist.",
}


class Registry:
    """Handlers in registration order (the order they run in within one cycle)."""

    def __init__(self) -> None:
        self._changing: list[ChangingHandler] = []
        self._spawning: list[SpawningHandler] = []
        self._watching: list[WatchingHandler] = []
        self._activities: list[ActivityHandler] = []
        self._indexing: list[IndexingHandler] = []
        self._admission: list[AdmissionHandler] = []

    def add(self, handler: ChangingHandler | SpawningHandler | WatchingHandler | ActivityHandler) -> None:
        """Register a handler; raises ValueError when an operator handler of the same id is registered twice
        for an activity (pass ``id=``).
        """
        if isinstance(handler, ActivityHandler):
            if any(h.id == handler.id and h.activity is handler.activity for h in self._activities):
                raise ValueError(f"{handler} is registered twice for {handler.activity}: pass id='...'")
            self._activities.append(handler)
            return
        if isinstance(handler, WatchingHandler):
            if any(h.id == handler.id and h.resource == handler.resource for h in self._watching):
                raise ValueError(
                    f"{handler} is registered twice for {handler.resource}: pass id='...' to one of them"
                )
            self._watching.append(handler)
            return
        if isinstance(handler, SpawningHandler):
            if any(h.id == handler.id and h.resource == handler.resource for h in self._spawning):
                raise ValueError(
                    f"{handler} is registered twice for {handler.resource}: pass id='...' to one of them"
                )
            self._spawning.append(handler)
            return
        for h in self._changing:
            if h.id == handler.id and h.resource == handler.resource and h.reason is handler.reason:
                raise ValueError(
                    f"handler id {handler.id!r} is registered twice for {handler.resource} "
                    f"({handler.reason or 'field'}): pass id='...' to one of them"
                )
        self._changing.append(handler)

    def add_index(self, handler: IndexingHandler) -> None:
        """An ``@kopf.index`` handler; its id names its index (a kwarg of every handler): unique."""
        if any(h.id == handler.id for h in self._indexing):
            raise ValueError(f"index {handler.id!r} is registered twice: pass id='...' to one of them")
        self._indexing.append(handler)

    def add_admission(self, handler: AdmissionHandler) -> None:
        """An ``@kopf.on.validate``/``@kopf.on.mutate`` handler; its id names its webhook: unique."""
        if any(h.id == handler.id for h in self._admission):
            raise ValueError(f"admission handler id {handler.id!r} is registered twice: pass id='...'")
        self._admission.append(handler)

    def resources(self) -> list[str]:
        """The resources that have handlers, in registration order."""
        handlers: list[ChangingHandler | SpawningHandler | WatchingHandler] = [
            *self._changing,
            *self._spawning,
            *self._watching,
        ]
        return list(dict.fromkeys(h.resource for h in handlers))

    def changing(self, resource: str) -> Iterator[ChangingHandler]:
        """The create, update, delete, resume and field handlers of ``resource``."""
        return (h for h in self._changing if h.resource == resource)

    def spawning(self, resource: str) -> Iterator[SpawningHandler]:
        """The daemons and timers of ``resource``."""
        return (h for h in self._spawning if h.resource == resource)

    def watching(self, resource: str) -> Iterator[WatchingHandler]:
        """The event handlers of ``resource``."""
        return (h for h in self._watching if h.resource == resource)

    def activities(self, activity: Activity) -> list[ActivityHandler]:
        """The operator handlers of ``activity`` (startup, cleanup, login, probe...)."""
        return [h for h in self._activities if h.activity is activity]

    def indexing(self) -> list[IndexingHandler]:
        """The ``@kopf.index`` handlers, of every resource."""
        return list(self._indexing)

    def admission(self) -> list[AdmissionHandler]:
        """The admission handlers, of every resource."""
        return list(self._admission)

    def __len__(self) -> int:
        return len(self._changing) + len(self._spawning) + len(self._watching) + len(self._activities)


_default = Registry()


def default_registry() -> Registry:
    """The registry the ``kopf.on`` decorators add handlers to by default."""
    return _default


def get_default_registry() -> Registry:
    """kopf's name for :func:`default_registry`."""
    return _default


def set_default_registry(registry: Registry) -> None:
    """Make ``registry`` the one the decorators fill (a fresh one per test, as kopf's tests do)."""
    global _default
    _default = registry


def handler_id(fn: Callable[..., Any], id: str | None, field: tuple[str, ...]) -> str:
    """kopf's handler id: ``id=`` or the function's qualified name, ``/field.path`` appended."""
    if id is None:
        target: Any = fn
        while isinstance(target, functools.partial) or hasattr(target, "__wrapped__"):
            target = target.func if isinstance(target, functools.partial) else target.__wrapped__
        if getattr(target, "__name__", "") == "<lambda>":
            code = target.__code__
            id = f"lambda:{code.co_filename}:{code.co_firstlineno}"
        else:
            id = str(
                getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
            )
    return f"{id}/{'.'.join(field)}" if field else id


def resource_name(
    args: tuple[str, ...],
    *,
    group: str | None = None,
    version: str | None = None,
    plural: str | None = None,
    kind: str | None = None,
) -> str:
    """A kubectl-style resource name (``plural.version.group``) from kopf's selector arguments."""
    if len(args) > 3:
        raise TypeError(f"a resource is named by at most 3 arguments (group, version, plural), got {args!r}")
    if len(args) == 3:
        group, version, plural = args
    elif len(args) == 2:
        first, plural = args
        if "/" in first:
            group, version = first.split("/", 1)
        else:
            group = first
    elif len(args) == 1:
        if group is None and version is None:
            return args[0]
        plural = args[0]
    name = plural or kind
    if not name:
        raise TypeError("name the resource: on.create('plural.group') or on.create(group, version, plural)")
    if group:
        return ".".join(p for p in (name, version, group) if p)
    return f"{name}.{version}." if version else name  # the core group: ``pods.v1.``
