"""Clocks for the work queues: the event loop's time, or a fake one that tests step by hand.

A queue needs two things from time: "what time is it" (metrics, delays) and "call me back in
``delay`` seconds" (the delaying queue's one timer, the periodic unfinished-work gauge). Both go
through a :class:`Clock`, so a test can swap in :class:`FakeClock` and move time explicitly, the
way client-go's tests use ``k8s.io/utils/clock/testing.FakeClock``.

Rate limiters only ask for the time, so they take a plain ``Callable[[], float]``
(``time.monotonic`` by default, or ``fake.now``).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Clock", "FakeClock", "LoopClock", "TimerHandle"]


class TimerHandle(Protocol):
    """A scheduled callback that can still be cancelled (``asyncio.TimerHandle`` is one)."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    """Monotonic seconds plus one-shot callbacks."""

    def now(self) -> float:
        """Monotonic time in seconds; only differences are meaningful."""
        ...

    def call_later(self, delay: float, callback: Callable[[], object]) -> TimerHandle:
        """Run ``callback()`` once, ``delay`` seconds from now."""
        ...


class LoopClock:
    """The running event loop's clock (``loop.time()`` / ``loop.call_later``).

    Outside a running loop ``now()`` falls back to ``time.monotonic()``, which is what the default
    asyncio loop uses anyway; ``call_later`` needs a running loop. Using the loop's own time keeps
    the queue correct under loops with a virtual clock.
    """

    __slots__ = ()

    def now(self) -> float:
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], object]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(delay, callback)


class _FakeTimer:
    __slots__ = ("callback", "cancelled", "when")

    def __init__(self, when: float, callback: Callable[[], object]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """A clock that only moves when told to; for deterministic tests.

    ``advance(seconds)`` fires every due callback in time order, synchronously, with ``now()``
    set to each callback's due time while it runs (callbacks scheduled by callbacks fire in the
    same ``advance`` if they fall due). Pass ``fake.now`` where a limiter wants a time function.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._timers: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    def call_later(self, delay: float, callback: Callable[[], object]) -> TimerHandle:
        timer = _FakeTimer(self._now + max(delay, 0.0), callback)
        heapq.heappush(self._timers, (timer.when, next(self._seq), timer))
        return timer

    @property
    def pending(self) -> int:
        """How many scheduled callbacks have neither fired nor been cancelled."""
        return sum(1 for _, _, timer in self._timers if not timer.cancelled)

    def next_due(self) -> float | None:
        """When the earliest live callback falls due, or None when nothing is scheduled."""
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        return self._timers[0][0] if self._timers else None

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, firing due callbacks in order."""
        if seconds < 0:
            raise ValueError("a FakeClock cannot go backwards")
        target = self._now + seconds
        while self._timers and self._timers[0][0] <= target:
            when, _, timer = heapq.heappop(self._timers)
            if timer.cancelled:
                continue
            self._now = max(self._now, when)
            timer.cancelled = True  # fired: a late cancel() is a no-op
            timer.callback()
        self._now = target
