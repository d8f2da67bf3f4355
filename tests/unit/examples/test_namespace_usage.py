"""The NamespaceUsage storage on a FakeCluster: objects computed from the caches, a watch that
follows them, resumption and 410, writes refused."""

from __future__ import annotations

import asyncio

import pytest
from examples.namespace_usage.usage import UsageStorage

from kubeop.apiserver import ListOptions, StatusError, StorageEvent, WatchOptions
from kubeop.testing import FakeCluster

RESOURCE = "usage.kubeop.dev/namespaceusages"


def configmap(name: str, namespace: str = "default") -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}}


async def test_usage_is_computed_and_watched() -> None:
    cluster = FakeCluster()
    client = cluster.client()
    await client.create(configmap("a"))
    storage = UsageStorage(client, history=3)
    await storage.start(timeout=10)
    try:
        got = await storage.get(RESOURCE, "", "default")
        assert got["usage"] == {"configMaps": 1, "secrets": 0, "pods": 0}
        page = await storage.list(RESOURCE, ListOptions())
        assert "default" in [o["metadata"]["name"] for o in page.items]
        events = storage.watch(RESOURCE, WatchOptions(resource_version=page.resource_version))
        await client.create(configmap("b"))
        async with asyncio.timeout(10):
            event: StorageEvent = await anext(events)
        assert event.type == "MODIFIED" and event.object["usage"]["configMaps"] == 2
        assert event.resource_version > page.resource_version
        await events.aclose()
        replay = storage.watch(RESOURCE, WatchOptions(resource_version=page.resource_version))
        async with asyncio.timeout(10):
            again = await anext(replay)
        assert again.object["usage"]["configMaps"] == 2  # resumed from the history
        await replay.aclose()
        for name in ("c", "d", "e"):
            await client.create(configmap(name))
        async with asyncio.timeout(10):
            while True:
                if (await storage.get(RESOURCE, "", "default"))["usage"]["configMaps"] == 5:
                    break
                await asyncio.sleep(0.01)
        with pytest.raises(StatusError) as gone:
            await anext(storage.watch(RESOURCE, WatchOptions(resource_version=page.resource_version)))
        assert gone.value.code == 410
        with pytest.raises(StatusError) as refused:
            await storage.delete(RESOURCE, "", "default")
        assert refused.value.code == 405
        with pytest.raises(StatusError) as missing:
            await storage.get(RESOURCE, "", "nowhere")
        assert missing.value.code == 404
    finally:
        await storage.close()
        await client.close()
