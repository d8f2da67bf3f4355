"""``kopf.info/warn/exception``: Kubernetes events about an object, through the manager's recorder
(deduplicated into series and rate-limited per object; never blocks, never fails a handler)."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Mapping
from typing import Any

from kubeop.controller import EventRecorder

__all__ = ["current_body", "exception", "info", "use_recorder", "warn"]

log = logging.getLogger("kubeop.kopf")
_recorder: EventRecorder | None = None

#: The object of the handler running in this task or thread (``kopf.adopt``'s default owner).
current_body: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "kopf_current_body", default=None
)


def use_recorder(recorder: EventRecorder | None) -> None:
    """Set by the running operator; without one, events are logged only."""
    global _recorder
    _recorder = recorder


def _post(objs: Any, type: str, reason: str, message: str) -> None:
    for obj in objs if isinstance(objs, list | tuple) else [objs]:
        if _recorder is None:
            log.debug("event %s %s: %s (no operator running, not posted)", type, reason, message)
            continue
        _recorder.event(obj, type, reason, message)


def info(obj: Any, *, reason: str, message: str = "") -> None:
    _post(obj, "Normal", reason, message)


def warn(obj: Any, *, reason: str, message: str = "") -> None:
    _post(obj, "Warning", reason, message)


def exception(obj: Any, *, reason: str = "", message: str = "", exc: BaseException | None = None) -> None:
    if exc is None:
        import sys

        exc = sys.exc_info()[1]
    detail = f"{type(exc).__name__}: {exc}" if exc is not None else ""
    _post(obj, "Warning", reason or type(exc).__name__ if exc else reason, f"{message} {detail}".strip())
