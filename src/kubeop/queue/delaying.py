"""The delaying queue: a work queue that can add an item later (client-go ``AddAfter``).

Waiting items live in one heap ordered by ready time, with one timer armed for the earliest of
them: no task or timer per item, whatever the number of waiting items. This replaces client-go's
waiting goroutine, its channel and its 10 s heartbeat (delaying_queue.go) with the event loop's
own timer.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from typing import TypeVar

from kubeop.queue.clock import Clock, TimerHandle
from kubeop.queue.metrics import CounterMetric, MetricsProvider, retries_metric
from kubeop.queue.workqueue import WorkQueue

__all__ = ["DelayingQueue"]

T = TypeVar("T", bound=Hashable)


class DelayingQueue(WorkQueue[T]):
    """A :class:`WorkQueue` with ``add_after``.

    Semantics (client-go):
        - ``add_after(item, delay)`` with ``delay <= 0`` is ``add(item)``.
        - An item waiting already keeps the *earlier* of its two ready times; a later
          ``add_after`` never postpones it. Waiting and queued are independent: an item can be
          both queued now and waiting to be added again later.
        - When its time comes the item is ``add``-ed, with the usual de-duplication.
        - After shutdown ``add_after`` is ignored and waiting items are dropped.
        - Every ``add_after`` before shutdown counts one retry in the metrics.

    Assumptions: as :class:`WorkQueue`; in addition ``add_after`` with a positive delay must run
    inside the event loop (it may arm the loop's timer).
    """

    __slots__ = ("_retries", "_seq", "_timer", "_timer_at", "_waiting", "_waiting_by_item")

    def __init__(
        self,
        name: str = "",
        *,
        metrics: MetricsProvider | None = None,
        clock: Clock | None = None,
    ) -> None:
        super().__init__(name, metrics=metrics, clock=clock)
        # Heap of (ready_at, seq, item). When an item's ready time moves earlier its old entry
        # stays in the heap and is recognised as stale because _waiting_by_item no longer
        # points at it (lazy deletion; heapq has no decrease-key).
        self._waiting: list[tuple[float, int, T]] = []
        self._waiting_by_item: dict[T, tuple[float, int, T]] = {}
        self._seq = itertools.count()
        self._timer: TimerHandle | None = None
        self._timer_at = 0.0
        self._retries: CounterMetric | None = retries_metric(name, metrics)

    def add_after(self, item: T, delay: float) -> None:
        """Add ``item`` once ``delay`` seconds have passed (at once if ``delay <= 0``)."""
        if self._shutting_down:
            return
        if self._retries is not None:
            self._retries.inc()
        if delay <= 0:
            self.add(item)
            return
        now = self._clock.now()
        ready_at = now + delay
        existing = self._waiting_by_item.get(item)
        if existing is not None:
            if existing[0] <= ready_at:
                return
            if len(self._waiting) > 2 * len(self._waiting_by_item) + 64:
                self._compact()
        entry = (ready_at, next(self._seq), item)
        heapq.heappush(self._waiting, entry)
        self._waiting_by_item[item] = entry
        if self._timer is None or ready_at < self._timer_at:
            self._arm(ready_at, now)

    @property
    def waiting(self) -> int:
        """How many distinct items wait for their time to come."""
        return len(self._waiting_by_item)

    def ready_at(self, item: T) -> float | None:
        """The clock time at which a waiting ``item`` will be added, or None if it is not waiting."""
        entry = self._waiting_by_item.get(item)
        return None if entry is None else entry[0]

    # -- internals -----------------------------------------------------------------------------

    def _arm(self, ready_at: float, now: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = ready_at
        self._timer = self._clock.call_later(ready_at - now, self._on_timer)

    def _compact(self) -> None:
        """Drop stale heap entries, so items whose time keeps moving earlier cannot pile them up."""
        self._waiting = list(self._waiting_by_item.values())
        heapq.heapify(self._waiting)

    def _on_timer(self) -> None:
        self._timer = None
        if self._shutting_down:
            return
        now = self._clock.now()
        waiting = self._waiting
        by_item = self._waiting_by_item
        while waiting:
            entry = waiting[0]
            item = entry[2]
            if by_item.get(item) is not entry:  # stale: superseded by an earlier ready time
                heapq.heappop(waiting)
                continue
            if entry[0] > now:  # not due (a timer may fire a hair early): wait for the rest
                self._arm(entry[0], now)
                return
            heapq.heappop(waiting)
            del by_item[item]
            self.add(item)

    def _begin_shutdown(self, *, drain: bool) -> None:
        super()._begin_shutdown(drain=drain)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiting.clear()
        self._waiting_by_item.clear()
