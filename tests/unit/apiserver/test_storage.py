"""MemoryStorage and SQLiteStorage (one suite): versions, optimistic concurrency, selectors,
paging from one snapshot, watch replay, selector transitions, bookmarks and 410 once the history
no longer covers a version."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubeop.apiserver import ListOptions, ListPage, MemoryStorage, StatusError, StorageEvent, WatchOptions
from kubeop.apiserver.sqlite import SQLiteStorage
from kubeop.core.selectors import FieldSelector, LabelSelector

R = "example.com/widgets"
Make = Callable[..., MemoryStorage]


@pytest.fixture(params=["memory", "sqlite"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Make]:
    made: list[MemoryStorage] = []

    def build(**options: Any) -> MemoryStorage:
        storage = (
            MemoryStorage(**options)
            if request.param == "memory"
            else SQLiteStorage(tmp_path / "db", **options)
        )
        made.append(storage)
        return storage

    yield build
    for storage in made:
        if isinstance(storage, SQLiteStorage):
            storage._db.close()


def obj(name: str, ns: str = "default", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": {"size": 1}}


async def take(it: Any, n: int, timeout: float = 2.0) -> list[StorageEvent]:
    out: list[StorageEvent] = []
    async with asyncio.timeout(timeout):
        while len(out) < n:
            out.append(await anext(it))
    return out


async def test_versions_increase_and_conflicts_are_409(make: Make) -> None:
    s = make()
    a = await s.create(R, "default", "a", obj("a"))
    b = await s.create(R, "default", "b", obj("b"))
    assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
    with pytest.raises(StatusError) as exists:
        await s.create(R, "default", "a", obj("a"))
    assert (exists.value.code, exists.value.reason) == (409, "AlreadyExists")
    rv = int(a["metadata"]["resourceVersion"])
    a["spec"]["size"] = 2
    a2 = await s.update(R, "default", "a", a, resource_version=rv)
    with pytest.raises(StatusError) as stale:
        await s.update(R, "default", "a", a, resource_version=rv)
    assert (stale.value.code, stale.value.reason) == (409, "Conflict")
    with pytest.raises(StatusError) as gone:
        await s.delete(R, "default", "a", uid="other")
    assert gone.value.code == 409
    await s.delete(R, "default", "a", resource_version=int(a2["metadata"]["resourceVersion"]))
    with pytest.raises(StatusError) as missing:
        await s.get(R, "default", "a")
    assert (missing.value.code, missing.value.reason) == (404, "NotFound")


async def test_returned_objects_are_copies(make: Make) -> None:
    s = make()
    created = await s.create(R, "default", "a", obj("a"))
    created["spec"]["size"] = 99
    assert (await s.get(R, "default", "a"))["spec"]["size"] == 1


def names(page: ListPage) -> list[str]:
    return [i["metadata"]["name"] for i in page.items]


async def test_list_filters_by_namespace_and_selectors(make: Make) -> None:
    s = make()
    await s.create(R, "one", "a", obj("a", "one", app="web"))
    await s.create(R, "two", "b", obj("b", "two", app="web"))
    await s.create(R, "two", "c", obj("c", "two", app="db"))
    assert names(await s.list(R, ListOptions())) == ["a", "b", "c"]
    assert names(await s.list(R, ListOptions(namespace="two"))) == ["b", "c"]
    assert names(await s.list(R, ListOptions(labels=LabelSelector.parse("app=web")))) == ["a", "b"]
    assert names(await s.list(R, ListOptions(fields=FieldSelector.parse("metadata.name!=b")))) == ["a", "c"]


async def test_pages_come_from_the_first_pages_snapshot(make: Make) -> None:
    s = make()
    for name in "abcde":
        await s.create(R, "default", name, obj(name))
    first = await s.list(R, ListOptions(limit=2))
    assert [i["metadata"]["name"] for i in first.items] == ["a", "b"]
    assert first.remaining == 3 and first.continue_token
    await s.delete(R, "default", "c")
    await s.create(R, "default", "cc", obj("cc"))
    second = await s.list(R, ListOptions(limit=2, continue_token=first.continue_token))
    assert [i["metadata"]["name"] for i in second.items] == ["c", "d"]
    assert second.resource_version == first.resource_version
    third = await s.list(R, ListOptions(limit=2, continue_token=second.continue_token))
    assert [i["metadata"]["name"] for i in third.items] == ["e"] and third.continue_token is None
    s.compact()
    with pytest.raises(StatusError) as expired:
        await s.list(R, ListOptions(limit=2, continue_token=first.continue_token))
    assert expired.value.code == 410
    with pytest.raises(StatusError) as bad:
        await s.list(R, ListOptions(continue_token="not-a-token"))
    assert bad.value.code == 400


async def test_watch_replays_then_follows_and_sees_selector_transitions(make: Make) -> None:
    s = make()
    a = await s.create(R, "default", "a", obj("a", app="web"))
    start = int(a["metadata"]["resourceVersion"])
    await s.create(R, "default", "b", obj("b", app="web"))
    it = s.watch(R, WatchOptions(labels=LabelSelector.parse("app=web"), resource_version=start))
    (replayed,) = await take(it, 1)
    assert (replayed.type, replayed.object["metadata"]["name"]) == ("ADDED", "b")
    moved = await s.get(R, "default", "b")
    moved["metadata"]["labels"] = {"app": "db"}
    await s.update(R, "default", "b", moved, resource_version=None)
    back = await s.get(R, "default", "b")
    back["metadata"]["labels"] = {"app": "web"}
    await s.update(R, "default", "b", back, resource_version=None)
    await s.delete(R, "default", "a")
    events = await take(it, 3)
    assert [(e.type, e.object["metadata"]["name"]) for e in events] == [
        ("DELETED", "b"),
        ("ADDED", "b"),
        ("DELETED", "a"),
    ]
    assert [e.resource_version for e in events] == sorted(e.resource_version for e in events)
    await it.aclose()


async def test_watch_without_version_starts_with_the_objects_and_sends_bookmarks(make: Make) -> None:
    s = make()
    await s.create(R, "default", "a", obj("a"))
    it = s.watch(R, WatchOptions(bookmarks=True, bookmark_interval=0.05))
    added, bookmark = await take(it, 2)
    assert added.type == "ADDED" and bookmark.type == "BOOKMARK"
    assert bookmark.object["metadata"]["resourceVersion"] == str(s.resource_version)
    await it.aclose()


async def test_watch_from_a_compacted_version_is_410(make: Make) -> None:
    s = make(history=2)
    for name in "abc":
        await s.create(R, "default", name, obj(name))
    with pytest.raises(StatusError) as expired:
        await anext(s.watch(R, WatchOptions(resource_version=0)))
    assert (expired.value.code, expired.value.reason) == (410, "Expired")


async def test_a_watcher_that_falls_behind_is_ended(make: Make) -> None:
    s = make(watch_queue=2)
    it = s.watch(R, WatchOptions(resource_version=0))
    waiting = asyncio.ensure_future(anext(it))
    await asyncio.sleep(0)
    for name in "abcde":
        await s.create(R, "default", name, obj(name))
    assert (await waiting).type == "ADDED"
    rest = [e async for e in it]
    assert len(rest) <= 2


async def test_close_ends_every_watch(make: Make) -> None:
    s = make()
    it = s.watch(R, WatchOptions())
    waiting = asyncio.ensure_future(anext(it))
    await asyncio.sleep(0)
    await s.close()
    with pytest.raises(StopAsyncIteration):
        async with asyncio.timeout(2):
            await waiting
