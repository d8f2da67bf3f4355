"""The webhook series with controller-runtime's names, so its dashboards and alerts work.

- ``controller_runtime_webhook_requests_total{webhook,code}``: requests answered, by HTTP status;
- ``controller_runtime_webhook_requests_in_flight{webhook}``: requests being answered;
- ``controller_runtime_webhook_latency_seconds{webhook}``: the time to answer (Prometheus' default
  buckets, as controller-runtime's histogram has).

``webhook`` is the webhook's path, as in controller-runtime. Requests to a path no webhook serves
are not counted (controller-runtime instruments each registered webhook, not the server).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

__all__ = ["WebhookMetrics"]


class WebhookMetrics:
    """The three series of every webhook of a server, on one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.requests = Counter(
            "controller_runtime_webhook_requests_total",
            "Total number of admission requests by HTTP status code.",
            ["webhook", "code"],
            registry=registry,
        )
        self.in_flight = Gauge(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served.",
            ["webhook"],
            registry=registry,
        )
        self.latency = Histogram(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            ["webhook"],
            registry=registry,
        )

    def started(self, path: str) -> None:
        self.in_flight.labels(path).inc()

    def finished(self, path: str, status: int, seconds: float) -> None:
        self.in_flight.labels(path).dec()
        self.requests.labels(path, str(status)).inc()
        self.latency.labels(path).observe(seconds)

    def declare(self, path: str) -> None:
        """Show a webhook's series before its first request (in flight 0, latency count 0)."""
        self.in_flight.labels(path)
        self.latency.labels(path)
