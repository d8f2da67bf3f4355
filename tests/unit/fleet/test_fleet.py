"""A Fleet on several kubeop.testing.FakeClusters: controllers declared once run against every
engaged cluster, a reconcile's request and client are its cluster's, a cluster engaged or
disengaged at run time starts or stops only its own work, and a cluster that fails does not
hold the others up. Every wait is bounded."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kubeop.controller import Context, Controller, Request
from kubeop.fleet import ClusterProvider, Fleet
from kubeop.manager import Phase, Runtime
from kubeop.testing import FakeCluster

from ._support import BOUND, CM, Fakes, configmap, create, in_background, labeller, until


async def read(fake: FakeCluster, name: str) -> dict[str, str]:
    async with fake.client() as api:
        obj = await api.get(CM, name, namespace="default")
    return dict(obj.get("data") or {})


async def test_a_controller_declared_once_converges_every_cluster_with_its_own_client() -> None:
    fakes = {n: FakeCluster() for n in ("east", "west", "north")}
    for name, fake in fakes.items():
        await create(fake, configmap(f"cm-{name}"))
    seen: list[tuple[str, str]] = []
    provider = Fakes(fakes)
    fleet = Fleet(provider, name="fleet-test")
    fleet.add(labeller(seen))
    async with in_background(fleet.start):
        for name in fakes:
            await fleet.wait_engaged(name, BOUND)
        for name in fakes:
            # Each ConfigMap was reconciled in its own cluster, labelled with that cluster's name.
            await until(lambda n=name: (n, f"cm-{n}") in seen)
        for name, fake in fakes.items():
            async with asyncio.timeout(BOUND):
                while (await read(fake, f"cm-{name}")).get("cluster") != name:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
        assert sorted(fleet.clusters) == ["east", "north", "west"]
        assert all(c in fakes for c, _ in seen)
        # No cluster saw another's objects.
        assert {(c, n) for c, n in seen} == {(n, f"cm-{n}") for n in fakes}
    assert fleet.clusters == {}


async def test_a_cluster_engaged_and_disengaged_at_run_time_starts_and_stops_only_its_own_work() -> None:
    east, west = FakeCluster(), FakeCluster()
    seen: list[tuple[str, str]] = []
    provider = Fakes({"east": east})
    fleet = Fleet(provider)
    fleet.add(labeller(seen))
    async with in_background(fleet.start):
        await fleet.wait_engaged("east", BOUND)
        tasks_with_one = len(asyncio.all_tasks())
        await provider.engage("west", west)
        await fleet.wait_engaged("west", BOUND)
        await create(west, configmap("late"))
        await until(lambda: ("west", "late") in seen)
        assert provider.fleet is not None
        await provider.fleet.disengage("west")
        assert "west" not in fleet.clusters
        with pytest.raises(LookupError, match=r"'west' is not engaged.*east"):
            fleet.cluster("west")
        # Its workers and watches are gone: nothing reconciles a new object there.
        await create(west, configmap("after"))
        await create(east, configmap("still"))
        await until(lambda: ("east", "still") in seen)
        assert ("west", "after") not in seen
        await until(lambda: len(asyncio.all_tasks()) <= tasks_with_one)


async def test_engaging_again_with_new_credentials_restarts_that_cluster_only() -> None:
    east, west = FakeCluster(), FakeCluster()
    seen: list[tuple[str, str]] = []
    provider = Fakes({"east": east, "west": west})
    fleet = Fleet(provider)
    fleet.add(labeller(seen))
    async with in_background(fleet.start):
        first_east = await fleet.wait_engaged("east", BOUND)
        first_west = await fleet.wait_engaged("west", BOUND)
        await provider.engage("west", west)  # the same config: nothing happens
        assert fleet.cluster("west") is first_west
        await provider.engage("west", west, namespace="other")  # a different config: restarted
        second = await fleet.wait_engaged("west", BOUND)
        assert second is not first_west
        assert fleet.cluster("east") is first_east


async def test_a_cluster_that_cannot_start_is_retried_while_the_others_run() -> None:
    good, bad = FakeCluster(), FakeCluster()
    bad.fail("GET", CM, code=503, times=None)  # its list never succeeds: caches cannot sync
    seen: list[tuple[str, str]] = []
    fleet = Fleet(Fakes({"good": good, "bad": bad}), runtime=Runtime(cache_sync_timeout=0.5))
    fleet.add(labeller(seen))
    async with in_background(fleet.start):
        await fleet.wait_engaged("good", BOUND)
        await create(good, configmap("fine"))
        await until(lambda: ("good", "fine") in seen)
        assert "bad" not in fleet.clusters
        await create(bad, configmap("waiting"))
        bad.heal()
        await fleet.wait_engaged("bad", BOUND)
        await until(lambda: ("bad", "waiting") in seen)


async def test_a_reconciler_reaches_another_cluster_by_name() -> None:
    hub, member = FakeCluster(), FakeCluster()
    await create(hub, configmap("spec", {"greeting": "hello"}))
    fleet: Fleet

    async def reconcile(req: Request, ctx: Context) -> None:
        if req.cluster != "hub":
            return
        obj = await ctx.client.get(CM, req.name, namespace=req.namespace)
        assert obj is not None
        target = fleet.cluster("member")
        copy = configmap("copy", dict(obj.get("data") or {}))
        if await target.client.get(CM, "copy", namespace="default") is None:
            await target.client.create(copy)

    fleet = Fleet(Fakes({"member": member, "hub": hub}))
    fleet.add(Controller.for_(CM).named("copier").reconcile(reconcile))
    async with in_background(fleet.start):
        await fleet.wait_engaged("member", BOUND)
        await fleet.wait_engaged("hub", BOUND)
        async with asyncio.timeout(BOUND):
            while True:
                async with member.client() as api:
                    if await api.get_or_none(CM, "copy", namespace="default") is not None:
                        break
                await asyncio.sleep(0.01)


async def test_log_lines_of_a_reconcile_name_the_cluster() -> None:
    import io

    from kubeop.manager.logs import TextFormatter

    fake = FakeCluster()
    await create(fake, configmap("x"))
    done = asyncio.Event()
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(TextFormatter())
    user = logging.getLogger("kubeop-test-user")
    user.addHandler(handler)
    user.propagate = False

    async def reconcile(req: Request, ctx: Context) -> None:
        user.warning("hello from the reconcile")
        done.set()

    fleet = Fleet(Fakes({"edge-1": fake}))
    fleet.add(Controller.for_(CM).named("talker").reconcile(reconcile))
    try:
        async with in_background(fleet.start):
            async with asyncio.timeout(BOUND):
                await done.wait()
    finally:
        user.removeHandler(handler)
    assert "hello from the reconcile cluster=edge-1 controller=talker kind=ConfigMap object=default/x" in (
        lines.getvalue()
    )


def test_the_fleet_refuses_what_it_cannot_run() -> None:
    fleet = Fleet()
    with pytest.raises(TypeError, match="Controller or a cluster provider"):
        fleet.add("east")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no reconciler"):
        fleet.add(Controller.for_(CM))
    assert isinstance(Fakes({}), ClusterProvider)
    with pytest.raises(ValueError, match="no cluster provider"):
        asyncio.run(fleet.start(asyncio.Event()))


@pytest.mark.parametrize("name", ["East", "a/b", "a..b", "a b", "x\r\ny", "-a", "", "a" * 254])
async def test_bad_cluster_names_are_refused(name: str) -> None:
    fleet = Fleet(Fakes({}))
    with pytest.raises(ValueError, match="DNS-1123"):
        await fleet.engage(name, FakeCluster().transport().config)


async def test_two_replicas_split_the_clusters_and_one_takes_all_when_the_other_leaves() -> None:
    from kubeop.fleet import ClusterSharding

    hub = FakeCluster()
    fakes = {f"c{i}": FakeCluster() for i in range(6)}
    for fake in fakes.values():
        await create(fake, configmap("x"))
    # Which replica is running which cluster's reconciles, at any moment (overlap: a bug).
    running: dict[str, set[str]] = {name: set() for name in fakes}
    overlaps: list[str] = []
    reconciled: dict[str, set[str]] = {name: set() for name in fakes}

    def make(identity: str) -> Fleet:
        async def reconcile(req: Request, ctx: Context) -> None:
            holders = running[req.cluster]
            holders.add(identity)
            if len(holders) > 1:
                overlaps.append(f"{req.cluster}: {sorted(holders)}")
            reconciled[req.cluster].add(identity)
            await asyncio.sleep(0.01)
            holders.discard(identity)

        fleet = Fleet(
            Fakes(fakes),
            name="split",
            sharding=ClusterSharding(
                namespace="default",
                hub=hub.client(),
                identity=identity,
                lease_duration=1.5,
                renew_deadline=1.0,
                retry_period=0.3,
            ),
        )
        fleet.add(Controller.for_(CM).named("split").reconcile(reconcile))
        return fleet

    # (rendezvous hashing gives replica-1 c0 and c2, replica-2 the other four)
    a, b = make("replica-1"), make("replica-2")
    stop_a, stop_b = asyncio.Event(), asyncio.Event()
    run_a = asyncio.create_task(a.start(stop_a))
    run_b = asyncio.create_task(b.start(stop_b))
    try:
        # Both replicas in the ring, every cluster running on exactly one of them.
        await until(
            lambda: (
                set(a.clusters) | set(b.clusters) == set(fakes)
                and not set(a.clusters) & set(b.clusters)
                and bool(a.clusters)
                and bool(b.clusters)
            )
        )
        assert a.engaged == b.engaged == frozenset(fakes)
        # Replica a leaves: b runs every cluster, each converged there.
        stop_a.set()
        await asyncio.wait_for(run_a, BOUND)
        await until(lambda: set(b.clusters) == set(fakes))
        for fake in fakes.values():
            async with fake.client() as api:
                await api.patch(CM, "x", {"data": {"after": "a-left"}}, namespace="default")
        await until(lambda: all("replica-2" in reconciled[n] for n in fakes))
        assert overlaps == []
    finally:
        stop_a.set()
        stop_b.set()
        await asyncio.wait_for(asyncio.gather(run_a, run_b, return_exceptions=True), BOUND)


class _Beside:
    """A per-cluster runnable recording its life; ``fail_once``: its first run on that cluster fails."""

    def __init__(self, log: list[tuple[str, str]], fail_once: str = "") -> None:
        self.log = log
        self.fail_once = fail_once

    def for_cluster(self, name: str) -> _BesideRun:
        return _BesideRun(self, name)


class _BesideRun:
    phase = Phase.CACHES
    needs_leader = False

    def __init__(self, parent: _Beside, cluster: str) -> None:
        self.parent, self.cluster, self.name = parent, cluster, "beside"
        self.ready = asyncio.Event()

    async def started(self) -> None:
        await self.ready.wait()

    async def run(self, cluster: object, stop: asyncio.Event) -> None:
        self.parent.log.append((self.cluster, "run"))
        self.ready.set()
        if self.parent.fail_once == self.cluster:
            self.parent.fail_once = ""
            raise RuntimeError("feed broke")
        await stop.wait()
        self.parent.log.append((self.cluster, "stopped"))


async def test_what_runs_per_cluster_starts_before_the_controllers_and_stops_with_its_cluster() -> None:
    fakes = {n: FakeCluster() for n in ("east", "west")}
    for fake in fakes.values():
        await create(fake, configmap("a"))
    life: list[tuple[str, str]] = []
    seen: list[tuple[str, str]] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        seen.append((req.cluster, req.name))
        life.append((req.cluster, "reconcile"))

    provider = Fakes(fakes)
    fleet = Fleet(provider, name="beside", runtime=Runtime(graceful_shutdown_timeout=2.0))
    fleet.add(Controller.for_(CM).named("c").reconcile(reconcile))
    beside = _Beside(life, fail_once="west")
    fleet.add(beside)
    assert fleet.per_cluster == [beside] and not fleet.providers[1:]
    async with in_background(fleet.start):
        await until(lambda: {c for c, _ in seen} == {"east", "west"})
        for name in ("east", "west"):
            mine = [what for c, what in life if c == name]
            assert mine.index("run") < mine.index("reconcile")
        # west's first run failed: west was started again (after the backoff), with a new run.
        await until(lambda: [w for c, w in life if c == "west"].count("run") == 2)
        await fleet.disengage("east")
        assert ("east", "stopped") in life and ("west", "stopped") not in life
    assert ("west", "stopped") in life
