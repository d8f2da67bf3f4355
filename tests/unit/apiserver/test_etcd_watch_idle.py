"""An EtcdStorage watch asks for etcd's progress notifications, and one whose stream goes silent
(a half-open connection) ends with a 504 the caller sees after ``watch_idle_timeout``, while a
quiet stream that keeps sending progress notifications goes on. Against an in-process stand-in
for etcd's JSON gateway on loopback. Every wait is bounded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web

from kubeop.apiserver import EtcdStorage, StatusError
from kubeop.apiserver.storage import WatchOptions

BOUND = 10.0


class _Gateway:
    """Answers /v3/kv/range (at revision 7) and /v3/watch: ``created``, then (while ``notify``) a
    progress notification every 0.05 s, else nothing, keeping the connection open."""

    def __init__(self) -> None:
        self.notify = False
        self.asked: list[dict[str, Any]] = []

    async def range(self, request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"header": {"revision": "7"}, "count": "0"})

    async def watch(self, request: web.Request) -> web.StreamResponse:
        self.asked.append(await request.json())
        resp = web.StreamResponse()
        await resp.prepare(request)
        header = {"revision": "7"}
        await resp.write(orjson.dumps({"result": {"header": header, "created": True}}) + b"\n")
        async with asyncio.timeout(BOUND):
            while True:
                await asyncio.sleep(0.05)
                if self.notify:
                    await resp.write(orjson.dumps({"result": {"header": header}}) + b"\n")


@pytest.fixture
async def gateway() -> AsyncIterator[tuple[_Gateway, str]]:
    fake = _Gateway()
    app = web.Application()
    app.router.add_post("/v3/kv/range", fake.range)
    app.router.add_post("/v3/watch", fake.watch)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield fake, f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def test_a_silent_watch_stream_ends_with_an_error_the_caller_sees(
    gateway: tuple[_Gateway, str],
) -> None:
    fake, url = gateway
    storage = EtcdStorage(url, watch_idle_timeout=0.3)
    events = storage.watch("/configmaps", WatchOptions(resource_version=5))
    try:
        async with asyncio.timeout(BOUND):
            with pytest.raises(StatusError) as raised:
                async for event in events:
                    raise AssertionError(f"no event was written, got {event}")
    finally:
        await events.aclose()
        await storage.close()
    assert raised.value.code == 504 and "sent nothing for 0 s" in str(raised.value)
    assert fake.asked[0]["create_request"]["progress_notify"] is True


async def test_a_quiet_stream_with_progress_notifications_goes_on(gateway: tuple[_Gateway, str]) -> None:
    fake, url = gateway
    fake.notify = True
    storage = EtcdStorage(url, watch_idle_timeout=0.3)
    options = WatchOptions(resource_version=5, bookmarks=True, bookmark_interval=0.1)
    events = storage.watch("/configmaps", options)
    seen: list[str] = []
    try:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.0):  # over three idle timeouts
                async for event in events:
                    seen.append(event.type)
    finally:
        await events.aclose()
        await storage.close()
    assert seen and set(seen) == {"BOOKMARK"}


def test_the_idle_timeout_is_checked_when_made() -> None:
    with pytest.raises(ValueError, match="watch_idle_timeout must be > 0"):
        EtcdStorage("http://127.0.0.1:2379", watch_idle_timeout=0)
