"""The sync facade drives the async client on its own loop thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from aiohttp import web

from kubeop.client.config import ClientConfig
from kubeop.client.sync import SyncClient
from kubeop.core.errors import NotFound
from kubeop.core.resource import ApiResource
from kubeop.core.selectors import Selectors

from .fakeapi import FakeApi, json

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")


@pytest.fixture
def server() -> Iterator[FakeApi]:
    """A fake API running on its own loop in a thread, so the test body can be synchronous."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def main() -> None:
        api = FakeApi()
        await api.server.start_server()
        holder["api"] = api
        holder["stop"] = asyncio.Event()
        ready.set()
        await holder["stop"].wait()
        await api.server.close()

    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    ready.wait(10)
    yield holder["api"]
    loop.call_soon_threadsafe(holder["stop"].set)
    thread.join(10)
    loop.close()


def test_sync_client_get_list_watch(server: FakeApi) -> None:
    server.reply("GET", "/api/v1/namespaces/default/configmaps/a", {"metadata": {"name": "a"}})

    async def stream(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            return json({"metadata": {"resourceVersion": "4"}, "items": [{"metadata": {"name": "a"}}]})
        resp = web.StreamResponse()
        await resp.prepare(request)
        for name in ("a", "b"):
            await resp.write(orjson.dumps({"type": "ADDED", "object": {"metadata": {"name": name}}}) + b"\n")
        await resp.write_eof()
        return resp

    server.route("GET", "/api/v1/namespaces/default/configmaps", stream)
    with SyncClient(ClientConfig(server=server.url, qps=None)) as k:
        assert k.get(CM, "a") == {"metadata": {"name": "a"}}
        with pytest.raises(NotFound):
            k.get(CM, "missing")
        assert k.list(CM).resource_version == "4"
        assert [e.object["metadata"]["name"] for e in k.watch(CM)] == ["a", "b"]
        for _ in k.watch(CM):
            break  # closing early must not hang
    with pytest.raises(RuntimeError, match="closed"):
        k.get(CM, "a")


def test_sync_client_passes_selectors_on(server: FakeApi) -> None:
    queries: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        queries.append(request.query_string)
        if request.query.get("watch") != "true":
            return json({"metadata": {"resourceVersion": "4"}, "items": []})
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write_eof()
        return resp

    server.route("GET", "/api/v1/namespaces/default/configmaps", handler)
    with SyncClient(ClientConfig(server=server.url, qps=None)) as k:
        k.list(CM, selectors=Selectors.of({"app": "web"}))
        k.list_all(CM, selectors=Selectors(labels="app=web"), field_selector="metadata.name=a")
        assert list(k.watch(CM, selectors=Selectors(labels="app=web"))) == []
    assert queries[0] == "labelSelector=app%3Dweb"
    assert queries[1].startswith("labelSelector=app%3Dweb&fieldSelector=metadata.name%3Da")
    assert "labelSelector=app%3Dweb" in queries[2] and "watch=true" in queries[2]
