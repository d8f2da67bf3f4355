"""The object page's writes made per reconcile (counted by the reconciler client's write guard,
only while a dashboard is on) and the shard and replica owning the object's key."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import orjson
import pytest

from kubeop.cache import SharedInformerFactory
from kubeop.controller import Context, Controller, EventRecorder, Request
from kubeop.controller.context import _running
from kubeop.controller.journal import ControllerLoad, ReconcileJournal, ReconcileRecord, counting_writes
from kubeop.dashboard import Recorder
from kubeop.dashboard.aggregate import Sources, object_page
from kubeop.manager import Dashboard, Manager, Sharding
from kubeop.manager._runnables import dashboard_runnable
from kubeop.manager.rendezvous import owner
from kubeop.manager.sharding import Sharder
from kubeop.queue import RateLimitingQueue, SteppedClock
from kubeop.testing import FakeCluster

from .test_manager_dashboard import _NO_PORTS, _create, _eventually, _get
from .test_manager_dashboard import _running as _started


def _context(fake: FakeCluster) -> Context:
    client = fake.client()
    return Context(Request("ns", "w"), None, EventRecorder(client, "test"), "widgets")  # type: ignore[arg-type]


def test_the_counting_guard_counts_on_the_running_reconcile_after_the_guard() -> None:
    ctx = _context(FakeCluster())
    calls: list[str] = []
    count = counting_writes(lambda: calls.append("guard"))
    count()  # outside a reconcile: the guard runs, nothing is counted
    assert calls == ["guard"] and ctx.writes == 0

    def reconcile() -> None:
        _running.set(ctx)
        count()
        count()

    contextvars.copy_context().run(reconcile)
    assert ctx.writes == 2 and calls == ["guard"] * 3

    def refused() -> None:
        raise PermissionError("not the leader")

    def reconcile_refused() -> None:
        _running.set(ctx)
        counting_writes(refused)()

    with pytest.raises(PermissionError):
        contextvars.copy_context().run(reconcile_refused)
    assert ctx.writes == 2, "a write the guard refused was counted"
    counting_writes(None)()  # no guard of its own: counts only


def test_the_recorder_keeps_each_reconciles_writes() -> None:
    recorder = Recorder()
    for writes in (2, 0):
        recorder.journal.records.append(
            ReconcileRecord(
                "widgets",
                "Widget",
                Request("ns", "w"),
                1000.0 + writes,
                0.001,
                "success",
                None,
                0.0,
                None,
                0,
                f"r{writes}",
                writes,
            )
        )
    recorder.drain(1010.0)
    assert [r.writes for r in next(iter(recorder.history.values()))] == [2, 0]


async def test_the_object_page_shows_writes_per_reconcile_and_this_replica() -> None:
    fake = FakeCluster()

    def reconcile(req: Request, ctx: Context) -> None:  # a sync reconciler: writes from a thread
        if req.name.endswith("-child"):
            return
        if ctx.client.get("configmaps", f"{req.name}-child", namespace=req.namespace) is None:
            ctx.client.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": f"{req.name}-child", "namespace": req.namespace},
                }
            )
            ctx.client.patch("configmaps", req.name, {"data": {"child": "made"}}, namespace=req.namespace)

    await _create(fake, "a")
    manager = Manager(
        fake.client(), serving=_NO_PORTS, dashboard=Dashboard(address="127.0.0.1:0", refresh=0.1)
    )
    manager.add(Controller.for_("configmaps").named("widgets").reconcile(reconcile))
    async with _started(manager):
        assert manager.dashboard_server is not None
        port = manager.dashboard_server.port

        async def page() -> dict[str, Any] | None:
            got = orjson.loads((await _get(port, "/api/object?kind=ConfigMap&namespace=default&name=a"))[1])
            return got if len(got["reconciles"]) >= 2 else None

        shown = await _eventually(page, 10, "two reconciles of a")
    writes = [r["writes"] for r in shown["reconciles"]]  # the newest first
    assert writes[-1] == 2, writes  # the first reconcile: the child created, the parent patched
    assert writes[:-1] == [0] * (len(writes) - 1), writes  # then nothing to change
    assert shown["owner"] == [{"controller": "widgets", "replica": "this replica", "this_replica": True}]


async def test_without_a_dashboard_no_write_is_counted() -> None:
    fake = FakeCluster()
    seen: list[Context] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        seen.append(ctx)
        if req.name == "a":
            await ctx.client.patch("configmaps", "a", {"data": {"x": "1"}}, namespace="default")

    await _create(fake, "a")
    manager = Manager(fake.client(), serving=_NO_PORTS)
    manager.add(Controller.for_("configmaps").reconcile(reconcile))
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    try:
        await _eventually(_async(lambda: bool(seen)), 10, "a reconcile")
        assert manager.cluster is not None and manager.cluster.client.policy.guard is None
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
    assert all(ctx.writes == 0 for ctx in seen)


def _async(check: Any) -> Any:
    async def run() -> Any:
        return check()

    return run


async def test_with_sharding_the_page_names_the_ring_the_key_and_its_owner() -> None:
    fake = FakeCluster()
    manager = Manager(
        fake.client(),
        serving=_NO_PORTS,
        sharding=Sharding(identity="replica-a", unsharded={"singleton"}),
        dashboard=Dashboard(address="127.0.0.1:0"),
        name="widget-operator",
    )
    client = fake.client()
    manager.sharder = Sharder(
        Sharding(identity="replica-a", unsharded={"singleton"}),
        client,
        SharedInformerFactory(client),
        name="widget-operator",
        namespace="default",
        lease_duration=15,
        renew_deadline=10,
        retry_period=2,
    )
    sources = dashboard_runnable(manager)._sources
    assert sources.owner("widgets", "ns", "w")["replica"] == "none yet (no ring)"
    members = ["replica-a", "replica-b", "replica-c"]
    manager.sharder.handover.observe_ring(3, members)
    for name in ("w0", "w1", "w2", "w3", "w4", "w5"):
        shown = sources.owner("widgets", "ns", name)
        expected = owner(f"ns/{name}", members)
        assert shown == {
            "ring": "widget-operator-shards",
            "generation": 3,
            "key": f"ns/{name}",
            "replica": expected,
            "this_replica": expected == "replica-a",
        }
    assert sources.owner("singleton", "ns", "w0")["key"] == "controller:singleton"
    assert manager.sharder.handover._owner_cache == {}, "the page changed the handover's state"


async def test_the_page_lists_every_controller_of_the_kind_even_before_it_reconciled() -> None:
    recorder = Recorder()
    recorder.journal.controllers["widgets"] = ControllerLoad(lambda: 0, lambda: 0, 1, "Widget")
    recorder.journal.controllers["gadgets"] = ControllerLoad(lambda: 0, lambda: 0, 1, "Gadget")
    sources = Sources(
        cluster=lambda: None, owner=lambda c, ns, n: {"replica": f"r-{c}-{ns}-{n}", "this_replica": False}
    )
    page = await object_page(recorder, sources, "Widget", "ns", "w")
    assert page["owner"] == [{"controller": "widgets", "replica": "r-widgets-ns-w", "this_replica": False}]


class _CountingClock(SteppedClock):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def now(self) -> float:
        self.reads += 1
        return super().now()


async def test_without_metrics_the_queue_counts_adds_for_the_dashboard_and_reads_no_clock() -> None:
    journal = ReconcileJournal()
    load = ControllerLoad(lambda: 0, lambda: 0, 1, "Widget")
    clock = _CountingClock()
    queue: RateLimitingQueue[str] = RateLimitingQueue(
        name="widgets", metrics=journal.register("widgets", load, None), clock=clock
    )
    for item in ("a", "b", "a"):  # the second "a" is already waiting: not an add
        queue.add(item)
    queue.add_after("c", 0.0)
    for item in range(50):
        queue.add(str(item))
    while len(queue):
        queue.done(queue.get_nowait())
    assert load.adds == 53
    # one read: arming the unfinished-work refresh (once per 500 ms), none per item
    assert clock.reads <= 1, "the queue timed its items for a dashboard that reads only the adds"
