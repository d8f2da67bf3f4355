"""Runnables that misbehave, and a Manager used wrongly, on kubeop.testing.FakeCluster: one that
ignores its stop is cancelled after the grace and named (the shutdown stays bounded), one that
returns early ends alone, one that raises while starting ends the run, ``Manager.add`` refuses
what would never run as meant, and a ``Manager.start()`` cancelled from outside stops everything
in reverse order. Every wait is bounded by ``asyncio.timeout``."""

from __future__ import annotations

import asyncio
import logging

import pytest

import kubeop.manager._group as group
import kubeop.manager.manager as manager_module
from kubeop.cluster import Cluster
from kubeop.manager import Manager, Phase, runnable
from kubeop.testing import FakeCluster
from tests.unit.manager.test_runnables import BOUND, QUIET, Recorder, until


@pytest.fixture
def short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    """graceful_shutdown_timeout=0 leaves the margin alone: 0.2 s of it, and 0.2 s to end once cancelled."""
    monkeypatch.setattr(manager_module, "_STOP_MARGIN", 0.2)
    monkeypatch.setattr(group, "CANCEL_BOUND", 0.2)


def quick_manager() -> Manager:
    from kubeop.manager import Runtime

    return Manager(FakeCluster().client(), serving=QUIET, runtime=Runtime(graceful_shutdown_timeout=0))


async def test_a_runnable_that_ignores_its_stop_is_cancelled_after_the_grace_and_named(
    short_grace: None, caplog: pytest.LogCaptureFixture
) -> None:
    rec = Recorder()
    journal = rec.journal

    async def deaf(cluster: Cluster, stop: asyncio.Event) -> None:
        try:
            await asyncio.sleep(3600)  # never looks at stop
        except asyncio.CancelledError:
            journal.append("cancel deaf")
            raise

    manager = quick_manager()
    manager.add(rec.make("index", Phase.CACHES))
    manager.add(runnable(deaf, name="deaf"))
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    await until(lambda: manager._synced)
    stop.set()
    with (
        caplog.at_level(logging.ERROR, "kubeop.manager"),
        pytest.raises(TimeoutError, match="deaf did not stop"),
    ):
        await asyncio.wait_for(task, BOUND)
    assert journal == ["start index", "cancel deaf", "stop index"]  # then the rest stopped as ever
    assert any(
        "deaf did not stop within 0 s of the stop: cancelled" in r.getMessage() for r in caplog.records
    )


async def test_a_runnable_that_ignores_its_cancellation_too_is_left_behind_and_the_stop_stays_bounded(
    short_grace: None, caplog: pytest.LogCaptureFixture
) -> None:
    release = asyncio.Event()

    async def stubborn(cluster: Cluster, stop: asyncio.Event) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await release.wait()  # swallows the cancellation

    manager = quick_manager()
    manager.add(runnable(stubborn, name="stubborn"))
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    await until(lambda: manager._synced)
    stop.set()
    with caplog.at_level(logging.ERROR, "kubeop.manager"), pytest.raises(TimeoutError, match="stubborn"):
        await asyncio.wait_for(task, BOUND)
    assert any("stubborn did not end when cancelled: left behind" in r.getMessage() for r in caplog.records)
    release.set()


async def test_a_runnable_that_returns_before_its_stop_ends_alone_and_the_manager_runs_on() -> None:
    rec = Recorder()
    returned = asyncio.Event()

    async def once(cluster: Cluster, stop: asyncio.Event) -> None:
        returned.set()

    manager = Manager(FakeCluster().client(), serving=QUIET)
    manager.add(runnable(once, name="once"))
    manager.add(rec.make("work", Phase.LEADER, needs_leader=True))
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    async with asyncio.timeout(BOUND):
        await returned.wait()
    await until(lambda: manager._synced)
    for _ in range(20):
        await asyncio.sleep(0)
    assert not task.done() and rec.journal == ["start work"]
    stop.set()
    await asyncio.wait_for(task, BOUND)  # no error
    assert rec.journal == ["start work", "stop work"]


async def test_a_runnable_that_raises_before_it_started_ends_the_run() -> None:
    rec = Recorder()
    never = asyncio.Event()
    manager = Manager(FakeCluster().client(), serving=QUIET)
    manager.add(rec.make("server", Phase.SERVERS))
    manager.add(rec.make("index", Phase.CACHES, gate=never, fail=OSError("no disk")))
    manager.add(rec.make("work", Phase.LEADER, needs_leader=True))
    with pytest.raises(OSError, match="no disk"):
        await asyncio.wait_for(manager.start(), BOUND)
    assert rec.journal == ["start server", "start index", "stop server"]  # work never started


async def test_a_manager_refuses_an_add_while_it_runs_and_while_it_stops() -> None:
    rec = Recorder()
    stopping = asyncio.Event()
    refused: list[str] = []
    manager = Manager(FakeCluster().client(), serving=QUIET)

    async def adds_when_stopped(cluster: Cluster, stop: asyncio.Event) -> None:
        await stop.wait()
        try:
            manager.add(rec.make("late", Phase.LEADER))
        except RuntimeError as exc:
            refused.append(str(exc))
        stopping.set()

    manager.add(runnable(adds_when_stopped, name="adds"))
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    await until(lambda: manager._synced)
    with pytest.raises(
        RuntimeError, match=r"Manager.add\('early'\) while the manager runs: .* before start\(\)"
    ):
        manager.add(rec.make("early", Phase.LEADER))
    with pytest.raises(RuntimeError, match="runs already"):
        await manager.start()
    stop.set()
    await asyncio.wait_for(task, BOUND)
    assert stopping.is_set() and refused and "while the manager runs" in refused[0]
    manager.add(rec.make("next", Phase.LEADER))  # stopped: the next start runs it
    assert [getattr(r, "name", None) for r in manager.runnables] == ["adds", "next"]


def test_a_manager_refuses_a_runnable_twice_a_class_and_a_phase_that_is_no_phase() -> None:
    rec = Recorder()
    manager = Manager(serving=QUIET)
    item = manager.add(rec.make("once", Phase.CACHES))
    with pytest.raises(ValueError, match=r"Manager.add\('once'\): this runnable is added already"):
        manager.add(item)

    class Dashboard:
        phase = Phase.SERVERS
        needs_leader = False

        async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
            await stop.wait()

    with pytest.raises(TypeError, match=r"got the class Dashboard: add Dashboard\(\)"):
        manager.add(Dashboard)  # type: ignore[type-var]
    wrong = Dashboard()
    wrong.phase = "SERVERS"  # type: ignore[assignment]
    with pytest.raises(TypeError, match=r"phase must be a kubeop.manager.Phase .* got 'SERVERS'"):
        manager.add(wrong)
    assert manager.runnables == [item]


def test_runnable_refuses_a_function_that_is_not_async() -> None:
    def blocking(cluster: Cluster, stop: asyncio.Event) -> None:
        pass

    with pytest.raises(TypeError, match=r"declare it async, .* asyncio.to_thread"):
        runnable(blocking)  # type: ignore[arg-type]


async def test_a_cancelled_start_stops_everything_in_reverse_order_and_can_start_again() -> None:
    rec = Recorder()
    manager = Manager(FakeCluster().client(), serving=QUIET)
    manager.add(rec.make("server", Phase.SERVERS))
    manager.add(rec.make("index", Phase.CACHES))
    manager.add(rec.make("work", Phase.LEADER, needs_leader=True))
    task = asyncio.ensure_future(manager.start())
    await until(lambda: manager._synced)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, BOUND)
    assert rec.journal[3:] == ["stop work", "stop index", "stop server"]
    stop = asyncio.Event()
    again = asyncio.ensure_future(manager.start(stop))
    await until(lambda: rec.journal.count("start work") == 2)
    stop.set()
    await asyncio.wait_for(again, BOUND)


async def test_a_lease_lost_while_the_leader_phase_starts_ends_the_run_at_once() -> None:
    """An earlier phase's failure (here the lease lost) is seen while a later phase still starts
    (here a runnable whose ``started()`` never comes): the run does not wait for that phase."""
    from kubeop.manager import LeadershipLost

    rec = Recorder()
    lose = asyncio.Event()
    never = asyncio.Event()

    async def election(cluster: Cluster, stop: asyncio.Event) -> None:
        await lose.wait()
        raise LeadershipLost("lease taken over")

    manager = Manager(FakeCluster().client(), serving=QUIET)
    manager.add(rec.make("index", Phase.CACHES))
    manager.add(runnable(election, phase=Phase.ELECTION, needs_leader=False))
    manager.add(rec.make("work", Phase.LEADER, needs_leader=True, gate=never))
    task = asyncio.ensure_future(manager.start())
    await until(lambda: "start work" in rec.journal)
    lose.set()
    with pytest.raises(LeadershipLost, match="taken over"):
        await asyncio.wait_for(task, BOUND)
    assert rec.journal == ["start index", "start work", "cancel work", "stop index"]
