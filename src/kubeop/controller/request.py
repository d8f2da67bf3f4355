"""Request and Result: what a reconciler is asked, and what it answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Request", "Result", "TerminalError", "request_for"]


@dataclass(frozen=True, slots=True)
class Request:
    """Reconcile the object ``namespace/name`` (``namespace`` is ``""`` for cluster scope) in
    ``cluster`` (``""``: the one cluster of a Manager; a :class:`~kubeop.fleet.Fleet` names it).

    Only the key travels through the work queue: the reconciler reads the current state from the
    cache, so many events for one object collapse into one reconcile (level-driven, not
    edge-driven).
    """

    namespace: str
    name: str
    cluster: str = ""

    def __str__(self) -> str:
        key = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.cluster}:{key}" if self.cluster else key


def request_for(obj: Any) -> Request:
    """The request for an object dict (fast path: no validation beyond the lookup)."""
    meta = obj["metadata"]
    return Request(meta.get("namespace") or "", meta["name"])


@dataclass(frozen=True, slots=True)
class Result:
    """What to do after a successful reconcile.

    ``Result()`` means done until something changes. ``requeue_after=s`` reconciles again after
    ``s`` seconds (and resets the backoff); ``requeue=True`` requeues with the rate limiter's
    backoff. To report a failure, raise: an exception is a rate-limited requeue, a
    :class:`TerminalError` is logged and counted but not retried.
    """

    requeue: bool = False
    requeue_after: float | None = None


class TerminalError(Exception):
    """A reconcile failure that retrying cannot fix (bad user input): counted, not requeued.

    The next change to the object (or a watched one) reconciles it again as usual.
    """
