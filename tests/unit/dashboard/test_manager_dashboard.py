"""The dashboard on a Manager (FakeCluster): off by default with nothing installed; on, its pages
show the controllers, a failing object until it is fixed, an object's reconciles and what it owns;
the event stream is live; exposed, a request without a token is refused."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import orjson
import pytest

from kubeop.controller import Context, Controller, Request, set_controller_reference
from kubeop.manager import Dashboard, Manager, Serving
from kubeop.manager._runnables import dashboard_runnable
from kubeop.testing import FakeCluster

_NO_PORTS = Serving(metrics_address=None, health_address=None)


async def _get(port: int, path: str, *, tls: bool = False, limit: int = -1) -> tuple[int, bytes]:
    context = None
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        data = await (reader.read() if limit < 0 else reader.read(limit))
    finally:
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


async def _eventually(check: Callable[[], Awaitable[Any]], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {what} within {timeout} s; last: {last!r}")


@contextlib.asynccontextmanager
async def _running(manager: Manager) -> AsyncIterator[Manager]:
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    try:
        await _eventually(lambda: _ready(manager, task), 15, "dashboard")
        yield manager
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


async def _ready(manager: Manager, task: asyncio.Future[None]) -> bool:
    if task.done():
        task.result()
    return manager.dashboard_server is not None and manager._synced


def _operator(fake: FakeCluster, broken: set[str]) -> Manager:
    async def reconcile(req: Request, ctx: Context) -> None:
        ctx.log.info("reconciling %s", req.name)
        if req.name in broken:
            raise RuntimeError(f"widget {req.name} is broken")
        if req.name.endswith("-child"):
            return
        parent = await ctx.client.get("configmaps", req.name, namespace=req.namespace)
        child = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{req.name}-child", "namespace": req.namespace},
        }
        set_controller_reference(parent, child)
        if await ctx.client.get("configmaps", f"{req.name}-child", namespace=req.namespace) is None:
            await ctx.client.create(child)

    manager = Manager(
        fake.client(), serving=_NO_PORTS, dashboard=Dashboard(address="127.0.0.1:0", refresh=0.1)
    )
    manager.add(Controller.for_("configmaps").named("widgets").reconcile(reconcile))
    return manager


async def _create(fake: FakeCluster, name: str) -> None:
    async with fake.client() as client:
        await client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
        )


async def test_off_by_default_and_nothing_installed() -> None:
    handlers = list(logging.getLogger().handlers)
    manager = Manager(FakeCluster().client(), serving=_NO_PORTS)
    manager.add(Controller.for_("configmaps").reconcile(lambda req, ctx: None))
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    await _eventually(lambda: _ready_plain(manager, task), 15, "start")
    assert manager.dashboard is None and manager.dashboard_server is None
    assert logging.getLogger().handlers == handlers
    stop.set()
    await asyncio.wait_for(task, 15)


async def _ready_plain(manager: Manager, task: asyncio.Future[None]) -> bool:
    if task.done():
        task.result()
    return manager._synced


@pytest.fixture
def kubeop_info() -> Iterator[None]:
    """kubeop's loggers at INFO for one test (the reconcile's log lines are kept), restored after."""
    logger = logging.getLogger("kubeop")
    level = logger.level
    logger.setLevel(logging.INFO)
    yield
    logger.setLevel(level)


@pytest.mark.usefixtures("kubeop_info")
async def test_pages_show_controllers_failures_and_an_objects_reconciles_and_children() -> None:
    fake = FakeCluster()
    broken = {"b"}
    await _create(fake, "a")
    await _create(fake, "b")
    async with _running(_operator(fake, broken)) as manager:
        server = manager.dashboard_server
        assert server is not None and server.host == "127.0.0.1"
        port = server.port
        status, body = await _get(port, "/")
        assert status == 200 and b"<title>kubeop dashboard</title>" in body
        overview = orjson.loads((await _get(port, "/api/overview"))[1])
        assert [c["name"] for c in overview["controllers"]] == ["widgets"]
        assert overview["replica"]["mode"] == "single replica"

        async def failing() -> list[str]:
            groups = orjson.loads((await _get(port, "/api/errors"))[1])["groups"]
            return [o["name"] for g in groups for o in g["objects"] if "widget b is broken" in g["error"]]

        assert await _eventually(failing, 5, "failing widget") == ["b"]
        broken.clear()
        async with fake.client() as client:  # a change makes the controller try again now
            await client.patch("configmaps", "b", {"data": {"fixed": "yes"}}, namespace="default")
        await _eventually(lambda: _not(failing), 10, "the fixed widget gone from the errors")

        async def owned() -> dict[str, Any] | None:
            page = orjson.loads((await _get(port, "/api/object?kind=ConfigMap&namespace=default&name=a"))[1])
            return page if page["owned"] and page["reconciles"] else None

        page = await _eventually(owned, 5, "the object page with its child")
        assert page["found"] is True
        assert [(o["kind"], o["name"]) for o in page["owned"]] == [("ConfigMap", "a-child")]
        assert page["reconciles"][0]["outcome"] == "success"
        assert any("reconciling a" in line["message"] for r in page["reconciles"] for line in r["logs"])


async def _chunk(reader: asyncio.StreamReader) -> bytes:
    """One chunk of a chunked answer (the stream sends each event as one)."""
    size = int((await reader.readuntil(b"\r\n")).strip(), 16)
    data = await reader.readexactly(size + 2)
    return data[:-2]


async def _not(check: Callable[[], Awaitable[Any]]) -> bool:
    return not await check()


async def test_the_event_stream_is_live_and_ends_with_the_manager() -> None:
    fake = FakeCluster()
    await _create(fake, "a")
    manager = _operator(fake, set())
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    await _eventually(lambda: _ready(manager, task), 15, "dashboard")
    assert manager.dashboard_server is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", manager.dashboard_server.port)
    writer.write(b"GET /events/overview HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    await writer.drain()
    async with asyncio.timeout(5):
        head = await reader.readuntil(b"\r\n\r\n")
        first = await _chunk(reader)
        snapshot = await _chunk(reader)
    assert head.startswith(b"HTTP/1.1 200 ") and b"Content-Type: text/event-stream" in head
    assert b"Content-Length" not in head and b"Transfer-Encoding: chunked" in head
    assert first == b"retry: 2000\n\n"
    assert snapshot.startswith(b"event: snapshot\ndata: {")
    await _create(fake, "b")  # a change: another snapshot comes without asking
    async with asyncio.timeout(5):
        assert (await _chunk(reader)).startswith(b"event: snapshot")
    started = time.monotonic()
    stop.set()
    await asyncio.wait_for(task, 10)
    assert time.monotonic() - started < 5, "an open event stream held the shutdown"
    async with asyncio.timeout(5):
        await reader.read()  # the server closed it
    writer.close()


async def test_a_head_of_the_event_stream_is_its_head_only() -> None:
    fake = FakeCluster()
    async with _running(_operator(fake, set())) as manager:
        assert manager.dashboard_server is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", manager.dashboard_server.port)
        writer.write(b"HEAD /events/errors HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await writer.drain()
        async with asyncio.timeout(5):
            answer = await reader.readuntil(b"\r\n\r\n")
        writer.close()
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert b"text/event-stream" in answer and b"retry:" not in answer


def test_exposed_is_secure_by_default_and_loopback_is_not() -> None:
    assert dashboard_runnable(Manager(dashboard=Dashboard(address="0.0.0.0:8090")))._secure is True
    assert dashboard_runnable(Manager(dashboard=Dashboard(address="[::1]:8090")))._secure is False
    assert dashboard_runnable(Manager(dashboard=True))._secure is False
    assert Manager(dashboard=True).dashboard == Dashboard()


def test_bad_options_are_refused() -> None:
    with pytest.raises(ValueError, match="refresh"):
        Dashboard(refresh=0)
    with pytest.raises(ValueError, match="objects"):
        Dashboard(objects=0)


async def test_exposed_a_request_without_a_token_is_refused() -> None:
    fake = FakeCluster()
    manager = Manager(
        fake.client(), serving=_NO_PORTS, dashboard=Dashboard(address="127.0.0.1:0", secure=True)
    )
    async with _running(manager):
        assert manager.dashboard_server is not None
        port = manager.dashboard_server.port
        for path in ("/", "/api/overview", "/events/errors", "/static/app.js"):
            status, body = await asyncio.wait_for(_get(port, path, tls=True), 10)
            assert status == 401, (path, body)
            assert b"controllers" not in body
