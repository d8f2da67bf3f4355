"""The work queue: a FIFO of keys that never hands one key to two workers at once.

This is client-go's ``workqueue.Typed`` (k8s.io/client-go/util/workqueue/queue.go) on asyncio.
Three structures hold the state:

- ``queue``: the order in which items are handed out; every item in it is dirty and not being
  processed, and appears once;
- ``dirty``: every item that needs processing (queued, or added again while being processed);
- ``processing``: the items workers hold between ``get`` and ``done``.

An add of a dirty item is a no-op, an add of an item being processed only marks it dirty, and
``done`` puts a dirty item back at the tail. So a key added any number of times while a worker
holds it is processed exactly once more, after that worker is done, and never concurrently.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Hashable
from typing import Generic, TypeVar

from kubeop.queue.clock import Clock, LoopClock, TimerHandle
from kubeop.queue.metrics import MetricsProvider, QueueMetrics

__all__ = ["QueueShutDown", "WorkQueue"]

T = TypeVar("T", bound=Hashable)

#: How often the unfinished-work gauges are refreshed while metrics are on (client-go: 500 ms).
UNFINISHED_WORK_UPDATE_PERIOD = 0.5


class QueueShutDown(Exception):
    """Raised by ``get`` once the queue is shut down and has nothing left to hand out."""


class WorkQueue(Generic[T]):
    """A de-duplicating FIFO work queue for asyncio workers.

    A worker loop::

        async for key in queue:          # ends when the queue is shut down and drained
            try:
                await reconcile(key)
            finally:
                queue.done(key)          # always: the key stays "processing" until then

    Guarantees:
        - An item is handed to at most one worker at a time.
        - An item added while queued is not queued twice; added while being processed, it is
          handed out exactly once more, after ``done``.
        - Items are handed out in the order they were queued (FIFO); an item re-added while being
          processed is queued when it is ``done``. Waiting workers are served in the order they
          started waiting.
        - ``add``, ``get`` (when an item is ready) and ``done`` are O(1) and start no tasks.

    Assumptions:
        - One event loop, one thread: every method is called from the loop that runs the workers.
          Nothing here is thread-safe; from another thread use ``loop.call_soon_threadsafe(q.add,
          key)``. The methods never await between reading and changing the state, which is what
          makes them atomic with respect to other tasks.
        - Items are hashable and their hash and equality do not change while queued.
        - Every item returned by ``get`` is given back with ``done``, even when processing fails
          or is cancelled; otherwise it is never handed out again and ``shut_down_with_drain``
          waits forever.

    Shutdown (as client-go): after ``shut_down`` adds are ignored, items already queued are
    still handed out, and ``get`` raises :class:`QueueShutDown` once the queue is empty.
    ``shut_down_with_drain`` additionally waits until no item is being processed.
    """

    __slots__ = (
        "_clock",
        "_dirty",
        "_drain",
        "_drainers",
        "_getters",
        "_metrics",
        "_name",
        "_processing",
        "_queue",
        "_shutting_down",
        "_unfinished_timer",
    )

    def __init__(
        self,
        name: str = "",
        *,
        metrics: MetricsProvider | None = None,
        clock: Clock | None = None,
    ) -> None:
        """Make an empty queue.

        Args:
            name: the queue's name, the ``name`` label of its metrics; an unnamed queue records
                no metrics.
            metrics: where the metrics go; None (the default) records none.
            clock: time for metrics and delays; the running loop's clock by default.
        """
        self._name = name
        self._clock: Clock = clock if clock is not None else LoopClock()
        self._queue: deque[T] = deque()
        self._dirty: set[T] = set()
        self._processing: set[T] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drainers: list[asyncio.Future[None]] = []
        self._shutting_down = False
        self._drain = False
        self._metrics: QueueMetrics[T] | None = QueueMetrics.create(name, metrics, self._clock)
        self._unfinished_timer: TimerHandle | None = None

    @property
    def name(self) -> str:
        """The queue's name in metrics (empty: no metrics)."""
        return self._name

    def __len__(self) -> int:
        """How many items wait to be handed out (not those being processed); informational."""
        return len(self._queue)

    @property
    def processing(self) -> int:
        """How many items are handed out and not done yet; informational."""
        return len(self._processing)

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} {self._name!r} queued={len(self._queue)} "
            f"processing={len(self._processing)} shutting_down={self._shutting_down}>"
        )

    def add(self, item: T) -> None:
        """Mark ``item`` as needing processing; ignored once the queue is shutting down."""
        if self._shutting_down or item in self._dirty:
            return
        if self._metrics is not None:
            self._metrics.add(item)
        self._dirty.add(item)
        if item in self._processing:
            return  # handed out again by done()
        self._queue.append(item)
        if self._getters:
            self._wake_one_getter()

    async def get(self) -> T:
        """Wait for the next item and mark it as being processed; the caller must ``done`` it.

        Raises:
            QueueShutDown: the queue is shut down and empty; the worker should stop.
        """
        while not self._queue:
            if self._shutting_down:
                raise QueueShutDown(self._name)
            getter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()
                with contextlib.suppress(ValueError):
                    self._getters.remove(getter)
                # We were woken for an item but are leaving: pass the wake-up on.
                if self._queue and not getter.cancelled():
                    self._wake_one_getter()
                raise
        return self._take()

    def get_nowait(self) -> T:
        """Like ``get`` without waiting.

        Raises:
            QueueShutDown: the queue is shut down and empty.
            asyncio.QueueEmpty: nothing is ready.
        """
        if not self._queue:
            if self._shutting_down:
                raise QueueShutDown(self._name)
            raise asyncio.QueueEmpty
        return self._take()

    def __aiter__(self) -> WorkQueue[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.get()
        except QueueShutDown:
            raise StopAsyncIteration from None

    def done(self, item: T) -> None:
        """Mark ``item`` as processed; if it was added meanwhile, queue it again.

        ``done`` of an item that is not being processed is a no-op (client-go would queue a
        duplicate).
        """
        if item not in self._processing:
            return
        if self._metrics is not None:
            self._metrics.done(item)
        self._processing.remove(item)
        if item in self._dirty:
            self._queue.append(item)
            if self._getters:
                self._wake_one_getter()
        if not self._processing and self._drainers:
            self._wake_drainers()

    def shut_down(self) -> None:
        """Stop accepting items; workers get the rest, then :class:`QueueShutDown`.

        Also releases a pending ``shut_down_with_drain`` (a second Ctrl-C, say). Idempotent.
        """
        self._begin_shutdown(drain=False)
        self._wake_drainers()

    async def shut_down_with_drain(self) -> None:
        """``shut_down``, then wait until no item is being processed.

        As in client-go, this waits for the *processing* set to empty: items still queued are
        handed out to workers that keep calling ``get``, and a dirty item that ``done`` re-queues
        during the drain is handed out again. Returns early if ``shut_down`` is called meanwhile.
        """
        self._begin_shutdown(drain=True)
        loop = asyncio.get_running_loop()
        while self._processing and self._drain:
            drainer: asyncio.Future[None] = loop.create_future()
            self._drainers.append(drainer)
            try:
                await drainer
            finally:
                with contextlib.suppress(ValueError):
                    self._drainers.remove(drainer)

    def shutting_down(self) -> bool:
        """Whether ``shut_down`` or ``shut_down_with_drain`` has been called."""
        return self._shutting_down

    # -- internals -----------------------------------------------------------------------------

    def _take(self) -> T:
        item = self._queue.popleft()
        if self._metrics is not None:
            self._metrics.get(item)
            if self._unfinished_timer is None and not self._shutting_down:
                self._schedule_unfinished_work_update()
        self._processing.add(item)
        self._dirty.discard(item)
        return item

    def _wake_one_getter(self) -> None:
        getters = self._getters
        while getters:
            getter = getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    def _wake_drainers(self) -> None:
        for drainer in self._drainers:
            if not drainer.done():
                drainer.set_result(None)

    def _begin_shutdown(self, *, drain: bool) -> None:
        """Set the flags and wake every waiting worker; subclasses stop their timers here."""
        self._drain = drain
        self._shutting_down = True
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
        if self._unfinished_timer is not None:
            self._unfinished_timer.cancel()
            self._unfinished_timer = None

    def _schedule_unfinished_work_update(self) -> None:
        try:
            self._unfinished_timer = self._clock.call_later(
                UNFINISHED_WORK_UPDATE_PERIOD, self._update_unfinished_work
            )
        except RuntimeError:  # no running loop (get_nowait outside one): try again next time
            self._unfinished_timer = None

    def _update_unfinished_work(self) -> None:
        self._unfinished_timer = None
        if self._shutting_down or self._metrics is None:
            return
        self._metrics.update_unfinished_work()
        self._schedule_unfinished_work_update()
