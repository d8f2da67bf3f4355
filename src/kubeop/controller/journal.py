"""The reconcile journal: what running controllers hand an observer (the dashboard), when one is on.

    journal = ReconcileJournal(size=4096)
    runtime = ControllerRuntime(..., journal=journal)   # None (the default): nothing recorded
    ...
    while journal.records:
        record = journal.records.popleft()               # the observer drains it on its own time

A reconcile pays one ``deque.append`` of a :class:`ReconcileRecord` (the deque is bounded: an
observer that does not drain loses the oldest records, never memory). Each running controller
registers its :class:`ControllerLoad` (queue depth, adds, workers busy), read when the observer
samples. Without a journal no record is made and no counter is installed.

The writes a reconcile makes are counted by the reconciler client's write guard, wrapped by
:func:`counting_writes` (the Manager does it when a dashboard is on): every write request the
client sends passes its guard first, so the wrapper adds one to the running reconcile's
``ctx.writes`` (one context-variable read per write). Without it nothing is counted and a
record's ``writes`` is 0.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from kubeop.controller.context import current_reconcile
from kubeop.controller.request import Request
from kubeop.queue import MetricsProvider
from kubeop.queue.metrics import (
    CounterMetric,
    GaugeMetric,
    HistogramMetric,
    NoopMetricsProvider,
    SettableGaugeMetric,
)

__all__ = ["ControllerLoad", "ReconcileJournal", "ReconcileRecord", "counting_writes"]


class ReconcileRecord(NamedTuple):
    """One finished reconcile."""

    controller: str
    kind: str
    request: Request
    started: float
    """Wall-clock time (``time.time()``) it started."""
    seconds: float
    outcome: str
    """``success``, ``requeue``, ``requeue_after``, ``error`` (retried), ``terminal`` or ``parked``
    (the API server was unavailable)."""
    error: BaseException | None
    requeue_after: float
    retry_in: float | None
    """After an error: the backoff before the next attempt (None: none planned, or parked)."""
    attempts: int
    """Failed attempts in a row so far (0 after a success)."""
    reconcile_id: str
    writes: int = 0
    """Write requests the reconcile sent to the API server (counted under :func:`counting_writes`;
    0 otherwise)."""


def counting_writes(guard: Callable[[], None] | None) -> Callable[[], None]:
    """A write guard (:class:`~kubeop.controller.WritePolicy`'s) that runs ``guard`` (None: none)
    and, when it lets the write go, counts it on the running reconcile (``ctx.writes``). Writes
    made outside a reconcile are not counted."""

    def count() -> None:
        if guard is not None:
            guard()
        ctx = current_reconcile()
        if ctx is not None:
            ctx.writes += 1

    return count


@dataclass
class ControllerLoad:
    """A running controller's load, read when sampled: ``depth()`` items waiting, ``busy()``
    workers reconciling, ``adds`` added to its queue since it started, ``workers`` its workers."""

    depth: Callable[[], int]
    busy: Callable[[], int]
    workers: int
    kind: str
    adds: int = 0


class _Adds:
    """The queue's adds counter: counted here, and passed on to the metrics (if any)."""

    __slots__ = ("_load", "_next")

    def __init__(self, load: ControllerLoad, after: CounterMetric) -> None:
        self._load, self._next = load, after

    def inc(self) -> None:
        self._load.adds += 1
        self._next.inc()


class _AddsOnly:
    """The queue's adds counter when there are no metrics: counted here only."""

    __slots__ = ("_load",)

    def __init__(self, load: ControllerLoad) -> None:
        self._load = load

    def inc(self) -> None:
        self._load.adds += 1


class _CountingProvider:
    """A queue metrics provider counting adds for the journal, the rest the metrics' own. Without
    metrics its other metrics are no-ops, so the queue keeps no timing state for it (see
    :meth:`kubeop.queue.metrics.QueueMetrics.create`)."""

    def __init__(self, load: ControllerLoad, metrics: MetricsProvider | None) -> None:
        self._load = load
        self._metrics: MetricsProvider = metrics if metrics is not None else NoopMetricsProvider()
        self._counted_only = metrics is None

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return self._metrics.new_depth_metric(name)

    def new_adds_metric(self, name: str) -> CounterMetric:
        if self._counted_only:
            return _AddsOnly(self._load)
        return _Adds(self._load, self._metrics.new_adds_metric(name))

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return self._metrics.new_latency_metric(name)

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return self._metrics.new_work_duration_metric(name)

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._metrics.new_unfinished_work_seconds_metric(name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self._metrics.new_longest_running_processor_seconds_metric(name)

    def new_retries_metric(self, name: str) -> CounterMetric:
        return self._metrics.new_retries_metric(name)


@dataclass
class ReconcileJournal:
    """The records of finished reconciles (at most ``size`` undrained) and each running
    controller's load, by controller name."""

    size: int = 4096
    records: deque[ReconcileRecord] = field(init=False)
    controllers: dict[str, ControllerLoad] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.size < 1:
            raise ValueError(f"ReconcileJournal(size=...) must be at least 1, not {self.size!r}")
        self.records = deque(maxlen=self.size)

    def register(self, name: str, load: ControllerLoad, metrics: MetricsProvider | None) -> MetricsProvider:
        """Register a running controller's ``load``; the metrics provider its queue should use
        (``metrics``, with its adds counted in ``load``)."""
        self.controllers[name] = load
        return _CountingProvider(load, metrics)
