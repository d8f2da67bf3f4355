"""Pausing CPython's cyclic garbage collector while an informer loads a list.

Loading a list of N objects allocates several containers per object (dicts, lists), and all of
them survive: they are the cache. CPython's collector runs a full collection each time the
surviving containers have grown by a quarter, so a growing cache is walked again and again: 7
full collections and ~0.7 s of the ~1.7 s of CPU a sync of 100,000 ConfigMaps took, the largest
single cost (bench/scale). Nothing in a list is garbage, so informers pause the collector from
the start of a (re)list until its objects are in the store, and resume it then.

The pause is process-wide and reference counted: the collector runs again when the last holder
releases, or at the latest after ``max_seconds`` (a list that stalls must not leave it off), and
only if it was enabled when the first holder paused it (an application that turned it off keeps
it off). Cycles that become garbage meanwhile are collected once it runs again.

When the pause ends the loaded objects are all in the youngest generation, and the collections
that follow would walk the whole cache again to promote them. Instead the end of the pause moves
everything alive to the permanent generation (``gc.freeze()``), unless the application froze
objects itself (then freezing is left to it). Frozen objects are still freed by reference
counting; only cycles among them wait: the next pause thaws them (``gc.unfreeze()``) and, if the
freeze is older than ``THAW_COLLECT_AFTER`` seconds (a relist, not the next informer's first
list at start-up), collects them once before it disables the collector.
"""

from __future__ import annotations

import asyncio
import gc
import time

__all__ = ["GcPause"]

_holders = 0
_resume = False
_frozen_at: float | None = None  # when the end of a pause froze the process's objects
THAW_COLLECT_AFTER = 60.0


class GcPause:
    """One holder of the pause: created inside a running event loop, :meth:`release` once done
    (idempotent; also called by the ``max_seconds`` timer)."""

    __slots__ = ("_released", "_timer")

    def __init__(self, max_seconds: float = 60.0) -> None:
        global _holders, _resume, _frozen_at
        if _holders == 0:
            _resume = gc.isenabled()
            gc.disable()
            if _frozen_at is not None:
                gc.unfreeze()
                if time.monotonic() - _frozen_at >= THAW_COLLECT_AFTER:
                    gc.collect()  # the cycles that died while frozen
                _frozen_at = None
        _holders += 1
        self._released = False
        self._timer: asyncio.TimerHandle | None = asyncio.get_running_loop().call_later(
            max_seconds, self.release
        )

    @property
    def released(self) -> bool:
        return self._released

    def release(self) -> None:
        global _holders, _frozen_at
        if self._released:
            return
        self._released = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        _holders -= 1
        if _holders == 0 and _resume:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                _frozen_at = time.monotonic()
            gc.enable()
