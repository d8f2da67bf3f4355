"""Pagination, watch events and bookmarks, 410 on a too-old resourceVersion, streaming lists."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubeop.client import Client, WatchEvent
from kubeop.core import ApiResource, Gone, meta

pytestmark = pytest.mark.controlplane

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")


def configmap(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": {"v": "0"},
    }


async def test_pagination_returns_every_object_once(client: Client) -> None:
    names = {f"cm-{i:02d}" for i in range(23)}
    await asyncio.gather(*(client.create(configmap(n, page="yes")) for n in names))
    pages = [p async for p in client.pages(CM, page_size=5, label_selector="page=yes")]
    assert [len(p) for p in pages] == [5, 5, 5, 5, 3]
    seen = [meta.name(i) for p in pages for i in p.items]
    assert sorted(seen) == sorted(names) and len(seen) == len(set(seen))
    # Every page is served from the first page's snapshot.
    assert len({p.resource_version for p in pages}) == 1
    joined = await client.list_all(CM, page_size=4, label_selector="page=yes")
    assert len(joined) == 23 and joined.resource_version


async def test_watch_added_modified_deleted_and_bookmarks(client: Client) -> None:
    start = await client.list(CM)
    events: list[WatchEvent[Any]] = []

    async def consume() -> None:
        async for event in client.watch(CM, resource_version=start.resource_version, timeout_seconds=30):
            if event.type != "BOOKMARK" and meta.name(event.object) != "w":
                continue  # the controller manager publishes kube-root-ca.crt into new namespaces
            events.append(event)
            if event.type == "DELETED":
                return

    task = asyncio.create_task(consume())
    await client.create(configmap("w"))
    await client.patch(CM, "w", {"data": {"v": "1"}})
    await client.delete(CM, "w")
    await asyncio.wait_for(task, 30)
    kinds = [e.type for e in events if e.type != "BOOKMARK"]
    assert kinds == ["ADDED", "MODIFIED", "DELETED"]
    assert events[-1].object["metadata"]["name"] == "w"
    assert int(events[-1].resource_version) > int(start.resource_version)


async def test_watch_sends_bookmarks(client: Client) -> None:
    # A streaming list always ends the initial state with a bookmark; the server also sends
    # periodic bookmarks, but only about once a minute.
    await client.create(configmap("b1"))
    seen: list[WatchEvent[Any]] = []
    async for event in client.watch(
        CM, send_initial_events=True, field_selector="metadata.name=b1", timeout_seconds=30
    ):
        seen.append(event)
        if event.type == "BOOKMARK":
            break
    assert [e.type for e in seen] == ["ADDED", "BOOKMARK"]
    assert seen[-1].is_initial_events_end and seen[-1].resource_version


async def test_too_old_resource_version_raises_gone(client: Client, widget_crd: str) -> None:
    # The watch cache of a custom resource starts at the version its CRD was established at, so
    # any older version is outside the window the server can replay: 410 Expired.
    widgets = await client.resource("widgets.e2e.kubeop.dev")
    current = await client.list(widgets)
    with pytest.raises(Gone, match="too old resource version") as info:
        async for _ in client.watch(widgets, resource_version="1", timeout_seconds=10):
            pass
    assert info.value.code == 410 and int(current.resource_version) > 1


async def test_watch_by_name_and_selector(client: Client) -> None:
    start = await client.list(CM)
    got: list[str] = []

    async def consume() -> None:
        async for event in client.watch(
            CM,
            name="target",
            resource_version=start.resource_version,
            timeout_seconds=20,
            allow_bookmarks=False,
        ):
            got.append(f"{event.type}:{meta.name(event.object)}")
            if event.type == "MODIFIED":
                return

    task = asyncio.create_task(consume())
    await client.create(configmap("other"))
    await client.create(configmap("target"))
    await client.patch(CM, "target", {"data": {"v": "9"}})
    await asyncio.wait_for(task, 20)
    assert got == ["ADDED:target", "MODIFIED:target"]


async def test_watch_all_namespaces(client: Client, namespace: str) -> None:
    start = await client.list(CM, all_namespaces=True)
    assert (
        any(meta.namespace(i) == "kube-system" or meta.namespace(i) == "default" for i in start.items)
        or start.items
    )

    async def first_in_ns() -> WatchEvent[Any]:
        async for event in client.watch(
            CM, all_namespaces=True, resource_version=start.resource_version, label_selector="probe=yes"
        ):
            return event
        raise AssertionError("watch ended")

    task = asyncio.create_task(first_in_ns())
    await client.create(configmap("probe", probe="yes"))
    event = await asyncio.wait_for(task, 20)
    assert (event.type, meta.namespace(event.object)) == ("ADDED", namespace)
