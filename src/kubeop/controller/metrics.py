"""Prometheus metrics with controller-runtime's names, so existing dashboards work.

One :class:`Metrics` per manager, on its own registry (no global state). Series objects are
resolved once per controller, so the per-reconcile cost is a few increments. The registry also
holds the process's ``process_*`` series (CPU seconds, resident and virtual memory, open and
maximum file descriptors, start time; read from ``/proc`` at scrape time, on Linux), which
controller-runtime's Go collector exports and kubebuilder's dashboards query.

A :class:`~kubeop.fleet.Fleet` makes its ``Metrics(per_cluster=True)``: the controller and
work-queue series then carry a ``cluster`` label too (one series per controller and cluster),
as multicluster-runtime's do; a Manager's one cluster keeps controller-runtime's labels exactly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kubeop.queue import MetricsProvider
from kubeop.queue.metrics import CounterMetric, GaugeMetric, HistogramMetric, SettableGaugeMetric

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubeop.controller.client import ReconcilerClient
    from kubeop.controller.events import EventRecorder

__all__ = ["ControllerSeries", "Metrics"]

_RECONCILE_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.35,
    0.4,
    0.45,
    0.5,
    0.6,
    0.7,
    0.8,
    0.9,
    1.0,
    1.25,
    1.5,
    1.75,
    2.0,
    2.5,
    3.0,
    3.5,
    4.0,
    4.5,
    5,
    6,
    7,
    8,
    9,
    10,
    15,
    20,
    25,
    30,
    40,
    50,
    60,
)
_QUEUE_BUCKETS = tuple(10.0**e for e in range(-8, 4))
RESULTS = ("success", "error", "requeue", "requeue_after")


class Metrics:
    """All series a manager exports.

    Args:
        registry: where the series are registered (default: a registry of their own).
        per_cluster: label the controller and work-queue series with ``cluster`` too (a fleet's).
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, per_cluster: bool = False) -> None:
        # Here, not at import: a manager that serves no metrics never loads prometheus_client.
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

        self.registry = registry or CollectorRegistry()
        self.per_cluster = per_cluster
        r = self.registry
        by = ["cluster"] if per_cluster else []
        # What was labelled for each cluster, so a cluster that leaves takes its series along.
        self._by_cluster: dict[str, set[tuple[Any, tuple[str, ...]]]] = {}
        ProcessCollector(registry=r)  # process_*: nothing on a system without /proc
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "result", *by],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ["controller", *by],
            registry=r,
        )
        self.terminal_errors = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Total number of terminal reconciliation errors per controller",
            ["controller", *by],
            registry=r,
        )
        self.reconcile_panics = Counter(
            "controller_runtime_reconcile_panics_total",
            "Total number of reconciliation panics (unexpected exceptions) per controller",
            ["controller", *by],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller", *by],
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.max_concurrent = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller", *by],
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller", *by],
            registry=r,
        )
        self.leader = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, "
            "1 indicates master. 'name' is the string used to identify the lease.",
            ["name"],
            registry=r,
        )
        self.rest_requests = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=r,
        )
        self.rest_latency = Histogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            ["verb", "host"],
            registry=r,
        )
        self.queue = _QueueMetrics(r, per_cluster=per_cluster)
        self.remembered_writes = Gauge(
            "kubeop_reconciler_client_remembered_writes",
            "Write results the reconciler client keeps until its cache has them (read-your-writes)",
            registry=r,
        )
        self.event_recorder = Gauge(
            "kubeop_event_recorder_tracked",
            "Event recorder bookkeeping: series it may still aggregate into (series), objects with "
            "an event budget (budgets), event writes in flight (pending)",
            ["kind"],
            registry=r,
        )

    def observe_bookkeeping(self, client: ReconcilerClient, recorder: EventRecorder) -> None:
        """Export the sizes of the client's and the recorder's bookkeeping, read at scrape time
        (so a leak shows on /metrics before it shows in the process's memory)."""
        self.remembered_writes.set_function(lambda: client.remembered_writes)

        def size(kind: str) -> Callable[[], float]:
            return lambda: recorder.tracked[kind]

        for kind in ("series", "budgets", "pending"):
            self.event_recorder.labels(kind).set_function(size(kind))

    def controller(self, name: str, cluster: str = "") -> ControllerSeries:
        """The series of one controller, labelled with its name (and, per cluster, ``cluster``)."""
        return ControllerSeries(self, name, cluster)

    def queue_provider(self, cluster: str = "") -> MetricsProvider:
        """The work-queue series' provider for a controller's queue (of ``cluster``, per cluster)."""
        if not self.per_cluster:
            return self.queue
        return _ClusterQueueMetrics(self, cluster)

    def forget_cluster(self, cluster: str) -> None:
        """Drop every series labelled with ``cluster`` (a fleet's cluster that was disengaged)."""
        for metric, labels in self._by_cluster.pop(cluster, set()):
            with contextlib.suppress(KeyError):  # removed already
                metric.remove(*labels)

    def _labels(self, metric: Any, cluster: str, *values: str) -> Any:
        """``metric.labels(*values)``, with ``cluster`` when per cluster (remembered for
        :meth:`forget_cluster`)."""
        if not self.per_cluster:
            return metric.labels(*values)
        labels = (*values, cluster)
        self._by_cluster.setdefault(cluster, set()).add((metric, labels))
        return metric.labels(*labels)


class ControllerSeries:
    """The series of one controller, resolved once."""

    __slots__ = ("active", "errors", "max_concurrent", "panics", "results", "terminal", "time")

    def __init__(self, m: Metrics, name: str, cluster: str = "") -> None:
        self.results = {res: m._labels(m.reconcile_total, cluster, name, res) for res in RESULTS}
        self.errors = m._labels(m.reconcile_errors, cluster, name)
        self.terminal = m._labels(m.terminal_errors, cluster, name)
        self.panics = m._labels(m.reconcile_panics, cluster, name)
        self.time = m._labels(m.reconcile_time, cluster, name)
        self.active = m._labels(m.active_workers, cluster, name)
        self.max_concurrent = m._labels(m.max_concurrent, cluster, name)
        for counter in (*self.results.values(), self.errors, self.terminal, self.panics):
            counter.inc(0)


class _QueueMetrics(MetricsProvider):
    """The work-queue hooks mapped onto client-go's workqueue_* series (label ``name``, and
    ``controller`` as controller-runtime adds)."""

    def __init__(self, r: CollectorRegistry, *, per_cluster: bool = False) -> None:
        from prometheus_client import Counter, Gauge, Histogram

        labels = ["name", "controller", *(["cluster"] if per_cluster else [])]
        self.depth = Gauge("workqueue_depth", "Current depth of workqueue", labels, registry=r)
        self.adds = Counter(
            "workqueue_adds_total", "Total number of adds handled by workqueue", labels, registry=r
        )
        self.latency = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            labels,
            buckets=_QUEUE_BUCKETS,
            registry=r,
        )
        self.work = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            labels,
            buckets=_QUEUE_BUCKETS,
            registry=r,
        )
        self.unfinished = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by "
            "work_duration.",
            labels,
            registry=r,
        )
        self.longest = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            labels,
            registry=r,
        )
        self.retries = Counter(
            "workqueue_retries_total", "Total number of retries handled by workqueue", labels, registry=r
        )

    def new_depth_metric(self, name: str) -> GaugeMetric:
        return self.depth.labels(name, name)

    def new_adds_metric(self, name: str) -> CounterMetric:
        return self.adds.labels(name, name)

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return self.latency.labels(name, name)

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return self.work.labels(name, name)

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self.unfinished.labels(name, name)

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self.longest.labels(name, name)

    def new_retries_metric(self, name: str) -> CounterMetric:
        return self.retries.labels(name, name)


class _ClusterQueueMetrics(MetricsProvider):
    """The work-queue series of one cluster's queues (a fleet's): ``cluster`` labelled too."""

    def __init__(self, m: Metrics, cluster: str) -> None:
        self._m = m
        self._q = m.queue
        self._cluster = cluster

    def new_depth_metric(self, name: str) -> GaugeMetric:
        series: GaugeMetric = self._m._labels(self._q.depth, self._cluster, name, name)
        return series

    def new_adds_metric(self, name: str) -> CounterMetric:
        series: CounterMetric = self._m._labels(self._q.adds, self._cluster, name, name)
        return series

    def new_latency_metric(self, name: str) -> HistogramMetric:
        series: HistogramMetric = self._m._labels(self._q.latency, self._cluster, name, name)
        return series

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        series: HistogramMetric = self._m._labels(self._q.work, self._cluster, name, name)
        return series

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        series: SettableGaugeMetric = self._m._labels(self._q.unfinished, self._cluster, name, name)
        return series

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        series: SettableGaugeMetric = self._m._labels(self._q.longest, self._cluster, name, name)
        return series

    def new_retries_metric(self, name: str) -> CounterMetric:
        series: CounterMetric = self._m._labels(self._q.retries, self._cluster, name, name)
        return series
