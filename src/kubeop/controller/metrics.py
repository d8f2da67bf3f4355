"""Prometheus metrics with controller-runtime's names, so existing dashboards work.

One :class:`Metrics` per manager, on its own registry (no global state). Series objects are
resolved once per controller, so the per-reconcile cost is a few increments. The registry also
holds the process's ``process_*`` series (CPU seconds, resident and virtual memory, open and
maximum file descriptors, start time; read from ``/proc`` at scrape time, on Linux), which
controller-runtime's Go collector exports and kubebuilder's dashboards query.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

from kubeop.queue import MetricsProvider
from kubeop.queue.metrics import CounterMetric, GaugeMetric, HistogramMetric, SettableGaugeMetric

if TYPE_CHECKING:
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
    """All series a manager exports."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        ProcessCollector(registry=r)  # process_*: nothing on a system without /proc
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=r,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=r,
        )
        self.terminal_errors = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Total number of terminal reconciliation errors per controller",
            ["controller"],
            registry=r,
        )
        self.reconcile_panics = Counter(
            "controller_runtime_reconcile_panics_total",
            "Total number of reconciliation panics (unexpected exceptions) per controller",
            ["controller"],
            registry=r,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=_RECONCILE_BUCKETS,
            registry=r,
        )
        self.max_concurrent = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller"],
            registry=r,
        )
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"],
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
        self.queue = _QueueMetrics(r)
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

    def controller(self, name: str) -> ControllerSeries:
        """The series of one controller, labelled with its name."""
        return ControllerSeries(self, name)


class ControllerSeries:
    """The series of one controller, resolved once."""

    __slots__ = ("active", "errors", "max_concurrent", "panics", "results", "terminal", "time")

    def __init__(self, m: Metrics, name: str) -> None:
        self.results = {res: m.reconcile_total.labels(name, res) for res in RESULTS}
        self.errors = m.reconcile_errors.labels(name)
        self.terminal = m.terminal_errors.labels(name)
        self.panics = m.reconcile_panics.labels(name)
        self.time = m.reconcile_time.labels(name)
        self.active = m.active_workers.labels(name)
        self.max_concurrent = m.max_concurrent.labels(name)
        for counter in (*self.results.values(), self.errors, self.terminal, self.panics):
            counter.inc(0)


class _QueueMetrics(MetricsProvider):
    """The work-queue hooks mapped onto client-go's workqueue_* series (label ``name``, and
    ``controller`` as controller-runtime adds)."""

    def __init__(self, r: CollectorRegistry) -> None:
        labels = ["name", "controller"]
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
