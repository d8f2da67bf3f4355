"""Disengaging a cluster whose work will not stop in time (a reconcile and a per-cluster runnable
both ignoring the stop) leaves nothing of it running: its reconciles and runnables are cancelled
and its cluster closed, also when the fleet's bound cancels the member while it is stopping. On
kubeop.testing.FakeCluster; every wait is bounded."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

import kubeop.fleet.fleet as fleet_module
from kubeop.client import Client
from kubeop.controller import Context, Controller, Request
from kubeop.fleet import Engagement, Fleet
from kubeop.manager import Phase, Runtime
from kubeop.testing import FakeCluster

from ._support import BOUND, CM, Fakes, in_background, until


class _OneCluster:
    """A provider engaging one FakeCluster as ``east``, with a client whose close is recorded."""

    name = "one"

    def __init__(self, fake: FakeCluster) -> None:
        self.fake = fake
        self.closed: list[Client] = []
        self.fleet: Engagement | None = None
        self.go = asyncio.Event()  # set by the test: engage now

    def connect(self) -> Client:
        client = self.fake.client()
        close = client.close

        async def recorded() -> None:
            self.closed.append(client)
            await close()

        client.close = recorded  # type: ignore[method-assign]
        return client

    async def run(self, fleet: Engagement, stop: asyncio.Event) -> None:
        self.fleet = fleet
        await self.go.wait()
        await fleet.engage("east", self.fake.transport().config, connect=self.connect)
        await stop.wait()


class _Stubborn:
    """A per-cluster runnable that ignores its stop (a slow daemon): only a cancel ends it."""

    def __init__(self) -> None:
        self.runs: list[str] = []

    def for_cluster(self, name: str) -> _StubbornRun:
        return _StubbornRun(self)


class _StubbornRun:
    phase = Phase.CACHES
    needs_leader = False
    name = "stubborn"

    def __init__(self, parent: _Stubborn) -> None:
        self.parent = parent

    async def run(self, cluster: object, stop: asyncio.Event) -> None:
        self.parent.runs.append("run")
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.parent.runs.append("cancelled")
            raise


@pytest.mark.parametrize("margin", [10.0, -0.5], ids=["within-bound", "bound-passed-while-stopping"])
async def test_a_disengaged_cluster_whose_work_ignores_the_stop_leaves_no_task_and_is_closed(
    monkeypatch: pytest.MonkeyPatch, margin: float
) -> None:
    # graceful 1 s: the reconcile's drain ends at ~1 s, the runnable's at ~2 s. With margin -0.5
    # the fleet cancels the member at 1.5 s, inside the runnable's stop.
    monkeypatch.setattr(fleet_module, "_STOP_MARGIN", margin)
    fake = FakeCluster()
    async with fake.client() as api:
        await api.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}
        )
    reconciling: list[asyncio.Task[object] | None] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        reconciling.append(asyncio.current_task())
        await asyncio.sleep(60)

    provider = _OneCluster(fake)
    stubborn = _Stubborn()
    fleet = Fleet(provider, name="slow", runtime=Runtime(graceful_shutdown_timeout=1.0))
    fleet.add(Controller.for_(CM).named("slow").reconcile(reconcile))
    fleet.add(stubborn)
    async with in_background(fleet.start):
        await until(lambda: provider.fleet is not None)
        before = asyncio.all_tasks()  # the fleet's own, before the cluster is engaged
        provider.go.set()
        await until(lambda: bool(reconciling) and stubborn.runs == ["run"])
        async with asyncio.timeout(BOUND):
            await fleet.disengage("east")
        assert stubborn.runs == ["run", "cancelled"]
        assert len(provider.closed) == 1
        assert all(t is not None and t.done() for t in reconciling)
        left = [t.get_name() for t in asyncio.all_tasks() - before if not t.done()]
        assert left == [], left


async def test_a_disengaged_clusters_cache_is_emptied_without_a_full_collection() -> None:
    fakes = {n: FakeCluster() for n in ("east", "west")}
    for fake in fakes.values():
        async with fake.client() as api:
            for i in range(50):
                await api.create(
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": f"cm-{i}", "namespace": "default"},
                    }
                )

    async def reconcile(req: Request, ctx: Context) -> None:
        return None

    provider = Fakes(fakes)
    fleet = Fleet(provider)
    fleet.add(Controller.for_(CM).named("noop").reconcile(reconcile))
    full: list[dict[str, object]] = []

    def record(phase: str, info: dict[str, object]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(info)

    async with in_background(fleet.start):
        for name in fakes:
            await fleet.wait_engaged(name, BOUND)
        informers = [weakref.ref(i) for i in fleet.cluster("east").cache.informers]

        def cached() -> list[int]:  # in east's informers still alive
            return [len(i.store) for i in (ref() for ref in informers) if i is not None]

        assert sum(cached()) == 50
        assert provider.fleet is not None
        gc.callbacks.append(record)
        try:
            async with asyncio.timeout(BOUND):
                await provider.fleet.disengage("east")
        finally:
            gc.callbacks.remove(record)
        # Its objects are freed by reference counting, not by a collection walking every cluster's.
        assert full == []
        assert not any(cached())
        assert [len(i.store) for i in fleet.cluster("west").cache.informers] == [50]
