"""The Demo operator, unit-tested: a real Manager on kubeop.testing.FakeCluster (no Go, no processes).

The example of how to unit-test a reconciler with the fake cluster: start the Manager on
``cluster.client()``, write objects through a client of the same cluster, and wait for what the
reconciler is meant to do. The whole test runs in tens of milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from examples.demo.crd import CRD, sample
from examples.demo.operator import DEMOS, PODS, controller

from kubeop.client import Client
from kubeop.manager import Manager, Serving
from kubeop.testing import FakeCluster

T = TypeVar("T")


async def eventually(probe: Callable[[], Awaitable[T | None]], timeout: float = 5.0) -> T:
    """``probe()``'s first truthy answer, polling the event loop (the fake answers at once)."""
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout} s")
        await asyncio.sleep(0.001)


@contextlib.asynccontextmanager
async def running(cluster: FakeCluster) -> AsyncIterator[Client]:
    manager = Manager(
        cluster.client(),
        clock=cluster.clock,
        name="demo-operator",
        serving=Serving(metrics_address=None, health_address=None),
    )
    manager.add(controller())
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    api = cluster.client()
    try:
        yield api
    finally:
        stop.set()
        await task
        await api.close()


async def test_a_demo_gets_its_pod_back_and_takes_it_along() -> None:
    started = time.perf_counter()
    cluster = FakeCluster()
    cluster.add_crd(CRD)
    async with running(cluster) as api:
        demo = await api.create(sample("web"))

        async def pod() -> dict[str, Any] | None:
            return await api.get_or_none(PODS, "web-pod", namespace="default")

        first = await eventually(pod)
        owner = first["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"]) == ("Demo", "web", demo["metadata"]["uid"])
        assert owner["controller"] is True

        async def status() -> dict[str, Any] | None:
            return (await api.get(DEMOS, "web", namespace="default")).get("status")

        assert (await eventually(status))["pod"] == "web-pod"

        # A deleted Pod comes back (a new one: another uid).
        await api.delete(PODS, "web-pod", namespace="default")

        async def replaced() -> dict[str, Any] | None:
            found = await pod()
            return found if found and found["metadata"]["uid"] != first["metadata"]["uid"] else None

        await eventually(replaced)

        # Deleting the Demo garbage-collects its Pod (the fake does what the collector would).
        await api.delete(DEMOS, "web", namespace="default")
        assert await pod() is None
        events = await api.list("events.events.k8s.io", namespace="default")
        assert any(e["reason"] == "PodCreated" for e in events)
    assert time.perf_counter() - started < 5.0  # ~30 ms when the machine is idle
