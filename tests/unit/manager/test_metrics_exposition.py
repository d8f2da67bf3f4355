"""What a running Manager's /metrics shows: controller-runtime's series (reconciles, work queues,
webhooks), the process's ``process_*`` series, and no ``*_created`` series (Go's client has
none). Scraped over HTTP from a Manager on kubeop.testing.FakeCluster."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kubeop.controller import Context, Controller, Request
from kubeop.core.resource import ApiResource
from kubeop.manager import Manager, Serving
from kubeop.testing import FakeCluster
from kubeop.webhook import Webhooks, validating

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
BOUND = 10.0
PROCESS = (
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
)


@validating(CM)
def anything(new: dict[str, object]) -> None:
    return None


async def _until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(BOUND):
        while not check():  # noqa: ASYNC110 - polled state has no event
            await asyncio.sleep(0.005)


async def _get(port: int, path: str) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        raw = await asyncio.wait_for(reader.read(), BOUND)
    finally:
        writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    return body.decode()


@pytest.fixture
async def scrape() -> AsyncIterator[Callable[[], Awaitable[str]]]:
    """A started Manager with one controller and one webhook; yields a function scraping /metrics."""
    fake = FakeCluster()
    reconciled: list[str] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        reconciled.append(req.name)

    manager = Manager(
        fake.client(),
        name="scraped",
        serving=Serving(metrics_address="127.0.0.1:0", health_address=None),
        webhooks=Webhooks([anything]),
    )
    manager.add(Controller.for_(CM).named("configmaps").reconcile(reconcile))
    await fake.client().create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}
    )
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    try:
        await _until(lambda: "a" in reconciled and bool(manager.servers))
        port = manager.servers[0].port
        assert manager.webhooks is not None
        await manager.webhooks.handle(anything.path, b"{}")  # a bad review: a 400, counted

        async def text() -> str:
            return await _get(port, "/metrics")

        yield text
    finally:
        stop.set()
        await asyncio.wait_for(task, BOUND)


async def test_controller_runtimes_series_and_no_created_ones(scrape: Callable[[], Awaitable[str]]) -> None:
    text = await scrape()
    samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    names = {s.name for s in samples}
    assert "controller_runtime_reconcile_total" in names
    assert "workqueue_adds_total" in names
    assert "controller_runtime_webhook_requests_total" in names
    assert "controller_runtime_webhook_requests_in_flight" in names
    assert "controller_runtime_webhook_latency_seconds_bucket" in names
    counted = [s for s in samples if s.name == "controller_runtime_webhook_requests_total"]
    assert [(s.labels, s.value) for s in counted] == [({"webhook": anything.path, "code": "400"}, 1.0)]
    assert not [n for n in names if n.endswith("_created")]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process_* are read from /proc")
async def test_the_process_series(scrape: Callable[[], Awaitable[str]]) -> None:
    text = await scrape()
    values = {s.name: s.value for family in text_string_to_metric_families(text) for s in family.samples}
    for name in PROCESS:
        assert name in values, name
    assert values["process_resident_memory_bytes"] > 1e6
    assert values["process_open_fds"] >= 3 and values["process_max_fds"] >= values["process_open_fds"]
