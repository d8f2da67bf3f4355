"""Sub-handlers: handlers that a handler registers while it runs (kopf's ``@kopf.subhandler``
and ``kopf.register(fn, id=...)``).

A sub-handler's id is its parent's id, a slash and its own (``create_fn/item1``); its progress is
recorded beside its parent's in the object's one state record, with the same write. The parent
runs again in each cycle until every sub-handler is done (it registers them again each time);
the done ones do not run again. The parent is done when its sub-handlers are (kopf's
semantics: a sub-handler failing for good does not fail its parent).

``await kopf.execute(...)`` inside an async handler runs sub-handlers (given, or those registered
so far) there and then, as in kopf: it returns when all are done, else raises
:class:`~kubeop.kopf.TemporaryError` so the parent runs again when the next one is due.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from kubeop.kopf import on
from kubeop.kopf.errors import TemporaryError
from kubeop.kopf.handlers import ChangingHandler
from kubeop.kopf.registry import Registry

__all__ = [
    "ChildrenRetry",
    "Collector",
    "collecting",
    "execute",
    "register",
    "running_subhandlers",
    "subhandler",
]

# How these kopf names behave on kubeop where it is not as in kopf (read by scripts/kopf_compat.py
# into the compatibility table of docs/migration/from-kopf.md; a name not listed behaves as kopf's).
_DIFFERS = {
    "execute": "Takes `fns=` (a mapping of ids to functions, or a list) or nothing (the sub-handlers "
    "registered so far); `handlers=`, `registry=`, `lifecycle=` and `cause=` raise an error naming `fns=`.",
}

F = TypeVar("F", bound=Callable[..., Any])


class ChildrenRetry(TemporaryError):
    """:func:`execute`'s sub-handlers are not all done: the parent runs again when one is due
    (not a failure of the parent: logged at debug level, as the implicit run's is)."""


class Collector(Registry):
    """The sub-handlers one run of a parent handler registers."""

    def __init__(self, resource: str) -> None:
        super().__init__()
        self.resource = resource

    def handlers(self) -> list[ChangingHandler]:
        return list(self.changing(self.resource))

    def take(self) -> list[ChangingHandler]:
        """The sub-handlers registered so far, which then are no longer this collector's."""
        taken = self.handlers()
        self._changing.clear()
        return taken


_current: contextvars.ContextVar[Collector | None] = contextvars.ContextVar("kopf_subhandlers", default=None)


Runner = Callable[[list[ChangingHandler]], Awaitable[float | None]]
_runner: contextvars.ContextVar[Runner | None] = contextvars.ContextVar("kopf_subrunner", default=None)


def running_subhandlers(runner: Runner) -> contextvars.Token[Runner | None]:
    """Let :func:`execute` run sub-handlers with ``runner`` (None: all done, else the delay until
    the next one is due); reset the token when the parent handler returns."""
    return _runner.set(runner)


def reset_runner(token: contextvars.Token[Runner | None]) -> None:
    _runner.reset(token)


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


async def execute(
    *,
    fns: Mapping[str, Callable[..., Any]] | Iterable[Callable[..., Any]] | None = None,
    handlers: Any = None,
    registry: Any = None,
    lifecycle: Any = None,
    cause: Any = None,
) -> None:
    """``await kopf.execute(fns={"id": fn, ...})`` (or a list of functions, or nothing: the
    sub-handlers registered so far): run them now, as sub-handlers of the running handler;
    return when all are done, else raise TemporaryError (the parent runs again when one is due)."""
    for name, value in (
        ("handlers", handlers),
        ("registry", registry),
        ("lifecycle", lifecycle),
        ("cause", cause),
    ):
        if value is not None:
            raise TypeError(
                f"kopf.execute({name}=...) is not supported by kubeop.kopf: pass fns= (a mapping of ids "
                "to functions, or a list of functions), or register them with @kopf.subhandler and call "
                "kopf.execute() without arguments"
            )
    collector, runner = _current.get(), _runner.get()
    if collector is None or runner is None:
        raise RuntimeError("kopf.execute() works inside a running (async) change handler only")
    if fns is None:
        subs = collector.take()
    else:
        if isinstance(fns, Mapping):
            pairs = list(fns.items())
        elif isinstance(fns, Iterable) and not isinstance(fns, str | bytes):
            pairs = [(getattr(fn, "__name__", None), fn) for fn in fns]
        else:
            raise ValueError(f"fns must be a mapping or an iterable, got {fns.__class__}.")
        own = Collector(collector.resource)
        token = _current.set(own)
        try:
            for id_, fn in pairs:
                register(fn, id=id_)
        finally:
            _current.reset(token)
        subs = own.handlers()
    unfinished = await runner(subs)
    if unfinished is not None:
        raise ChildrenRetry("unfinished sub-handlers", delay=unfinished)
