"""DelayingQueue: add_after on a fake clock, as client-go's delaying_queue_test.go."""

from __future__ import annotations

import asyncio

import pytest

from kubeop.queue import DelayingQueue, FakeClock, QueueShutDown


def drain(q: DelayingQueue[str]) -> list[str]:
    items = []
    while len(q):
        item = q.get_nowait()
        q.done(item)
        items.append(item)
    return items


def test_item_is_added_when_its_time_comes() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", 0.05)
    assert len(q) == 0
    assert q.waiting == 1
    assert q.ready_at("foo") == 0.05
    clock.advance(0.049)
    assert len(q) == 0
    clock.advance(0.001)
    assert len(q) == 1
    assert q.waiting == 0
    assert q.ready_at("foo") is None
    assert drain(q) == ["foo"]


@pytest.mark.parametrize("delay", [0.0, -1.0])
def test_no_delay_adds_at_once(delay: float) -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", delay)
    assert len(q) == 1
    assert clock.pending == 0


def test_duplicate_keeps_the_earliest_time() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", 50)
    q.add_after("bar", 70)
    q.add_after("foo", 10)  # earlier: wins
    q.add_after("bar", 90)  # later: ignored
    assert q.ready_at("foo") == 10
    assert q.ready_at("bar") == 70
    clock.advance(10)
    assert drain(q) == ["foo"]
    clock.advance(49)  # the superseded foo@50 entry must not fire
    assert drain(q) == []
    clock.advance(11)
    assert drain(q) == ["bar"]
    clock.advance(100)
    assert drain(q) == []


def test_items_fire_in_ready_order() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("late", 3)
    q.add_after("early", 1)
    q.add_after("middle", 2)
    clock.advance(5)
    assert drain(q) == ["early", "middle", "late"]


def test_one_timer_however_many_items_wait() -> None:
    clock = FakeClock()
    q: DelayingQueue[int] = DelayingQueue(clock=clock)
    for i in range(1000, 0, -1):  # each new one is the earliest: the timer is re-armed
        q.add_after(i, i)
        assert clock.pending == 1
    assert q.waiting == 1000
    clock.advance(500)
    assert len(q) == 500
    assert clock.pending == 1
    assert clock.next_due() == 501


def test_waiting_and_queued_are_independent() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", 1)
    q.add("foo")
    assert drain(q) == ["foo"]
    clock.advance(1)
    assert drain(q) == ["foo"]


def test_a_due_item_that_is_queued_is_deduplicated() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add("foo")
    q.add_after("foo", 1)
    clock.advance(1)
    assert len(q) == 1


def test_shutdown_drops_waiting_items_and_ignores_add_after() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", 1)
    q.shut_down()
    assert clock.pending == 0
    assert q.waiting == 0
    q.add_after("bar", 1)
    q.add_after("baz", 0)
    clock.advance(2)
    with pytest.raises(QueueShutDown):
        q.get_nowait()


async def test_drain_also_stops_the_timer() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", 1)
    await q.shut_down_with_drain()
    assert clock.pending == 0
    clock.advance(2)
    assert len(q) == 0


def test_stale_entries_are_compacted() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    for i in range(10_000):
        q.add_after("foo", 10_000 - i)  # each call moves foo earlier
    assert len(q._waiting) < 200
    clock.advance(1)
    assert drain(q) == ["foo"]
    clock.advance(20_000)
    assert drain(q) == []


async def test_a_waiting_worker_is_woken_by_the_timer() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add_after("foo", 1)
    await asyncio.sleep(0)
    assert not getter.done()
    clock.advance(1)
    assert await asyncio.wait_for(getter, 1) == "foo"


async def test_real_loop_clock() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    loop = asyncio.get_running_loop()
    start = loop.time()
    q.add_after("slow", 0.05)
    q.add_after("fast", 0.01)
    assert await asyncio.wait_for(q.get(), 1) == "fast"
    assert await asyncio.wait_for(q.get(), 1) == "slow"
    assert loop.time() - start >= 0.05
    q.shut_down()


def test_a_timer_that_fires_early_is_rearmed() -> None:
    clock = FakeClock()
    q: DelayingQueue[str] = DelayingQueue(clock=clock)
    q.add_after("foo", 1)
    q._on_timer()  # as if the loop's timer fired before the clock reached the ready time
    assert len(q) == 0
    assert clock.pending >= 1
    clock.advance(1)
    assert drain(q) == ["foo"]
