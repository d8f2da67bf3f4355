"""The handling state of one object, read and written through kopf's storages.

Two things are kept on each object between cycles, in kopf 1.45.2's formats so that kopf and
kubeop.kopf continue each other's work: each handler's progress within the current cause
(:mod:`kubeop.kopf.progress`) and the essence last handled (:mod:`kubeop.kopf.diffbase`). The
storages are ``settings.persistence.progress_storage`` and ``diffbase_storage``; what they write
goes into the cycle's one patch, sent with the handlers' own changes.

Unless the operator sets them, the storages are kopf's defaults (progress in annotations
``kopf.zalando.org/<handler id>``, the essence in ``kopf.zalando.org/last-handled-configuration``)
with one difference in where they write: when the cycle's write is the status subresource alone
(the handlers patched only status) and the object has none of kopf's annotations, the state goes
there too, in kopf's status formats (``status.kopf.progress``, which kopf's default storage reads
too, and ``status.kopf.last-handled-configuration``, which it does not), so that a change costs
one request to the object. An object with kopf's annotations (handled by kopf before) keeps them
up to date, as kopf does (a second request when handlers write only status). The annotations are
read first, then the status copies. Set ``settings.persistence.diffbase_storage =
kopf.AnnotationsDiffBaseStorage()`` to always write the annotation, as kopf does: then real kopf
can take over any object, including those created and handled only by kubeop.kopf.

The record of earlier kubeop.kopf releases (``kopf.kubeop.dev/state`` or ``status.kopfState``)
is read when there is nothing in kopf's formats, and removed by the next write.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from kubeop.kopf.diffbase import (
    AnnotationsDiffBaseStorage,
    DiffBaseStorage,
    MultiDiffBaseStorage,
    StatusDiffBaseStorage,
)
from kubeop.kopf.diffs import FieldPath
from kubeop.kopf.progress import (
    AnnotationsProgressStorage,
    MultiProgressStorage,
    ProgressRecord,
    ProgressStorage,
    StatusProgressStorage,
)
from kubeop.kopf.settings import DEFAULT_DIFFBASE, DEFAULT_PROGRESS, PersistenceSettings

__all__ = ["LEGACY_ANNOTATION", "LEGACY_STATUS_FIELD", "Progress", "State", "Storages", "storages_of"]

LEGACY_ANNOTATION = "kopf.kubeop.dev/state"
LEGACY_STATUS_FIELD = "kopfState"
log = logging.getLogger("kubeop.kopf")
_MAX_RETRIES = 2**31 - 1  # a count beyond is no count kopf wrote (and would not encode back)


def _iso(t: float | None) -> str | None:
    return None if t is None else dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="microseconds")


def _time(s: Any) -> float | None:
    if not isinstance(s, str) or not s:
        return None
    try:
        t = dt.datetime.fromisoformat(s)
    except ValueError:
        return None
    return (t if t.tzinfo is not None else t.replace(tzinfo=dt.UTC)).timestamp()


@dataclass
class Progress:
    """One handler's progress within the current cause (kopf's ``HandlerState``)."""

    purpose: str | None
    started: float  # wall-clock seconds of the first attempt
    retries: int = 0  # attempts so far (a success counts, as in kopf)
    delayed: float | None = None  # not before this wall-clock time
    success: bool = False
    failure: bool = False
    message: str | None = None
    stopped: float | None = None
    subrefs: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        return self.success or self.failure

    def to_record(self) -> ProgressRecord:
        """As kopf stores it (``HandlerState.for_storage``)."""
        return ProgressRecord(
            started=_iso(self.started),
            stopped=_iso(self.stopped),
            delayed=_iso(self.delayed),
            purpose=self.purpose,
            retries=self.retries,
            success=self.success,
            failure=self.failure,
            message=self.message,
            subrefs=sorted(self.subrefs) or None,
        )

    @classmethod
    def from_record(cls, record: Mapping[str, Any], now: float) -> Progress:
        return cls(
            purpose=record.get("purpose") or None,
            started=_time(record.get("started")) or now,
            stopped=_time(record.get("stopped")),
            delayed=_time(record.get("delayed")),
            retries=int(record.get("retries") or 0),
            success=bool(record.get("success")),
            failure=bool(record.get("failure")),
            message=record.get("message"),
            subrefs=tuple(record.get("subrefs") or ()),
        )


_TIMES = ("started", "stopped", "delayed")
_FLAGS = ("success", "failure")
_TEXTS = ("purpose", "message")


def _record_problem(record: Any) -> str | None:
    """What makes a fetched progress record unusable (None: nothing): the record is not a JSON
    object, or a field has the wrong type. kopf itself fails the object's processing on these."""
    if not isinstance(record, Mapping):
        return f"not a JSON object but {_kind(record)}"
    for name in _TIMES:
        value = record.get(name)
        if value is not None and (not isinstance(value, str) or (value and _time(value) is None)):
            return f"{name} is {_kind(value)}, not an ISO 8601 time"
    retries = record.get("retries")
    if retries is not None and (
        type(retries) is not int or not 0 <= retries <= _MAX_RETRIES  # a bool is no count
    ):
        return f"retries is {_kind(retries)}, not a count from 0 to {_MAX_RETRIES}"
    for name in _FLAGS:
        value = record.get(name)
        if value is not None and not isinstance(value, bool):
            return f"{name} is {_kind(value)}, not true or false"
    for name in _TEXTS:
        value = record.get(name)
        if value is not None and not isinstance(value, str):
            return f"{name} is {_kind(value)}, not a string"
    subrefs = record.get("subrefs")
    if subrefs is not None and (
        not isinstance(subrefs, list) or not all(isinstance(s, str) and s for s in subrefs)
    ):
        return f"subrefs is {_kind(subrefs)}, not a list of handler ids"
    return None


def _kind(value: Any) -> str:
    """A value's JSON kind, and a number's value (never a string's: it may be anything)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, int | float):
        return f"a number ({value!r:.20})"
    if isinstance(value, str):
        return f"a string of {len(value)} characters"
    return "an object" if isinstance(value, Mapping) else "a list" if isinstance(value, list) else "a value"


def _object(body: Mapping[str, Any]) -> str:
    md = body.get("metadata")
    md = md if isinstance(md, Mapping) else {}
    namespace, name = md.get("namespace"), md.get("name")
    return f"{body.get('kind') or 'object'} {namespace}/{name}" if namespace else f"{body.get('kind')} {name}"


def _progress_place(storage: ProgressStorage, key: str, body: Mapping[str, Any]) -> str:
    if isinstance(storage, AnnotationsProgressStorage):
        return " or ".join(f"annotation {k}" for k in storage.make_keys(key, body=body))
    if isinstance(storage, StatusProgressStorage):
        return f"field {'.'.join((*storage.field, key))}"
    if isinstance(storage, MultiProgressStorage):
        return " or ".join(_progress_place(s, key, body) for s in storage.storages)
    return type(storage).__name__


def _diffbase_place(storage: DiffBaseStorage, body: Mapping[str, Any]) -> str:
    if isinstance(storage, AnnotationsDiffBaseStorage):
        return " or ".join(f"annotation {k}" for k in storage.make_keys(storage.key, body=body))
    if isinstance(storage, StatusDiffBaseStorage):
        return f"field {'.'.join(storage.field)}"
    if isinstance(storage, MultiDiffBaseStorage):
        return " or ".join(_diffbase_place(s, body) for s in storage.storages)
    return type(storage).__name__


def _in_storage(record: ProgressRecord) -> dict[str, Any]:
    return {k: v for k, v in record.items() if v is not None}


@dataclass(frozen=True)
class Storages:
    """The storages of one cycle: those set in ``settings.persistence``, or kopf's defaults
    (``explicit`` False) written where the cycle's write goes."""

    progress: ProgressStorage
    diffbase: DiffBaseStorage
    explicit_progress: bool = False
    explicit_diffbase: bool = False

    def writing(self, status_only: bool, annotated: bool) -> tuple[ProgressStorage, DiffBaseStorage]:
        """Where this cycle writes: the defaults follow a status-only write into status, unless
        the object has kopf's annotations (kopf handled it, or it may again): then they stay there."""
        into_status = status_only and not annotated
        progress = _STATUS_PROGRESS if into_status and not self.explicit_progress else self.progress
        diffbase = _STATUS_DIFFBASE if into_status and not self.explicit_diffbase else self.diffbase
        return progress, diffbase

    def essence(self, body: Mapping[str, Any], extra_fields: Iterable[FieldPath]) -> dict[str, Any]:
        """The essence of ``body`` as kopf computes it (the diff-base's build, the progress cleared)."""
        built = self.diffbase.build(body=body, extra_fields=extra_fields)
        # kopf's default progress storage clears kopf.zalando.org/ annotations and status.kopf,
        # which the build has left out already (an extra field inside status.kopf aside).
        return self.progress.clear(essence=built) if self.explicit_progress else built


_STATUS_PROGRESS = StatusProgressStorage()
_STATUS_DIFFBASE = StatusDiffBaseStorage()


@dataclass
class State:
    """What a cycle reads of the object's handling state and what it will write back."""

    essence: dict[str, Any] | None = None
    progress: dict[str, Progress] = field(default_factory=dict)
    origin: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each handler's record as read (only changed records are written, as in kopf)."""
    purged: set[str] = field(default_factory=set)
    """Handlers whose records go (superseded by another cause)."""
    legacy: tuple[bool, bool] = (False, False)
    """The earlier kubeop.kopf record is in (the annotation, status)."""
    annotated: bool = False
    """The object has kopf's annotations (the default storages keep writing there)."""
    storages: Storages | None = None
    new_essence: dict[str, Any] | None = None
    """The essence to record with the next write (the cause is handled)."""

    @classmethod
    def of(cls, body: Mapping[str, Any], storages: Storages, handler_ids: Iterable[str], now: float) -> State:
        state = cls(storages=storages)
        defaults = not storages.explicit_progress and not storages.explicit_diffbase
        annotations = (body.get("metadata") or {}).get("annotations") or ()
        in_annotations = not defaults or any(k.startswith("kopf.") for k in annotations)
        if not in_annotations:  # the defaults: with none of kopf's annotations, only status can have it
            status = body.get("status")
            if not isinstance(status, Mapping) or not status.get("kopf"):
                state._read_legacy(body)
                return state
        progress_storage = storages.progress if in_annotations else _STATUS_PROGRESS
        try:
            state.essence = storages.diffbase.fetch(body=body) if in_annotations else None
            if state.essence is not None:
                state.annotated = not storages.explicit_diffbase
            elif not storages.explicit_diffbase:  # the default's status copy (a status-only write)
                state.essence = _STATUS_DIFFBASE.fetch(body=body)
        except ValueError as exc:
            # no excerpt: the essence holds the object's spec, which may be secret
            log.warning(
                "%s: ignoring its last-handled configuration (%s): %s; its handlers see it as new",
                _object(body),
                _diffbase_place(storages.diffbase if in_annotations else _STATUS_DIFFBASE, body),
                exc,
            )
        if state.essence is not None and storages.explicit_progress:
            state.essence = storages.progress.clear(essence=state.essence)
        pending = list(dict.fromkeys(handler_ids))
        seen: set[str] = set()
        while pending:
            key = pending.pop()
            if key in seen:
                continue
            seen.add(key)
            try:
                record = progress_storage.fetch(key=key, body=body)
                problem = None if record is None else _record_problem(record)
            except ValueError as exc:
                record, problem = None, str(exc)
            if problem is not None:
                log.warning(
                    "%s: ignoring the progress of handler %r (%s): %s; the handler starts anew",
                    _object(body),
                    key,
                    _progress_place(progress_storage, key, body),
                    problem,
                )
                record = None
            if record is not None:
                p = state.progress[key] = Progress.from_record(record, now)
                state.origin[key] = dict(record)
                if not state.annotated and not storages.explicit_progress and in_annotations:
                    state.annotated = _STATUS_PROGRESS.fetch(key=key, body=body) is None
                pending.extend(p.subrefs)
        state._read_legacy(body)
        return state

    def _read_legacy(self, body: Mapping[str, Any]) -> None:
        md = body.get("metadata") or {}
        in_annotation = (md.get("annotations") or {}).get(LEGACY_ANNOTATION)
        status = body.get("status")
        in_status = status.get(LEGACY_STATUS_FIELD) if isinstance(status, Mapping) else None
        self.legacy = (in_annotation is not None, in_status is not None)
        if self.essence is not None or self.progress:
            return
        docs = [d for d in (_legacy(in_annotation), _legacy(in_status)) if d is not None]
        if not docs:
            return
        doc = max(docs, key=lambda d: int(d.get("seq", 0)))
        self.essence = doc.get("essence")
        try:
            for key, p in (doc.get("progress") or {}).items():
                self.progress[key] = Progress(
                    purpose=str(p["p"]),
                    started=float(p["s"]),
                    retries=int(p.get("r", 0)),
                    delayed=float(p["d"]) if p.get("d") is not None else None,
                    success=bool(p.get("ok")),
                    failure=bool(p.get("fail")),
                    message=p.get("m"),
                )
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("ignoring an unreadable handling state: %s", exc)
            self.progress.clear()

    def store(self, body: Mapping[str, Any], patch: MutableMapping[str, Any], *, status_only: bool) -> None:
        """Write into ``patch``: the changed progress records, the purged ones and their
        sub-handlers', the new essence if any, and the earlier record's removal."""
        storages = self.storages or storages_of(PersistenceSettings())
        essence, self.new_essence = self.new_essence, None
        progress_storage, diffbase_storage = storages.writing(status_only, self.annotated)
        for key, p in self.progress.items():
            subs = {k for k in self.progress if k.startswith(f"{key}/")}
            if subs - set(p.subrefs):
                p.subrefs = tuple(sorted(set(p.subrefs) | subs))
            record = p.to_record()
            if _in_storage(record) != self.origin.get(key):
                progress_storage.store(key=key, record=record, body=body, patch=patch)
                self.origin[key] = _in_storage(record)
        gone = set(self.purged)
        for key in list(gone):
            gone.update(self.origin.get(key, {}).get("subrefs") or ())
        for key in sorted(gone):
            progress_storage.purge(key=key, body=body, patch=patch)
            if progress_storage is not storages.progress:  # a copy left in the other place goes too
                storages.progress.purge(key=key, body=body, patch=patch)
            self.origin.pop(key, None)
        self.purged.clear()
        progress_storage.flush()
        if essence is not None:
            diffbase_storage.store(body=body, patch=patch, essence=essence)
            self.essence = essence
        if patch:
            storages.progress.touch(body=body, patch=patch, value=None)
        if self.legacy[0]:
            patch.setdefault("metadata", {}).setdefault("annotations", {})[LEGACY_ANNOTATION] = None
        if self.legacy[1]:
            patch.setdefault("status", {})[LEGACY_STATUS_FIELD] = None
        self.legacy = (False, False)


def _legacy(text: Any) -> dict[str, Any] | None:
    if not isinstance(text, str):
        return None
    try:
        doc = orjson.loads(text)
    except ValueError as exc:
        log.warning("ignoring an unreadable handling state: %s", exc)
        return None
    return doc if isinstance(doc, dict) else None


def storages_of(persistence: PersistenceSettings) -> Storages:
    """The storages ``settings.persistence`` selects (see the module docstring)."""
    return Storages(
        persistence.progress_storage,
        persistence.diffbase_storage,
        explicit_progress=persistence.progress_storage is not DEFAULT_PROGRESS,
        explicit_diffbase=persistence.diffbase_storage is not DEFAULT_DIFFBASE,
    )
