"""``/metrics``' body: a registry in the Prometheus text format, without the ``*_created`` series.

Its own module so that prometheus_client's exposition (and what it imports: ``http.server``,
``urllib.request``, ``email``) loads when ``/metrics`` is first scraped, not when an operator
imports :mod:`kubeop.manager`.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

__all__ = ["CONTENT_TYPE_LATEST", "exposition"]


def exposition(registry: CollectorRegistry) -> bytes:
    """``registry``'s metrics in the text format, without their ``*_created`` samples."""
    return generate_latest(_WithoutCreated(registry))


class _WithoutCreated(Collector):
    """A registry's metrics without their ``*_created`` samples (the registry itself unchanged,
    and no process-wide switch such as prometheus_client's ``disable_created_metrics``)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        for metric in self._registry.collect():
            created = metric.name + "_created"
            if any(s.name == created for s in metric.samples):  # a copy: a collector may keep its own
                copy = Metric(metric.name, metric.documentation, metric.type, metric.unit)
                copy.samples = [s for s in metric.samples if s.name != created]
                metric = copy
            yield metric
