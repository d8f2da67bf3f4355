"""``kopf.info/warn/exception``: Kubernetes events about an object, through the manager's recorder
(deduplicated into series and rate-limited per object; never blocks, never fails a handler)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Mapping
from typing import Any

from kubeop.controller import EventRecorder

__all__ = ["current_body", "event", "exception", "info", "use_recorder", "warn"]

# How these kopf names behave on kubeop where it is not as in kopf (read by scripts/kopf_compat.py
# into the compatibility table of docs/migration/from-kopf.md; a name not listed behaves as kopf's).
_DIFFERS = {
    "ObjectLogger": "Log lines are not posted as Kubernetes events: post them with `kopf.info()`, "
    "`kopf.warn()` and `kopf.exception()` (handler errors are posted as kopf does).",
}

log = logging.getLogger("kubeop.kopf")
_recorder: EventRecorder | None = None
_loop: asyncio.AbstractEventLoop | None = None

#: The object of the handler running in this task or thread (``kopf.adopt``'s default owner).
current_body: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "kopf_current_body", default=None
)


#: A fleet's cluster's recorder, for the handlers of that cluster's objects (their task and what
#: it starts: daemons, sync handlers' threads): their events go to the cluster the object lives in.
_cluster_recorder: contextvars.ContextVar[EventRecorder | None] = contextvars.ContextVar(
    "kopf_cluster_recorder", default=None
)


def use_recorder(recorder: EventRecorder | None, *, here: bool = False) -> None:
    """Set by the running operator (in its event loop); without one, events are logged only.
    ``here``: for the running task and what it starts only (a fleet's cluster's handlers)."""
    global _recorder, _loop
    if here:
        _cluster_recorder.set(recorder)
        _loop = asyncio.get_running_loop()
        return
    _recorder = recorder
    _loop = asyncio.get_running_loop() if recorder is not None else None


def _post(objs: Any, type: str, reason: str, message: str) -> None:
    recorder = _cluster_recorder.get() or _recorder
    for obj in objs if isinstance(objs, list | tuple) else [objs]:
        if recorder is None:
            log.debug("event %s %s: %s (no operator running, not posted)", type, reason, message)
            continue
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a sync handler's thread: hand it to the operator's loop
            if _loop is not None and not _loop.is_closed():
                _loop.call_soon_threadsafe(recorder.event, obj, type, reason, message)
        else:
            recorder.event(obj, type, reason, message)


def event(obj: Any, *, type: str, reason: str, message: str = "") -> None:
    """An event of any ``type``; events.k8s.io takes only ``Normal`` and ``Warning``, so any
    other type is logged and not posted."""
    if type not in ("Normal", "Warning"):
        log.warning("event %s %s: %s not posted: the event type is Normal or Warning", type, reason, message)
        return
    _post(obj, type, reason, message)


def info(obj: Any, *, reason: str, message: str = "") -> None:
    """Post a Normal Event about ``obj`` (a body, a dict or an object reference) with ``reason`` and
    ``message``.
    """
    _post(obj, "Normal", reason, message)


def warn(obj: Any, *, reason: str, message: str = "") -> None:
    """Post a Warning Event about ``obj`` with ``reason`` and ``message``."""
    _post(obj, "Warning", reason, message)


def exception(obj: Any, *, reason: str = "", message: str = "", exc: BaseException | None = None) -> None:
    """Post a Warning Event about ``obj`` for ``exc`` (default: the exception being handled), its type as the
    reason unless ``reason`` is given.
    """
    if exc is None:
        import sys

        exc = sys.exc_info()[1]
    detail = f"{type(exc).__name__}: {exc}" if exc is not None else ""
    _post(obj, "Warning", reason or type(exc).__name__ if exc else reason, f"{message} {detail}".strip())
