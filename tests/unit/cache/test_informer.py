"""Informer, Reflector and handlers: on a FakeCluster's list and watch (through ListWatch and a
real Client), and on the in-memory FakeServer of ``fakes`` where a test needs what a correct
server does not do (garbage events, managedFields, a server that goes down between writes)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubeop.cache import (
    BackoffConfig,
    CacheMutationError,
    DeletedFinalStateUnknown,
    FuncHandler,
    Indexer,
    Informer,
    ListWatch,
    Reflector,
    Watcher,
    WatcherConfig,
    label_index,
    object_key,
)
from kubeop.client import Client
from kubeop.client.watch import WatchEvent
from kubeop.core.patch import PatchType
from kubeop.core.resource import ApiResource
from kubeop.testing import FakeCluster

from .fakes import FakeListWatch, FakeServer

CONFIG = WatcherConfig(backoff=BackoffConfig(initial=0.01, cap=0.02, jitter=0.0), stall_timeout=0)
CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
Obj = dict[str, Any]


class Cluster:
    """ConfigMaps in namespace ``default`` of a FakeCluster, written through the same client the
    informer's ListWatch uses."""

    def __init__(self) -> None:
        self.fake = FakeCluster()
        self.transport = self.fake.transport()
        self.client = Client(transport=self.transport)

    def listwatch(self) -> ListWatch:
        return ListWatch(self.client, CM, namespace="default")

    @property
    def rv(self) -> int:
        return int(self.fake.resource_version)

    def requests(self) -> list[str]:
        return [f"{r.method} {r.path}?{sorted(r.query)}" for r in self.transport.sent]

    async def create(self, name: str, *, labels: dict[str, str] | None = None, **data: str) -> Obj:
        md: Obj = {"name": name, "namespace": "default", "labels": dict(labels or {})}
        return await self.client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": data}
        )

    async def update(self, name: str, *, labels: dict[str, str] | None = None, **data: str) -> Obj:
        body: Obj = {"data": data}
        if labels is not None:
            body["metadata"] = {"labels": labels}
        return await self.client.patch(CM, name, body, namespace="default", type=PatchType.MERGE)

    async def delete(self, name: str) -> None:
        await self.client.delete(CM, name, namespace="default")


@contextlib.asynccontextmanager
async def cluster_with(n: int) -> AsyncIterator[Cluster]:
    cluster = Cluster()
    try:
        for i in range(n):
            await cluster.create(f"cm{i}", labels={"app": "web" if i % 2 else "db"}, k=str(i))
        yield cluster
    finally:
        await cluster.client.close()


class Recorder:
    """An ResourceEventHandler that records what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any, Any]] = []

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self.events.append(("add", obj, is_in_initial_list))

    def on_update(self, old: Any, new: Any) -> None:
        self.events.append(("update", old, new))

    def on_delete(self, obj: Any) -> None:
        self.events.append(("delete", obj, None))

    def summary(self) -> list[tuple[str, str]]:
        return [(kind, object_key(obj if kind != "update" else other)) for kind, obj, other in self.events]


async def eventually(check: Callable[[], Any], within: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.005)


def filled(n: int) -> FakeServer:
    server = FakeServer()
    for i in range(n):
        server.create(f"cm{i}", labels={"app": "web" if i % 2 else "db"}, k=str(i))
    return server


@contextlib.asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[Informer]:
    informer.start()
    try:
        yield informer
    finally:
        await informer.stop()


async def test_initial_sync_then_add_update_delete() -> None:
    async with cluster_with(3) as server:
        informer = Informer(server.listwatch(), config=CONFIG)
        rec = Recorder()
        reg = informer.add_event_handler(rec)
        async with running(informer):
            assert await informer.wait_for_sync(2)
            assert informer.has_synced() and reg.has_synced()
            assert rec.summary() == [("add", "default/cm0"), ("add", "default/cm1"), ("add", "default/cm2")]
            assert all(initial for _, _, initial in rec.events)
            assert sorted(informer.store.list_keys()) == ["default/cm0", "default/cm1", "default/cm2"]
            assert informer.last_sync_resource_version == str(server.rv)
            rec.events.clear()

            await server.create("new")
            await server.update("cm0", k="changed")
            await server.delete("cm1")
            await eventually(lambda: len(rec.events) == 3)
            (add, new, initial), (upd, old, cur), (dele, gone, _) = rec.events
            assert (add, object_key(new), initial) == ("add", "default/new", False)
            assert upd == "update" and old["data"]["k"] == "0" and cur["data"]["k"] == "changed"
            assert dele == "delete" and object_key(gone) == "default/cm1"
            assert informer.store.get("default/cm0") is cur  # handlers get the cached objects
            assert "default/cm1" not in informer.store


async def test_last_sync_resource_version_waits_for_the_store() -> None:
    async with cluster_with(2) as server:
        informer = Informer(server.listwatch(), config=CONFIG)
        async with running(informer):
            await informer.wait_for_sync(2)
            assert informer.last_sync_resource_version == str(server.rv)
            informer._fifo.update(await server.create("queued"))  # received, not yet applied
            informer.watcher.resource_version = str(server.rv)
            assert informer.last_sync_resource_version == str(server.rv - 1)
            await eventually(lambda: "default/queued" in informer.store)
            assert informer.last_sync_resource_version == str(server.rv)


async def test_has_applied_follows_the_store_not_the_watch() -> None:
    async with cluster_with(2) as server:
        informer = Informer(server.listwatch(), config=CONFIG)
        async with running(informer):
            await informer.wait_for_sync(2)
            listed = server.rv
            assert informer.has_applied(str(listed))  # the initial list
            assert not informer.has_applied(str(listed + 1)) and not informer.has_applied("")
            informer._fifo.update(await server.create("queued"))  # received, not yet applied
            informer.watcher.resource_version = str(server.rv)
            assert not informer.has_applied(str(server.rv))
            await eventually(lambda: "default/queued" in informer.store)
            assert informer.has_applied(str(server.rv))
            written = (await server.update("cm0", k="ours"))["metadata"]["resourceVersion"]
            await server.delete("cm0")  # applied after our write: the store's absence is newer than it
            await eventually(lambda: "default/cm0" not in informer.store)
            assert informer.has_applied(written) and informer.has_applied(str(server.rv))


async def test_transform_strips_managed_fields_by_default() -> None:
    server = filled(1)
    async with running(Informer(FakeListWatch(server), config=CONFIG)) as informer:
        await informer.wait_for_sync(2)
        assert "managedFields" not in informer.store.list()[0]["metadata"]
    async with running(Informer(FakeListWatch(server), config=CONFIG, transform=None)) as informer:
        await informer.wait_for_sync(2)
        assert "managedFields" in informer.store.list()[0]["metadata"]


async def test_late_handler_gets_a_replay_of_adds() -> None:
    async with cluster_with(2) as server, running(Informer(server.listwatch(), config=CONFIG)) as informer:
        await informer.wait_for_sync(2)
        late = Recorder()
        reg = informer.add_event_handler(late)
        assert sorted(late.summary()) == [("add", "default/cm0"), ("add", "default/cm1")]
        assert all(initial for _, _, initial in late.events)
        assert reg.has_synced()
        await server.create("after")
        await eventually(lambda: len(late.events) == 3)
        informer.remove_event_handler(reg)
        assert not reg.has_synced()
        await server.create("unseen")
        await eventually(lambda: "default/unseen" in informer.store)
        assert len(late.events) == 3


async def test_a_failing_handler_breaks_nothing(caplog: pytest.LogCaptureFixture) -> None:
    async with cluster_with(2) as server:
        informer = Informer(server.listwatch(), config=CONFIG)

        def explode(obj: Any, initial: bool) -> None:
            raise RuntimeError("handler bug")

        informer.add_event_handler(FuncHandler(on_add=explode))
        good = Recorder()
        informer.add_event_handler(good)
        with caplog.at_level(logging.ERROR, logger="kubeop.cache"):
            async with running(informer):
                await informer.wait_for_sync(2)
                await server.create("more")
                await eventually(lambda: len(good.events) == 3)
        assert "handler bug" in caplog.text and "raised in on_add" in caplog.text


async def test_func_handler_calls_what_it_has() -> None:
    seen: list[str] = []
    handler = FuncHandler(
        on_update=lambda old, new: seen.append("update"), on_delete=lambda o: seen.append("del")
    )
    handler.on_add({}, True)
    handler.on_update({}, {})
    handler.on_delete({})
    assert seen == ["update", "del"]


async def test_resync_redelivers_the_cache_without_api_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kubeop.cache.informer.MINIMUM_RESYNC_PERIOD", 0.01)
    async with cluster_with(2) as server:
        informer = Informer(server.listwatch(), config=CONFIG, resync_period=0.05)
        rec = Recorder()
        quiet = Recorder()
        informer.add_event_handler(rec)
        informer.add_event_handler(quiet, resync_period=0)
        async with running(informer):
            await informer.wait_for_sync(2)
            requests = server.requests()
            await eventually(lambda: sum(1 for e in rec.events if e[0] == "update") >= 4)
            updates = [e for e in rec.events if e[0] == "update"]
            assert all(old is new for _, old, new in updates)  # the cached object, as it is
            assert server.requests() == requests  # no list, no new watch
            assert [e[0] for e in quiet.events] == ["add", "add"]  # resync disabled for this handler


async def test_handler_resync_periods_follow_client_go_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kubeop.cache.informer.MINIMUM_RESYNC_PERIOD", 0.01)
    informer = Informer(FakeListWatch(FakeServer()), config=CONFIG, resync_period=10)
    a = informer.add_event_handler(Recorder())
    b = informer.add_event_handler(Recorder(), resync_period=2)  # before start: lowers the check period
    assert (a.resync_period, b.resync_period) == (10, 2)
    async with running(informer):
        c = informer.add_event_handler(Recorder(), resync_period=1)  # after start: raised to the check
        assert c.resync_period == 2
    no_resync = Informer(FakeListWatch(FakeServer()), config=CONFIG)
    async with running(no_resync):
        assert no_resync.add_event_handler(Recorder(), resync_period=5).resync_period == 0
    with pytest.raises(RuntimeError, match="stopped"):
        no_resync.add_event_handler(Recorder())


async def test_relist_reports_vanished_objects_as_tombstones() -> None:
    server = filled(3)
    rec = Recorder()
    informer = Informer(FakeListWatch(server), config=CONFIG)
    informer.add_event_handler(rec)
    async with running(informer):
        await informer.wait_for_sync(2)
        rec.events.clear()
        server.go_down()
        server.down = False
        server.delete("cm1")
        server.update("cm2", k="new")
        server.create("cm3")
        server.compact()
        await eventually(lambda: len(rec.events) >= 4)
        kinds = {(kind, object_key(obj if kind != "update" else other)) for kind, obj, other in rec.events}
        assert kinds == {
            ("update", "default/cm0"),  # unchanged, but re-listed (delivered: no resync checks yet)
            ("update", "default/cm2"),
            ("add", "default/cm3"),
            ("delete", "default/cm1"),
        }
        tombstone = next(obj for kind, obj, _ in rec.events if kind == "delete")
        assert isinstance(tombstone, DeletedFinalStateUnknown) and tombstone.obj["metadata"]["name"] == "cm1"
        assert sorted(informer.store.list_keys()) == ["default/cm0", "default/cm2", "default/cm3"]


async def test_indexers_can_be_added_before_and_after_sync() -> None:
    async with cluster_with(4) as server:
        informer = Informer(server.listwatch(), config=CONFIG, indexers={"app": label_index("app")})
        async with running(informer):
            await informer.wait_for_sync(2)
            assert sorted(informer.store.index_keys("app", "web")) == ["default/cm1", "default/cm3"]
            informer.add_indexers({"k": lambda o: [o["data"]["k"]]})
            assert informer.store.index_keys("k", "2") == ["default/cm2"]
            await server.update("cm2", labels={"app": "web"})
            await eventually(lambda: len(informer.store.index_keys("app", "web")) == 3)


async def test_mutating_a_cached_object_fails_at_stop() -> None:
    async with cluster_with(1) as server:
        informer = Informer(server.listwatch(), config=CONFIG, detect_mutations=True)
        informer.start()
        await informer.wait_for_sync(2)
        informer.store.list()[0]["data"]["k"] = "mutated!"
        with pytest.raises(CacheMutationError, match=r"default/cm0 was mutated after it was cached: data\.k"):
            await informer.stop()


async def test_mutating_the_shared_metadata_of_a_cached_object_is_caught() -> None:
    """compact stores metadata as shaped dicts (kubeop.cache.shapes): a change is still seen."""
    async with cluster_with(4) as server:
        informer = Informer(server.listwatch(), config=CONFIG, detect_mutations=True)
        informer.start()
        await informer.wait_for_sync(2)
        cached = informer.store.get("default/cm3")
        assert cached is not None
        cached["metadata"]["labels"]["app"] = "mutated"
        with pytest.raises(
            CacheMutationError, match=r"default/cm3 was mutated after it was cached: metadata\.labels\.app"
        ):
            await informer.stop()
        assert informer.store.get("default/cm1")["metadata"]["labels"]["app"] == "web"  # type: ignore[index]


async def test_mutation_detection_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBEOP_CACHE_MUTATION_DETECTOR", "1")
    assert Informer(FakeListWatch(FakeServer())).mutation_detector is not None
    monkeypatch.setenv("KUBEOP_CACHE_MUTATION_DETECTOR", "0")
    assert Informer(FakeListWatch(FakeServer())).mutation_detector is None


async def test_unprocessable_objects_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    server = filled(1)
    informer = Informer(FakeListWatch(server), config=CONFIG)
    async with running(informer):
        await informer.wait_for_sync(2)
        for stream in server.streams:  # an event without a name cannot be keyed
            stream.queue.put_nowait(WatchEvent("ADDED", {"metadata": {"resourceVersion": "999"}}))
        server.create("fine")
        await eventually(lambda: "default/fine" in informer.store)


async def test_stop_is_idempotent_and_final() -> None:
    informer = Informer(FakeListWatch(filled(1)), config=CONFIG)
    informer.start()
    informer.start()
    await informer.wait_for_sync(2)
    await informer.stop()
    await informer.stop()
    with pytest.raises(RuntimeError):
        informer.start()
    assert not await Informer(FakeListWatch(FakeServer()), config=CONFIG).wait_for_sync(0.01)


async def test_reflector_keeps_a_plain_store_in_step() -> None:
    async with cluster_with(2) as server:
        store = Indexer()
        task = asyncio.create_task(Reflector(store, Watcher(server.listwatch(), CONFIG)).run())
        try:
            await eventually(lambda: len(store) == 2)
            await server.delete("cm0")
            await server.create("x")
            await eventually(lambda: sorted(store.list_keys()) == ["default/cm1", "default/x"])
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
