"""Clocks for the work queues and reconcilers: the real time, or one that tests step by hand.

A queue needs two things from time: "what time is it" (metrics, delays) and "call me back in
``delay`` seconds" (the delaying queue's one timer, the periodic unfinished-work gauge). A
reconciler that acts on the calendar (a cron schedule) needs a third: the wall time, as a UTC
datetime. All three go through one :class:`Clock`, so a test can swap in a fake and move time
explicitly, the way client-go's tests use ``k8s.io/utils/clock/testing.FakeClock``:

- :class:`LoopClock`: the real one (the event loop's monotonic time, ``datetime.now(UTC)``).
- :class:`FakeClock`: stands still until ``advance()``; for unit tests of the queues.
- :class:`SteppedClock`: runs like the real clock and jumps forward on ``advance()``, firing
  the callbacks that fall due; for integration tests, where retries after a failed request
  must still happen in real time while the calendar is stepped (``Manager(clock=...)``).

Rate limiters only ask for the time, so they take a plain ``Callable[[], float]``
(``time.monotonic`` by default, or ``fake.now``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Protocol

__all__ = ["Clock", "FakeClock", "LoopClock", "SteppedClock", "TimerHandle"]


class TimerHandle(Protocol):
    """A scheduled callback that can still be cancelled (``asyncio.TimerHandle`` is one)."""

    def cancel(self) -> None:
        """Cancel the call if it has not run yet."""


class Clock(Protocol):
    """Monotonic seconds, the wall time, and one-shot callbacks."""

    def now(self) -> float:
        """Monotonic time in seconds; only differences are meaningful."""
        ...

    def utcnow(self) -> dt.datetime:
        """The wall time: a timezone-aware UTC datetime (moves with :meth:`now` on fakes)."""
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
        """The running event loop's monotonic time (``time.monotonic()`` outside a loop), in seconds."""
        try:
            return asyncio.get_running_loop().time()
        except RuntimeError:
            return time.monotonic()

    def utcnow(self) -> dt.datetime:
        """The current wall-clock time, in UTC."""
        return dt.datetime.now(dt.UTC)

    def call_later(self, delay: float, callback: Callable[[], object]) -> TimerHandle:
        """Run ``callback`` after ``delay`` seconds on the running event loop."""
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
    ``utcnow()`` is ``wall`` (the real time when the clock was made, by default) plus the
    seconds advanced since.
    """

    def __init__(self, start: float = 0.0, *, wall: dt.datetime | None = None) -> None:
        self._now = start
        self._start = start
        self._wall = _utc(wall) if wall is not None else dt.datetime.now(dt.UTC)
        self._timers: list[tuple[float, int, _FakeTimer]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        """The fake monotonic time: it moves only when the test steps it."""
        return self._now

    def utcnow(self) -> dt.datetime:
        """The fake wall-clock time (UTC): the start's wall time plus the seconds stepped."""
        return self._wall + dt.timedelta(seconds=self._now - self._start)

    def call_later(self, delay: float, callback: Callable[[], object]) -> TimerHandle:
        """Run ``callback`` once the fake time has been stepped ``delay`` seconds further."""
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


def _utc(when: dt.datetime) -> dt.datetime:
    if when.tzinfo is None:
        raise ValueError(f"wall time {when.isoformat()} has no timezone: pass an aware datetime (UTC)")
    return when.astimezone(dt.UTC)


class _SteppedTimer:
    __slots__ = ("callback", "clock", "handle", "when")

    def __init__(self, clock: SteppedClock, when: float, callback: Callable[[], object]) -> None:
        self.clock = clock
        self.when = when
        self.callback = callback
        self.handle: asyncio.TimerHandle | None = None

    def arm(self) -> None:
        self.handle = asyncio.get_running_loop().call_at(self.when - self.clock.offset, self.fire)

    def fire(self) -> None:
        if self.handle is None:
            return
        self.handle = None
        self.clock._timers.discard(self)
        self.callback()

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        self.clock._timers.discard(self)


class SteppedClock:
    """The real clock plus the steps a test added with :meth:`advance`.

    Time runs as usual (the event loop's clock), so retries, backoffs and timeouts behave as in
    production; ``advance(seconds)`` moves the clock forward at once and fires, in time order,
    every callback that is due by then (a ``RequeueAfter`` to the next cron time, say).
    ``utcnow()`` starts at ``wall`` (the real time by default) and moves with ``now()``.
    Give it to ``Manager(clock=...)`` to step the time every controller and reconciler sees.
    ``advance`` and ``call_later`` must run on the event loop's thread.
    """

    def __init__(self, wall: dt.datetime | None = None) -> None:
        self.offset = 0.0
        self._origin = time.monotonic()
        self._wall = _utc(wall) if wall is not None else dt.datetime.now(dt.UTC)
        self._timers: set[_SteppedTimer] = set()

    def now(self) -> float:
        """The event loop's time plus every step taken so far, in seconds."""
        try:
            base = asyncio.get_running_loop().time()
        except RuntimeError:
            base = time.monotonic()
        return base + self.offset

    def utcnow(self) -> dt.datetime:
        """The wall-clock time (UTC) plus every step taken so far."""
        return self._wall + dt.timedelta(seconds=time.monotonic() + self.offset - self._origin)

    def call_later(self, delay: float, callback: Callable[[], object]) -> TimerHandle:
        """Run ``callback`` after ``delay`` seconds of this clock: real time passing, or a step, whichever
        comes first.
        """
        timer = _SteppedTimer(self, self.now() + max(delay, 0.0), callback)
        timer.arm()
        self._timers.add(timer)
        return timer

    @property
    def pending(self) -> int:
        """How many scheduled callbacks have neither fired nor been cancelled."""
        return len(self._timers)

    def advance(self, seconds: float) -> None:
        """Jump ``seconds`` forward: due callbacks fire now, in order; the others are re-armed."""
        if seconds < 0:
            raise ValueError("a SteppedClock cannot go backwards")
        self.offset += seconds
        now = self.now()
        for timer in sorted(self._timers, key=lambda t: t.when):
            if timer.handle is None:
                continue
            timer.handle.cancel()
            if timer.when <= now:
                timer.handle = None
                self._timers.discard(timer)
                timer.callback()
            else:
                timer.arm()
