"""The handling state recorded on each object: the essence it was last handled with, and the
progress of handlers that are not done yet.

One JSON record, in the annotation ``kopf.kubeop.dev/state`` or in ``status.kopfState``,
written in the same request as the handlers' patch: where that request goes decides where the
record goes (a status-only write on a kind with a status subresource carries it in status). Each
write increments ``seq``; a reader takes the copy with the higher one. kopf keeps the same two
things apart: the essence in ``kopf.zalando.org/last-handled-configuration`` and one annotation
per handler in progress.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["ANNOTATION", "STATUS_FIELD", "Progress", "State"]

ANNOTATION = "kopf.kubeop.dev/state"
STATUS_FIELD = "kopfState"
log = logging.getLogger("kubeop.kopf")


@dataclass
class Progress:
    """One handler's progress within the current cause."""

    purpose: str
    started: float  # wall-clock seconds of the first attempt
    retries: int = 0
    delayed: float | None = None  # not before this wall-clock time
    success: bool = False
    failure: bool = False
    message: str | None = None

    @property
    def finished(self) -> bool:
        return self.success or self.failure

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"p": self.purpose, "s": round(self.started, 3), "r": self.retries}
        if self.delayed is not None:
            out["d"] = round(self.delayed, 3)
        if self.success:
            out["ok"] = True
        if self.failure:
            out["fail"] = True
        if self.message:
            out["m"] = self.message[:500]
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Progress:
        return cls(
            purpose=str(d["p"]),
            started=float(d["s"]),
            retries=int(d.get("r", 0)),
            delayed=float(d["d"]) if d.get("d") is not None else None,
            success=bool(d.get("ok")),
            failure=bool(d.get("fail")),
            message=d.get("m"),
        )


@dataclass
class State:
    seq: int = 0
    essence: dict[str, Any] | None = None
    progress: dict[str, Progress] = field(default_factory=dict)

    def encode(self) -> str:
        doc: dict[str, Any] = {"seq": self.seq}
        if self.essence is not None:
            doc["essence"] = self.essence
        if self.progress:
            doc["progress"] = {k: v.to_json() for k, v in self.progress.items()}
        return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS).decode()

    @classmethod
    def decode(cls, text: Any) -> State | None:
        if not isinstance(text, str):
            return None
        try:
            doc = orjson.loads(text)
            return cls(
                seq=int(doc.get("seq", 0)),
                essence=doc.get("essence"),
                progress={k: Progress.from_json(v) for k, v in (doc.get("progress") or {}).items()},
            )
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            log.warning("ignoring an unreadable handling state: %s", exc)
            return None

    @classmethod
    def of(cls, body: Mapping[str, Any]) -> State:
        """The newer of the two recorded copies (a fresh state if there is none)."""
        md = body.get("metadata") or {}
        in_annotation = cls.decode((md.get("annotations") or {}).get(ANNOTATION))
        status = body.get("status")
        in_status = cls.decode(status.get(STATUS_FIELD)) if isinstance(status, Mapping) else None
        candidates = [s for s in (in_annotation, in_status) if s is not None]
        if not candidates:
            return cls()
        return max(candidates, key=lambda s: s.seq)
