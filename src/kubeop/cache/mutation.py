"""Cache mutation detector: catches code that changes objects it got from a cache.

Caches hand out the stored objects themselves (no copies: see :mod:`kubeop.cache.indexer`), so a
handler or reconciler that edits one in place silently corrupts what every other reader sees, and
the next update compares against a state the server never had. Like client-go's
``KUBE_CACHE_MUTATION_DETECTOR``, this keeps a serialized snapshot of every object an informer
delivers and compares periodically (every second) and at shutdown; a difference is a bug.

Enable it with the environment variable ``KUBEOP_CACHE_MUTATION_DETECTOR=1`` (or
``Informer(..., detect_mutations=True)``), in tests and during development only: it costs a
serialization per event and keeps snapshots for ``retain`` seconds (two generations, like
client-go), so memory grows with the event rate.

A detected mutation is logged at ERROR with the object's key and a compact diff, and raised as
:class:`CacheMutationError` from :meth:`MutationDetector.check`, which the informer calls when it
stops: a test that mutates cached objects fails at teardown.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

import orjson

from kubeop.cache.tombstone import DeletedFinalStateUnknown

__all__ = ["ENV_VAR", "CacheMutationError", "MutationDetector", "mutation_detection_enabled"]

log = logging.getLogger("kubeop.cache")

ENV_VAR = "KUBEOP_CACHE_MUTATION_DETECTOR"


def mutation_detection_enabled() -> bool:
    """True when ``KUBEOP_CACHE_MUTATION_DETECTOR`` is set to a true value (1, true, yes, on)."""
    return os.environ.get(ENV_VAR, "").strip().lower() in ("1", "true", "yes", "on")


class CacheMutationError(AssertionError):
    """An object held by a cache was changed in place by someone who read it."""


def _snapshot(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


class MutationDetector:
    """Snapshots objects as they are cached; ``compare()`` finds those changed since."""

    def __init__(self, name: str, *, period: float = 1.0, retain: float = 120.0) -> None:
        self.name = name
        self.period = period
        self.retain = retain
        self._current: list[tuple[Any, bytes]] = []
        self._retained: list[tuple[Any, bytes]] = []
        self._rotated = time.monotonic()
        self.failures: list[str] = []

    def add_object(self, obj: Any) -> None:
        """Remember a copy of a cached object, to compare it with the object later."""
        if isinstance(obj, DeletedFinalStateUnknown) or not isinstance(obj, dict):
            return
        self._current.append((obj, _snapshot(obj)))

    def compare(self) -> list[str]:
        """Describe every mutated object (and remember them in ``failures``)."""
        now = time.monotonic()
        if now - self._rotated > self.retain:
            self._retained, self._current = self._current, []
            self._rotated = now
        found: list[str] = []
        for entries in (self._retained, self._current):
            for i, (obj, snapshot) in enumerate(entries):
                current = _snapshot(obj)
                if current != snapshot:
                    found.append(_describe(self.name, obj, snapshot, current))
                    entries[i] = (obj, current)  # report each mutation once
        for message in found:
            log.error("%s", message)
        self.failures.extend(found)
        return found

    def check(self) -> None:
        """Compare now and raise :class:`CacheMutationError` if any mutation was ever detected."""
        self.compare()
        if self.failures:
            raise CacheMutationError("\n".join(self.failures))

    async def run(self) -> None:
        """Compare the cached objects with their copies every ``period`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(self.period)
            self.compare()


def _describe(name: str, obj: Any, before: bytes, after: bytes) -> str:
    meta = obj.get("metadata") or {}
    key = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else meta.get("name")
    old, new = orjson.loads(before), orjson.loads(after)
    changes = sorted(_diff(old, new, ""))
    shown = "; ".join(changes[:10]) + (f"; ... {len(changes) - 10} more" if len(changes) > 10 else "")
    return f"cache {name}: {obj.get('kind') or 'object'} {key} was mutated after it was cached: {shown}"


def _diff(old: Any, new: Any, path: str) -> list[str]:
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in old.keys() | new.keys():
            sub = f"{path}.{k}" if path else str(k)
            if k not in new:
                out.append(f"{sub} removed")
            elif k not in old:
                out.append(f"{sub} added")
            else:
                out.extend(_diff(old[k], new[k], sub))
        return out
    if old != new:
        return [f"{path or '<root>'}: {_short(old)} -> {_short(new)}"]
    return []


def _short(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= 60 else text[:57] + "..."
