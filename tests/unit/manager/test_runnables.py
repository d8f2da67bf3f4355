"""The Cluster and the Runnables a Manager runs on it, on kubeop.testing.FakeCluster: a runnable
runs on ``Cluster(fake.client())`` without a server; the Manager starts runnables phase by phase,
gates the next phase on ``started()``, stops them in reverse order, ends the run when one fails
and cancels the leader-gated ones when the lease is lost. Nothing here is timed: each wait is on
an event, bounded by ``asyncio.timeout``."""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Callable

import pytest

from kubeop.cluster import Cluster
from kubeop.controller import Context, Controller, Request
from kubeop.core.resource import ApiResource
from kubeop.manager import (
    LeaderElection,
    LeadershipLost,
    Manager,
    Phase,
    Runnable,
    Runtime,
    Serving,
    Sharding,
    runnable,
)
from kubeop.testing import FakeCluster

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
QUIET = Serving(metrics_address=None, health_address=None)
BOUND = 10.0  # seconds any wait here may take before the test fails (never reached when it passes)


def configmap(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}


async def until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(BOUND):
        while not check():  # noqa: ASYNC110 - what is checked has no event to await
            await asyncio.sleep(0.001)


class Recorder:
    """Runnables that write what happens to them into one journal."""

    def __init__(self) -> None:
        self.journal: list[str] = []

    def make(
        self,
        name: str,
        phase: Phase,
        *,
        needs_leader: bool = False,
        gate: asyncio.Event | None = None,
        fail: BaseException | None = None,
    ) -> Runnable:
        journal = self.journal

        class Probe:
            def __init__(self) -> None:
                self.name = name
                self.phase = phase
                self.needs_leader = needs_leader

            async def started(self) -> None:
                if gate is not None:
                    await gate.wait()

            async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
                journal.append(f"start {name}")
                try:
                    if fail is not None:
                        raise fail
                    await stop.wait()
                    journal.append(f"stop {name}")
                except asyncio.CancelledError:
                    journal.append(f"cancel {name}")
                    raise

        return Probe()


# -- the Cluster ---------------------------------------------------------------------------------


async def test_a_runnable_runs_on_a_cluster_of_a_fake_client() -> None:
    """``Cluster(fake.client())`` is all a runnable needs: its client writes, its cache reads."""
    fake = FakeCluster()
    cluster = Cluster(fake.client(), name="unit", owns_client=True)
    seen: list[str] = []

    async def copy_names(cluster: Cluster, stop: asyncio.Event) -> None:
        informer = cluster.cache.informer(CM, namespace="default")
        cluster.cache.start()
        await cluster.client.create(configmap("one"))
        async with asyncio.timeout(BOUND):
            await informer.wait_for_sync()
            while not informer.store.list():  # noqa: ASYNC110 - the store has no event to await
                await asyncio.sleep(0.001)
        seen.extend(o["metadata"]["name"] for o in informer.store.list())
        await stop.wait()

    stop = asyncio.Event()
    task = asyncio.ensure_future(
        runnable(copy_names, phase=Phase.CACHES, needs_leader=False).run(cluster, stop)
    )
    await until(lambda: bool(seen))
    stop.set()
    await task
    await cluster.close()
    await cluster.close()  # a second close does nothing
    assert seen == ["one"]


def test_a_cluster_is_fixed_once_built() -> None:
    cluster = Cluster(FakeCluster().client())
    with pytest.raises(AttributeError):
        cluster.cache = None  # type: ignore[misc]
    with pytest.raises(AttributeError):
        cluster.extra = 1  # type: ignore[attr-defined]
    assert cluster.mapper is cluster.api.discovery
    assert cluster.client.field_manager == "kubeop-operator"


async def test_a_manager_runs_a_runnable_beside_a_controller_on_one_cluster() -> None:
    fake = FakeCluster()
    reconciled: list[str] = []
    clusters: list[Cluster] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        reconciled.append(req.name)

    async def writer(cluster: Cluster, stop: asyncio.Event) -> None:
        clusters.append(cluster)
        await cluster.client.create(configmap("from-a-runnable"))
        await stop.wait()

    manager = Manager(fake.client(), name="unit", serving=QUIET)
    manager.add(Controller.for_(CM).reconcile(reconcile))
    added = manager.add(runnable(writer))
    assert isinstance(added, Runnable)
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    await until(lambda: "from-a-runnable" in reconciled)
    assert clusters == [manager.cluster]
    assert manager.cache is clusters[0].cache and manager.client is clusters[0].client
    stop.set()
    await asyncio.wait_for(task, BOUND)


# -- phases --------------------------------------------------------------------------------------


async def test_phases_start_in_order_and_stop_in_reverse() -> None:
    fake = FakeCluster()
    rec = Recorder()
    manager = Manager(fake.client(), serving=QUIET)
    # added out of order: the phase decides
    manager.add(rec.make("work", Phase.LEADER, needs_leader=True))
    manager.add(rec.make("election", Phase.ELECTION))
    manager.add(rec.make("index", Phase.CACHES))
    manager.add(rec.make("dashboard", Phase.SERVERS))
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    await until(lambda: manager._synced)
    assert rec.journal == ["start dashboard", "start index", "start election", "start work"]
    stop.set()
    await asyncio.wait_for(task, BOUND)
    assert rec.journal[4:] == ["stop work", "stop election", "stop index", "stop dashboard"]


async def test_the_next_phase_waits_for_the_started_of_the_one_before() -> None:
    fake = FakeCluster()
    rec = Recorder()
    warm = asyncio.Event()
    manager = Manager(fake.client(), serving=QUIET)
    manager.add(rec.make("index", Phase.CACHES, gate=warm))
    manager.add(rec.make("work", Phase.LEADER, needs_leader=True))
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    await until(lambda: rec.journal == ["start index"])
    for _ in range(20):
        await asyncio.sleep(0)
    assert rec.journal == ["start index"] and not manager._synced
    warm.set()
    await until(lambda: manager._synced)
    assert rec.journal == ["start index", "start work"]
    stop.set()
    await asyncio.wait_for(task, BOUND)


async def test_a_stop_while_a_phase_starts_returns_and_cancels_what_was_starting() -> None:
    fake = FakeCluster()
    rec = Recorder()
    never = asyncio.Event()
    manager = Manager(fake.client(), serving=QUIET)
    manager.add(rec.make("server", Phase.SERVERS))
    manager.add(rec.make("syncing", Phase.CACHES, gate=never))
    manager.add(rec.make("work", Phase.LEADER, needs_leader=True))
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    await until(lambda: "start syncing" in rec.journal)
    stop.set()
    await asyncio.wait_for(task, BOUND)  # returns, no error
    assert rec.journal == ["start server", "start syncing", "cancel syncing", "stop server"]


# -- failures ------------------------------------------------------------------------------------


async def test_a_runnable_that_raises_ends_the_run_named_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeCluster()
    rec = Recorder()
    manager = Manager(fake.client(), serving=QUIET)
    manager.add(rec.make("server", Phase.SERVERS))
    manager.add(rec.make("work", Phase.LEADER, needs_leader=True))
    manager.add(rec.make("broken", Phase.LEADER, needs_leader=True, fail=RuntimeError("no such table")))
    with caplog.at_level(logging.ERROR, "kubeop.manager"), pytest.raises(RuntimeError, match="no such table"):
        await asyncio.wait_for(manager.start(), BOUND)
    assert any("broken failed: no such table" in r.getMessage() for r in caplog.records)
    assert rec.journal[-2:] == ["stop work", "stop server"]  # the others stopped gracefully


async def test_a_controller_that_cannot_start_ends_the_run() -> None:
    fake = FakeCluster()
    rec = Recorder()
    manager = Manager(fake.client(), serving=QUIET, runtime=Runtime(cache_sync_timeout=0.0))

    async def reconcile(req: Request, ctx: Context) -> None:
        pass

    manager.add(rec.make("server", Phase.SERVERS))
    manager.add(Controller.for_(CM).reconcile(reconcile))
    with pytest.raises(TimeoutError, match="caches did not sync"):
        await asyncio.wait_for(manager.start(), BOUND)
    assert rec.journal == ["start server", "stop server"]


async def test_a_lost_lease_cancels_the_leader_gated_work_and_stops_the_rest() -> None:
    """LeadershipLost from the election phase: what needs the lease is cancelled (no drain),
    the rest is stopped gracefully, then the error is raised."""
    fake = FakeCluster()
    rec = Recorder()
    lose = asyncio.Event()

    async def election(cluster: Cluster, stop: asyncio.Event) -> None:
        await lose.wait()
        raise LeadershipLost("lease taken over")

    manager = Manager(fake.client(), serving=QUIET)
    manager.add(rec.make("index", Phase.CACHES))
    manager.add(runnable(election, phase=Phase.ELECTION, needs_leader=False))
    manager.add(rec.make("work", Phase.LEADER, needs_leader=True))
    manager.add(rec.make("report", Phase.LEADER))
    task = asyncio.ensure_future(manager.start())
    await until(lambda: manager._synced)
    lose.set()
    with pytest.raises(LeadershipLost, match="taken over"):
        await asyncio.wait_for(task, BOUND)
    assert sorted(rec.journal[3:5]) == ["cancel work", "stop report"]
    assert rec.journal[5:] == ["stop index"]


# -- the options ---------------------------------------------------------------------------------


def test_the_keywords_of_before_map_onto_the_options_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"Manager\(metrics_address=\.\.\.\) is deprecated: pass "):
        manager = Manager(
            metrics_address=None, graceful_shutdown_timeout=5, lease_duration=30, leader_election=True
        )
    assert manager.serving.metrics_address is None and manager.serving.health_address == "127.0.0.1:8081"
    assert manager.runtime.graceful_shutdown_timeout == 5 == manager.graceful_shutdown_timeout
    assert manager.election == LeaderElection(lease_duration=30)
    with pytest.warns(
        DeprecationWarning, match=r"pass Manager\(sharding=Sharding\(renew_deadline=\.\.\.\)\)"
    ):
        sharded = Manager(sharding=Sharding(), renew_deadline=1.0, lease_duration=3.0)
    assert sharded.sharding == Sharding(renew_deadline=1.0, lease_duration=3.0)


def test_the_options_objects_warn_about_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        manager = Manager(
            name="quiet",
            leader_election=LeaderElection(id="lock", namespace="ops"),
            serving=QUIET,
            runtime=Runtime(field_manager="writer"),
        )
    assert manager.leader_election and manager.field_manager == "writer" and manager._metrics_address is None


def test_a_keyword_beside_its_options_object_or_unknown_is_an_error() -> None:
    with pytest.raises(TypeError, match=r"pass health_address in serving=Serving\(\.\.\.\), not beside it"):
        Manager(serving=QUIET, health_address=None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'metrics_adress'"):
        Manager(metrics_adress=None)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="choose one"):
        Manager(leader_election=LeaderElection(), sharding=Sharding())


def test_a_leader_gated_function_runs_in_the_leader_phase() -> None:
    async def work(cluster: Cluster, stop: asyncio.Event) -> None:
        pass

    made = runnable(work)
    assert (made.phase, made.needs_leader) == (Phase.LEADER, True)
    with pytest.raises(ValueError, match=r"needs_leader=True runs in Phase\.LEADER, not SERVERS"):
        runnable(work, phase=Phase.SERVERS)
    with pytest.raises(TypeError, match=r"Manager\.add takes a Controller, got int"):
        Manager(serving=QUIET).add(1)  # type: ignore[type-var]
