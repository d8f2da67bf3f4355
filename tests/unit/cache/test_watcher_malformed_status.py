"""Hardening #12 (10): the watcher keeps its "never raises" promise against malformed Statuses.

A real Client talks to a loopback server that answers the first watches with every kind of broken
error (ERROR events and error responses whose Status has fields of the wrong type, or is not a
Status at all, and lines that are not watch events); the watcher must log, back off and retry each
one, then sync normally when the server behaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from kubeop.cache import (
    BackoffConfig,
    Init,
    InitApply,
    InitDone,
    ListWatch,
    Watcher,
    WatcherConfig,
    WatcherEvent,
)
from kubeop.client import Client, ClientConfig
from kubeop.core import ApiResource
from kubeop.core.errors import ApiError

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")


def status(**fields: Any) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", **fields}


# What the server answers to the first watches, in order: ("event", <watch line>) streams that
# line with 200, ("error", code, <body>) answers with that error.
SCRIPT: list[tuple[Any, ...]] = [
    ("event", {"type": "ERROR", "object": status(code="410", details={"causes": ["x"]})}),
    ("event", {"type": "ERROR", "object": status(code=504, details={"causes": ["x", 5, None]})}),
    ("error", 429, status(code=429, reason="TooManyRequests", details={"retryAfterSeconds": "soon"})),
    ("error", 429, status(code=429, reason="TooManyRequests", details={"retryAfterSeconds": "1e999"})),
    (
        "event",
        {
            "type": "ERROR",
            "object": status(code=429, reason="TooManyRequests", details={"retryAfterSeconds": "x"}),
        },
    ),
    ("event", {"type": "ERROR", "object": status(details=5, code=[1], reason={"x": 1}, message=["m"])}),
    ("event", {"type": "ERROR", "object": "not a status"}),
    ("event", {"type": "ERROR", "object": None}),
    ("error", 500, status(code="500", details={"causes": "everything"})),
    ("error", 503, ["not", "a", "status"]),
    ("event", {"type": "ADDED", "object": ["not", "an", "object"]}),
    ("event", {"type": 5, "object": {}}),
    ("raw", b"this is not JSON\n"),
]


class Api:
    def __init__(self) -> None:
        self.watches = 0
        self.app = web.Application()
        self.app.router.add_get("/{tail:.*}", self.handle)
        self.server = TestServer(self.app, host="127.0.0.1")

    async def handle(self, request: web.Request) -> web.StreamResponse:
        assert request.query.get("watch") == "true"
        step = SCRIPT[self.watches] if self.watches < len(SCRIPT) else None
        self.watches += 1
        if step is not None and step[0] == "error":
            return web.Response(status=step[1], body=orjson.dumps(step[2]), content_type="application/json")
        resp = web.StreamResponse()
        await resp.prepare(request)
        if step is not None:
            await resp.write(step[1] if step[0] == "raw" else orjson.dumps(step[1]) + b"\n")
            return resp
        obj = {
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {"name": "a", "namespace": "x", "resourceVersion": "5"},
        }
        end = {
            "kind": "ConfigMap",
            "metadata": {"resourceVersion": "5", "annotations": {"k8s.io/initial-events-end": "true"}},
        }
        for event in ({"type": "ADDED", "object": obj}, {"type": "BOOKMARK", "object": end}):
            await resp.write(orjson.dumps(event) + b"\n")
        await asyncio.sleep(30)  # an open, quiet watch
        return resp


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    api = Api()
    await api.server.start_server()
    yield api
    await api.server.close()


async def test_the_watcher_survives_malformed_statuses_and_then_syncs(
    api: Api, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "kubeop.cache")
    config = ClientConfig(server=str(api.server.make_url("")).rstrip("/"), qps=None, max_retries=0)
    async with Client(config) as client:
        watcher = Watcher(
            ListWatch(client, CM, namespace="x"),
            WatcherConfig(
                streaming_list=True,
                stall_timeout=0,
                backoff=BackoffConfig(initial=0.001, cap=0.005, jitter=0.0),
                server_probe=False,
            ),
        )
        events: list[WatcherEvent] = []

        async def run() -> None:
            async for event in watcher:
                events.append(event)
                if isinstance(event, InitDone):
                    return

        task = asyncio.create_task(run())
        try:
            await asyncio.wait_for(asyncio.shield(task), 20)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    assert [type(e) for e in events] == [Init, InitApply, InitDone]
    assert api.watches == len(SCRIPT) + 1
    assert watcher.stats.errors == len(SCRIPT)
    assert isinstance(watcher.last_error, ApiError)
    # Each failure was the documented ApiError: logged as expected (no ERROR with a traceback).
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert "TypeError" not in caplog.text and "AttributeError" not in caplog.text
