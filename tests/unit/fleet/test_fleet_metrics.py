"""A Fleet's metrics on kubeop.testing.FakeClusters: the controller and work-queue series carry
a ``cluster`` label (one series per controller and cluster), served on the fleet's metrics
address; a disengaged cluster's series go with it; a Manager's one cluster keeps
controller-runtime's labels exactly. Every wait is bounded."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from kubeop.controller import Context, Controller, Metrics, Request
from kubeop.fleet import Engagement, Fleet
from kubeop.testing import FakeCluster

from ._support import BOUND, CM, Fakes, create, until


def sample(registry: CollectorRegistry, family: str, /, **labels: str) -> float | None:
    return registry.get_sample_value(family, labels)


def clusters_labelled(registry: CollectorRegistry, family: str) -> set[str]:
    return {
        s.labels["cluster"]
        for metric in registry.collect()
        if metric.name == family
        for s in metric.samples
        if "cluster" in s.labels
    }


async def scrape(port: int) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    await writer.drain()
    async with asyncio.timeout(BOUND):
        body = await reader.read()
    writer.close()
    return body.decode()


async def test_the_fleets_controller_and_queue_series_carry_the_cluster() -> None:
    fakes = {n: FakeCluster() for n in ("east", "west")}
    for name, fake in fakes.items():
        await create(fake, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{name}"}})
    seen: list[str] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        seen.append(req.cluster)

    provider = Fakes(fakes)
    fleet = Fleet(provider, metrics_address="127.0.0.1:0")
    fleet.add(Controller.for_(CM).named("marker").reconcile(reconcile))
    stop = asyncio.Event()
    run = asyncio.create_task(fleet.start(stop))
    r = fleet.metrics.registry
    try:
        for name in fakes:
            await fleet.wait_engaged(name, BOUND)
        await until(lambda: {"east", "west"} <= set(seen))
        for name in fakes:
            key = {"controller": "marker", "cluster": name}
            await until(
                lambda k=key: (
                    (sample(r, "controller_runtime_reconcile_total", result="success", **k) or 0) >= 1
                )
            )
            assert sample(r, "controller_runtime_max_concurrent_reconciles", **key) == 1
            assert sample(r, "controller_runtime_reconcile_errors_total", **key) == 0
            assert (sample(r, "workqueue_adds_total", name="marker", **key) or 0) >= 1
            assert sample(r, "controller_runtime_reconcile_time_seconds_count", **key) is not None
        # Served, labelled, on the fleet's loopback address.
        assert fleet.server is not None
        text = await scrape(fleet.server.port)
        assert (
            'controller_runtime_reconcile_total{cluster="east",controller="marker",result="success"}' in text
        )
        assert 'workqueue_depth{cluster="west",controller="marker",name="marker"}' in text
        # A disengaged cluster's series go with it; the other's stay.
        assert provider.fleet is not None
        await provider.fleet.disengage("west")
        for family in ("controller_runtime_reconcile", "workqueue_adds", "workqueue_depth"):
            assert clusters_labelled(r, family) == {"east"}, family
    finally:
        stop.set()
        await asyncio.wait_for(run, BOUND)


def test_a_managers_metrics_keep_controller_runtimes_labels() -> None:
    m = Metrics()
    series = m.controller("widget")
    series.results["success"].inc()
    m.queue_provider().new_adds_metric("widget").inc()
    assert (
        m.registry.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": "widget", "result": "success"}
        )
        == 1
    )
    assert (
        m.registry.get_sample_value("workqueue_adds_total", {"name": "widget", "controller": "widget"}) == 1
    )
    for metric in m.registry.collect():
        for s in metric.samples:
            assert "cluster" not in s.labels, s


def test_a_per_cluster_series_is_one_per_controller_and_cluster() -> None:
    m = Metrics(per_cluster=True)
    m.controller("widget", "east").results["error"].inc()
    m.controller("widget", "west")
    get = m.registry.get_sample_value
    assert (
        get(
            "controller_runtime_reconcile_total",
            {"controller": "widget", "result": "error", "cluster": "east"},
        )
        == 1
    )
    assert (
        get(
            "controller_runtime_reconcile_total",
            {"controller": "widget", "result": "error", "cluster": "west"},
        )
        == 0
    )
    m.forget_cluster("east")
    m.forget_cluster("east")  # twice: nothing
    assert (
        get(
            "controller_runtime_reconcile_total",
            {"controller": "widget", "result": "error", "cluster": "east"},
        )
        is None
    )


def test_a_fleet_serves_its_metrics_on_loopback_only() -> None:
    class Nothing:
        name = "nothing"

        async def run(self, fleet: Engagement, stop: asyncio.Event) -> None:
            await stop.wait()

    with pytest.raises(ValueError, match="loopback only"):
        Fleet(Nothing(), metrics_address="0.0.0.0:8080")
