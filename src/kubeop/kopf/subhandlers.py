"""Sub-handlers: handlers that a handler registers while it runs (kopf's ``@kopf.subhandler``
and ``kopf.register(fn, id=...)``).

A sub-handler's id is its parent's id, a slash and its own (``create_fn/item1``); its progress is
recorded beside its parent's in the object's one state record, with the same write. The parent
runs again in each cycle until every sub-handler is done (it registers them again each time);
the done ones do not run again. The parent is done when its sub-handlers are (kopf's
semantics: a sub-handler failing for good does not fail its parent).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any, TypeVar

from kubeop.kopf import on
from kubeop.kopf.handlers import ChangingHandler
from kubeop.kopf.registry import Registry

__all__ = ["Collector", "collecting", "register", "subhandler"]

F = TypeVar("F", bound=Callable[..., Any])


class Collector(Registry):
    """The sub-handlers one run of a parent handler registers."""

    def __init__(self, resource: str) -> None:
        super().__init__()
        self.resource = resource

    def handlers(self) -> list[ChangingHandler]:
        return list(self.changing(self.resource))


_current: contextvars.ContextVar[Collector | None] = contextvars.ContextVar("kopf_subhandlers", default=None)


def collecting(resource: str) -> tuple[Collector, contextvars.Token[Collector | None]]:
    """Start collecting the sub-handlers of one handler run (reset the token when it is over)."""
    collector = Collector(resource)
    return collector, _current.set(collector)


def reset(token: contextvars.Token[Collector | None]) -> None:
    _current.reset(token)


def subhandler(**options: Any) -> Callable[[F], F]:
    """Register the decorated function as a sub-handler of the running handler.

    Takes the change handlers' options (``id=``, ``errors=``, ``retries=``, ``timeout=``,
    ``backoff=``, ``labels=``, ``annotations=``, ``when=``, ``field=``, ``value=``); outside a
    handler it is an error."""
    collector = _current.get()
    if collector is None:
        raise RuntimeError(
            "@kopf.subhandler and kopf.register() work inside a running handler only "
            "(decorate the function with @kopf.on.create/update/... to register it as a handler)"
        )
    if "registry" in options:
        raise TypeError("@kopf.subhandler: registry= is not taken (sub-handlers belong to their parent)")
    allowed = tuple(k for k in on._COMMON if k not in on._SELECTOR)
    return on._register(
        "subhandler", (collector.resource,), {**options, "registry": collector}, allowed, None
    )


def register(fn: F, **options: Any) -> F:
    """``kopf.register(fn, id=...)``: :func:`subhandler` as a call."""
    return subhandler(**options)(fn)
