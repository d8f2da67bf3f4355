"""DeletedFinalStateUnknown: the tombstone of an object whose delete event was missed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["DeletedFinalStateUnknown"]


@dataclass(frozen=True, slots=True)
class DeletedFinalStateUnknown:
    """An object that vanished while the watch was down: a relist no longer lists it.

    ``on_delete`` receives this instead of the object when the delete itself was not observed.
    ``obj`` is the last state the cache knew, which may be stale (it can even be ``None`` when the
    cache never held the object); ``key`` is its ``namespace/name`` key. Handlers that only need
    the key should use :func:`~kubeop.cache.keys.object_key`, which accepts both forms.
    """

    key: str
    obj: Any
