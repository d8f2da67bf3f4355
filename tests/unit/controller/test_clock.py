"""The clock a reconciler asks for the time: the manager's, shared with the controller's queue.

A SteppedClock runs like the real one and jumps on ``advance``; the jump fires a waiting
``Result(requeue_after=...)`` at once, and ``ctx.now()`` moves with it.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from kubeop.controller import (
    Context,
    Controller,
    EventRecorder,
    Metrics,
    ReconcilerClient,
    Request,
    Result,
)
from kubeop.controller.context import SYSTEM_CLOCK
from kubeop.controller.running import ControllerRuntime
from kubeop.queue import FakeClock, LoopClock, RateLimitingQueue, SteppedClock

from .fakes import APPS, ClusterCache, app, run

WALL = dt.datetime(2026, 3, 1, 12, 0, 10, tzinfo=dt.UTC)


def test_loop_clock_wall_time_is_utc_now() -> None:
    before = dt.datetime.now(dt.UTC)
    got = LoopClock().utcnow()
    assert got.tzinfo is dt.UTC and before <= got <= dt.datetime.now(dt.UTC)


def test_fake_clock_wall_time_moves_with_advance() -> None:
    clock = FakeClock(100.0, wall=WALL)
    assert clock.utcnow() == WALL
    clock.advance(90)
    assert clock.utcnow() == WALL + dt.timedelta(seconds=90)


def test_naive_wall_time_is_refused() -> None:
    with pytest.raises(ValueError, match="no timezone"):
        FakeClock(wall=dt.datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="no timezone"):
        SteppedClock(dt.datetime(2026, 1, 1))


def test_context_defaults_to_the_real_clock() -> None:
    ctx = Context(Request("ns", "a"), None, None, "ctl")  # type: ignore[arg-type]
    assert ctx.clock is SYSTEM_CLOCK
    assert abs((ctx.now() - dt.datetime.now(dt.UTC)).total_seconds()) < 1
    stepped = SteppedClock(WALL)
    assert Context(Request("ns", "a"), None, None, "ctl", stepped).now() - WALL < dt.timedelta(seconds=1)  # type: ignore[arg-type]


async def test_stepped_clock_runs_in_real_time_and_jumps() -> None:
    clock = SteppedClock(WALL)
    fired: list[str] = []
    clock.call_later(0.05, lambda: fired.append("soon"))
    late = clock.call_later(3600, lambda: fired.append("hour"))
    clock.call_later(7200, lambda: fired.append("two hours"))
    cancelled = clock.call_later(10, lambda: fired.append("cancelled"))
    cancelled.cancel()
    await asyncio.sleep(0.15)
    assert fired == ["soon"]  # real time still passes
    t0, wall0 = clock.now(), clock.utcnow()
    clock.advance(3600)
    assert fired == ["soon", "hour"]  # due: fired by the jump itself, in order
    assert clock.now() - t0 >= 3600 and clock.utcnow() - wall0 >= dt.timedelta(seconds=3600)
    late.cancel()  # after firing: a no-op
    assert clock.pending == 1
    clock.advance(3599.0)
    assert fired == ["soon", "hour"]
    await asyncio.sleep(1.0)  # the re-armed timer is due within 1 s of real time
    assert fired == ["soon", "hour", "two hours"]
    assert clock.pending == 0
    with pytest.raises(ValueError):
        clock.advance(-1)


async def test_delayed_requeue_fires_when_the_clock_is_stepped() -> None:
    clock = SteppedClock(WALL)
    queue: RateLimitingQueue[str] = RateLimitingQueue(clock=clock)
    queue.add_after("a", 600)
    await asyncio.sleep(0.05)
    assert len(queue) == 0
    clock.advance(600)
    assert len(queue) == 1 and await queue.get() == "a"


async def test_manager_clock_reaches_the_queue_and_the_reconciler() -> None:
    clock = SteppedClock(WALL)
    env = ClusterCache(clock=clock)  # the cluster stamps objects with the same clock
    env.factory.start()
    created = await env.add(app("a"))
    assert created["metadata"]["creationTimestamp"].startswith("2026-03-01T12:00")
    seen: asyncio.Queue[dt.datetime] = asyncio.Queue()

    async def reconcile(req: Request, ctx: Context) -> Result:
        assert ctx.clock is clock
        seen.put_nowait(ctx.now())
        return Result(requeue_after=3600)

    client = ReconcilerClient(env.client, env.factory)
    runtime = ControllerRuntime(
        env.factory,
        client,
        EventRecorder(None, "test"),
        Metrics(),
        cache_sync_timeout=2,
        clock=clock,
    )
    ctrl = Controller.for_(APPS).reconcile(reconcile)
    running = await run(ctrl, runtime)
    first = await asyncio.wait_for(seen.get(), 3)
    assert first - WALL < dt.timedelta(seconds=5)
    await asyncio.sleep(0.1)
    assert seen.empty()  # the requeue waits for the hour
    env.cluster.step(3600)
    second = await asyncio.wait_for(seen.get(), 3)
    await running.stop()
    await env.close()
    assert second - first >= dt.timedelta(seconds=3600)
