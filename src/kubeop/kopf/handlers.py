"""Handlers, the causes they react to, and the filters that select them (kopf's semantics).

A cause is computed from the object alone (see :func:`detect_cause`): the essence it had when
last handled, recorded on the object, against the essence it has now. So a change made while
the operator was down is an update on its next start, exactly once.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NewType, Protocol

from kubeop.kopf.diffs import Diff, FieldPath, resolve

__all__ = [
    "ABSENT",
    "PRESENT",
    "ChangingHandler",
    "ErrorsMode",
    "HandlerId",
    "Reason",
    "detect_cause",
    "matches",
    "prematches",
    "selected",
]

HandlerId = NewType("HandlerId", str)
"""A handler's id (``kopf.HandlerId``): its function's name, or ``id=``; sub-handlers ``parent/child``."""


class Reason(enum.StrEnum):
    """Why a change handler runs (kopf's: a str enum, ``reason == "create"``)."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    RESUME = "resume"
    NOOP = "noop"
    FREE = "free"  # deletion under way and the finalizer is gone: nothing to do
    GONE = "gone"  # the object is gone from the cluster

    def __str__(self) -> str:
        return self.value


TITLES = {
    Reason.CREATE: "creation",
    Reason.UPDATE: "updating",
    Reason.DELETE: "deletion",
    Reason.RESUME: "resuming",
}


class ErrorsMode(enum.Enum):
    """How a handler's unexpected exception counts: retried (default), final, or ignored."""

    TEMPORARY = "temporary"
    PERMANENT = "permanent"
    IGNORED = "ignored"


class _Token(enum.Enum):
    ABSENT = "absent"
    PRESENT = "present"

    def __repr__(self) -> str:
        return f"kopf.{self.name}"


ABSENT = _Token.ABSENT
PRESENT = _Token.PRESENT
MISSING: Any = object()

Filter = Any  # a value, ABSENT / PRESENT, or a callable(value, **kwargs) -> bool


@dataclass(frozen=True)
class ChangingHandler:
    fn: Callable[..., Any]
    id: str
    resource: str
    reason: Reason | None  # None: any reason (field and resume handlers)
    field: FieldPath = ()
    value: Filter = None
    old: Filter = None
    new: Filter = None
    field_needs_change: bool = False
    labels: Mapping[str, Filter] | None = None
    annotations: Mapping[str, Filter] | None = None
    when: Callable[..., bool] | None = None
    initial: bool = False  # resume handlers: run when the operator (re)starts
    deleted: bool = False  # resume handlers: also for objects being deleted
    requires_finalizer: bool = False
    errors: ErrorsMode = ErrorsMode.TEMPORARY
    timeout: float | None = None
    retries: int | None = None
    backoff: float | None = None  # None: settings.execution.default_backoff
    param: Any = None

    def __str__(self) -> str:
        return f"Handler {self.id!r}"


def detect_cause(
    body: Mapping[str, Any],
    *,
    finalizer: str,
    old: Mapping[str, Any] | None,
    diff: Diff,
    initial: bool,
) -> Reason:
    """The cause of this handling cycle, from the object and the essence it was last handled with."""
    md = body.get("metadata") or {}
    if md.get("deletionTimestamp"):
        return Reason.DELETE if finalizer in (md.get("finalizers") or ()) else Reason.FREE
    if old is None:
        return Reason.CREATE
    if not diff:
        return Reason.RESUME if initial else Reason.NOOP
    return Reason.UPDATE


def check(flt: Filter, value: Any, kwargs: Mapping[str, Any]) -> bool:
    if flt is ABSENT:
        return value is MISSING
    if flt is PRESENT:
        return value is not MISSING
    if callable(flt):
        return bool(flt(None if value is MISSING else value, **kwargs))
    return bool(flt == value)


def _meta_matches(
    pattern: Mapping[str, Filter] | None, content: Mapping[str, Any], kw: Mapping[str, Any]
) -> bool:
    if not pattern:
        return True
    for key, flt in pattern.items():
        value = content.get(key, MISSING)
        if flt is None:  # kopf: None means present with any value
            flt = PRESENT
        if not check(flt, value, kw):
            return False
    return True


class Filtered(Protocol):
    @property
    def labels(self) -> Mapping[str, Filter] | None: ...
    @property
    def annotations(self) -> Mapping[str, Filter] | None: ...
    @property
    def when(self) -> Callable[..., bool] | None: ...


def prematches(handler: Filtered, body: Mapping[str, Any], kwargs: Mapping[str, Any]) -> bool:
    """Do the object-level filters (labels, annotations, ``when``) let this object through?"""
    md = body.get("metadata") or {}
    return (
        _meta_matches(handler.labels, md.get("labels") or {}, kwargs)
        and _meta_matches(handler.annotations, md.get("annotations") or {}, kwargs)
        and (handler.when is None or bool(handler.when(**kwargs)))
    )


def matches(
    handler: ChangingHandler,
    body: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    new: Mapping[str, Any] | None,
    kwargs: Mapping[str, Any],
) -> bool:
    """Every filter of ``handler`` against this cycle: metadata, field value, field change, when."""
    md = body.get("metadata") or {}
    if not _meta_matches(handler.labels, md.get("labels") or {}, kwargs):
        return False
    if not _meta_matches(handler.annotations, md.get("annotations") or {}, kwargs):
        return False
    if handler.field:
        o = resolve(old, handler.field, MISSING)
        n = resolve(new, handler.field, MISSING)
        if handler.value is None:
            if o is MISSING and n is MISSING:
                return False
        elif not any(check(handler.value, v, kwargs) for v in (n, o)):
            return False
        if handler.field_needs_change and o == n:
            return False
        if handler.old is not None and not check(handler.old, o, kwargs):
            return False
        if handler.new is not None and not check(handler.new, n, kwargs):
            return False
    return handler.when is None or bool(handler.when(**kwargs))


def selected(handler: ChangingHandler, reason: Reason, initial: bool) -> bool:
    """Is ``handler`` one of this cause's (before filters)? Resume handlers join any cause of an
    object seen for the first time since the operator started, except a deletion."""
    if handler.reason is not None and handler.reason is not reason:
        return False
    if handler.initial and not initial:
        return False
    if handler.initial and reason is Reason.DELETE and not handler.deleted:
        return False
    return not (handler.reason is None and not handler.initial and reason is Reason.RESUME)
