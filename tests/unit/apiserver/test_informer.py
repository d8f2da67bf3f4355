"""A kubeop client and informer against the APIServer on loopback (a bearer token, reviewed by
TokenReview): typed get/create, a streaming initial list (sendInitialEvents, ending at the
initial-events-end bookmark) and the watch that follows."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from kubeop.cache import FuncHandler, SharedInformerFactory
from kubeop.client import Client, ClientConfig
from kubeop.crd.resource import ObjectMeta
from tests.unit.apiserver.conftest import Env, Widget, WidgetSpec
from tests.unit.apiserver.test_http import NS


def _client(env: Env, tmp_ca: str) -> Client:
    return Client(ClientConfig(server=env.base, ca_file=tmp_ca, token="alice-token"))


async def test_streaming_list_ends_with_the_initial_events_end_bookmark(env: Env) -> None:
    async with env.as_user("alice") as s:
        await s.post(env.base + NS, json={"metadata": {"name": "a"}, "spec": {}})
        params = {"watch": "true", "sendInitialEvents": "true", "allowWatchBookmarks": "true"}
        async with s.get(env.base + NS, params={**params, "resourceVersionMatch": "NotOlderThan"}) as resp:
            events: list[dict[str, Any]] = []
            async with asyncio.timeout(5):
                while len(events) < 2:
                    events.append(orjson.loads(await resp.content.readline()))
        assert [e["type"] for e in events] == ["ADDED", "BOOKMARK"]
        assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        async with s.get(env.base + NS, params=params) as refused:
            assert refused.status == 422


async def test_a_kubeop_informer_syncs_and_follows(env: Env, serving_ca: str) -> None:
    seen: asyncio.Queue[str] = asyncio.Queue()
    async with _client(env, serving_ca) as client:
        await client.create(Widget(metadata=ObjectMeta(name="first", namespace="default"), spec=WidgetSpec()))
        async with SharedInformerFactory(client) as factory:
            informer = factory.informer(Widget, namespace="default")
            informer.add_event_handler(
                FuncHandler(on_add=lambda obj, _initial: seen.put_nowait(obj["metadata"]["name"]))
            )
            factory.start()
            assert await factory.wait_for_cache_sync(timeout=10)
            await client.create(
                Widget(metadata=ObjectMeta(name="second", namespace="default"), spec=WidgetSpec())
            )
            async with asyncio.timeout(10):
                names = [await seen.get(), await seen.get()]
        assert names == ["first", "second"]
        got = await client.get(Widget, "second", namespace="default")
        assert got.spec.size == 1 and got.metadata.generation == 1
