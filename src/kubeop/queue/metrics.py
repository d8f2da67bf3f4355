"""Metrics hooks for the work queues, shaped like client-go's ``workqueue.MetricsProvider``.

A queue with a ``name`` and a :class:`MetricsProvider` asks the provider once, at construction,
for one metric object per series and then only calls ``inc`` / ``dec`` / ``set`` / ``observe`` on
them. The controller runtime maps them onto the Prometheus series controller-runtime exports, with
the queue name as the ``name`` label:

- ``new_depth_metric`` -> ``workqueue_depth``
- ``new_adds_metric`` -> ``workqueue_adds_total``
- ``new_latency_metric`` -> ``workqueue_queue_duration_seconds`` (add to get)
- ``new_work_duration_metric`` -> ``workqueue_work_duration_seconds`` (get to done)
- ``new_unfinished_work_seconds_metric`` -> ``workqueue_unfinished_work_seconds``
- ``new_longest_running_processor_seconds_metric`` -> ``workqueue_longest_running_processor_seconds``
- ``new_retries_metric`` -> ``workqueue_retries_total`` (every ``add_after``, so every rate-limited add)

The two unfinished-work gauges are refreshed every 0.5 s by one timer on the queue's clock, armed
at the first ``get`` and stopped at shutdown.

Without a name or a provider the queue keeps no metric state at all (no per-item timestamps), as
client-go does, so the default costs one ``is None`` test per operation.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from kubeop.queue.clock import Clock

__all__ = [
    "CounterMetric",
    "GaugeMetric",
    "HistogramMetric",
    "MetricsProvider",
    "NoopMetricsProvider",
    "SettableGaugeMetric",
]

T = TypeVar("T", bound=Hashable)


class GaugeMetric(Protocol):
    """A value that goes up and down by one (the queue depth)."""

    def inc(self) -> None:
        """Add one."""

    def dec(self) -> None:
        """Subtract one."""


class SettableGaugeMetric(Protocol):
    """A value that is set outright (unfinished work, longest running processor)."""

    def set(self, value: float) -> None:
        """Set the value."""


class CounterMetric(Protocol):
    """A value that only goes up (adds, retries)."""

    def inc(self) -> None:
        """Add one."""


class HistogramMetric(Protocol):
    """Observations in seconds (queue latency, work duration)."""

    def observe(self, value: float) -> None:
        """Record one observation (seconds)."""


class MetricsProvider(Protocol):
    """Makes the metric objects for one named queue; each method is called once per queue."""

    def new_depth_metric(self, name: str) -> GaugeMetric:
        """The metric for the current depth of the queue named ``name``."""

    def new_adds_metric(self, name: str) -> CounterMetric:
        """The metric for the adds to the queue named ``name``."""

    def new_latency_metric(self, name: str) -> HistogramMetric:
        """The metric for how long items wait in the queue named ``name`` before being processed (seconds)."""

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        """The metric for how long processing an item of the queue named ``name`` takes (seconds)."""

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """The metric for the seconds of work in progress not yet observed by the work duration, for the queue
        named ``name``.
        """

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """The metric for how long the longest running processor of the queue named ``name`` has run
        (seconds).
        """

    def new_retries_metric(self, name: str) -> CounterMetric:
        """The metric for the retries (rate-limited adds) of the queue named ``name``."""


class _NoopMetric:
    __slots__ = ()

    def inc(self) -> None:
        pass

    def dec(self) -> None:
        pass

    def set(self, value: float) -> None:
        pass

    def observe(self, value: float) -> None:
        pass


_NOOP = _NoopMetric()


class NoopMetricsProvider:
    """A provider whose metrics discard everything; queues given it keep no metric state."""

    __slots__ = ()

    def new_depth_metric(self, name: str) -> GaugeMetric:
        """A metric that records nothing."""
        return _NOOP

    def new_adds_metric(self, name: str) -> CounterMetric:
        """A metric that records nothing."""
        return _NOOP

    def new_latency_metric(self, name: str) -> HistogramMetric:
        """A metric that records nothing."""
        return _NOOP

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        """A metric that records nothing."""
        return _NOOP

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """A metric that records nothing."""
        return _NOOP

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        """A metric that records nothing."""
        return _NOOP

    def new_retries_metric(self, name: str) -> CounterMetric:
        """A metric that records nothing."""
        return _NOOP


def _enabled(name: str, provider: MetricsProvider | None) -> bool:
    return bool(name) and provider is not None and not isinstance(provider, NoopMetricsProvider)


class QueueMetrics(Generic[T]):
    """Per-queue bookkeeping behind the hooks (client-go ``defaultQueueMetrics``).

    ``add`` is called when an item becomes dirty (also while it is being processed, so the depth
    counts it once more), ``get`` when a worker takes it, ``done`` when the worker finishes.
    Latency runs from the first add to the get, work duration from the get to the done.
    """

    __slots__ = (
        "_add_times",
        "_adds",
        "_clock",
        "_depth",
        "_latency",
        "_longest",
        "_start_times",
        "_unfinished",
        "_work_duration",
    )

    def __init__(self, name: str, provider: MetricsProvider, clock: Clock) -> None:
        self._clock = clock
        self._depth = provider.new_depth_metric(name)
        self._adds = provider.new_adds_metric(name)
        self._latency = provider.new_latency_metric(name)
        self._work_duration = provider.new_work_duration_metric(name)
        self._unfinished = provider.new_unfinished_work_seconds_metric(name)
        self._longest = provider.new_longest_running_processor_seconds_metric(name)
        self._add_times: dict[T, float] = {}
        self._start_times: dict[T, float] = {}

    @classmethod
    def create(cls, name: str, provider: MetricsProvider | None, clock: Clock) -> QueueMetrics[T] | None:
        """The metrics for a queue, or None when the queue is unnamed or has no real provider.
        A provider that records the adds only (every other metric a no-op) gets an adds counter
        without the timing state."""
        if provider is None or not _enabled(name, provider):
            return None
        metrics = cls(name, provider, clock)
        if all(
            m is _NOOP
            for m in (
                metrics._depth,
                metrics._latency,
                metrics._work_duration,
                metrics._unfinished,
                metrics._longest,
            )
        ):
            return _AddsOnly(metrics._adds, clock)
        return metrics

    def add(self, item: T) -> None:
        self._adds.inc()
        self._depth.inc()
        if item not in self._add_times:
            self._add_times[item] = self._clock.now()

    def get(self, item: T) -> None:
        self._depth.dec()
        now = self._clock.now()
        self._start_times[item] = now
        added = self._add_times.pop(item, None)
        if added is not None:
            self._latency.observe(now - added)

    def done(self, item: T) -> None:
        started = self._start_times.pop(item, None)
        if started is not None:
            self._work_duration.observe(self._clock.now() - started)

    def update_unfinished_work(self) -> None:
        """Set the two gauges from the items being processed right now."""
        now = self._clock.now()
        total = 0.0
        oldest = 0.0
        for started in self._start_times.values():
            age = now - started
            total += age
            oldest = max(oldest, age)
        self._unfinished.set(total)
        self._longest.set(oldest)


class _AddsOnly(QueueMetrics[T]):
    """Queue metrics of a provider that records the adds only: a counter, no clock reads."""

    __slots__ = ()

    def __init__(self, adds: CounterMetric, clock: Clock) -> None:
        self._adds, self._clock = adds, clock

    def add(self, item: T) -> None:
        self._adds.inc()

    def get(self, item: T) -> None:
        pass

    def done(self, item: T) -> None:
        pass

    def update_unfinished_work(self) -> None:
        pass


def retries_metric(name: str, provider: MetricsProvider | None) -> CounterMetric | None:
    """The retries counter of a delaying queue, or None when metrics are off."""
    if provider is None or not _enabled(name, provider):
        return None
    metric = provider.new_retries_metric(name)
    return None if metric is _NOOP else metric
