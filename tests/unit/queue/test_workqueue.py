"""WorkQueue: the queue / dirty / processing rules and shutdown, as client-go's queue_test.go."""

from __future__ import annotations

import asyncio

import pytest

from kubeop.queue import QueueShutDown, WorkQueue


def test_fifo_order() -> None:
    q: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "c"):
        q.add(key)
    assert len(q) == 3
    assert [q.get_nowait() for _ in range(3)] == ["a", "b", "c"]
    assert len(q) == 0


def test_add_while_queued_is_a_no_op() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.add("a")
    assert len(q) == 2
    assert q.get_nowait() == "a"
    assert q.get_nowait() == "b"
    with pytest.raises(asyncio.QueueEmpty):
        q.get_nowait()


def test_add_while_processing_is_delivered_once_after_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert q.get_nowait() == "a"
    q.add("a")
    q.add("a")
    assert len(q) == 0, "an item being processed is never queued"
    q.done("a")
    assert len(q) == 1
    assert q.get_nowait() == "a"
    q.done("a")
    assert len(q) == 0


def test_done_of_an_item_not_being_processed_is_a_no_op() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.done("never-seen")
    q.add("a")
    q.done("a")  # queued, not processing: client-go would queue a duplicate
    assert len(q) == 1
    assert q.get_nowait() == "a"
    q.done("a")
    q.done("a")
    assert len(q) == 0


def test_readded_item_goes_to_the_tail() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    assert q.get_nowait() == "a"
    q.add("a")
    q.add("c")
    q.done("a")
    assert [q.get_nowait() for _ in range(3)] == ["b", "c", "a"]


async def test_get_waits_for_an_add() -> None:
    q: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not getter.done()
    q.add("a")
    assert await asyncio.wait_for(getter, 1) == "a"


async def test_waiting_workers_are_served_in_order() -> None:
    q: WorkQueue[int] = WorkQueue()
    getters = [asyncio.create_task(q.get()) for _ in range(3)]
    await asyncio.sleep(0)
    for i in range(3):
        q.add(i)
    assert await asyncio.gather(*getters) == [0, 1, 2]


async def test_a_cancelled_waiter_passes_its_wake_up_on() -> None:
    q: WorkQueue[str] = WorkQueue()
    first = asyncio.create_task(q.get())
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("a")  # wakes `first`...
    first.cancel()  # ...which leaves before it runs
    assert await asyncio.wait_for(second, 1) == "a"
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_a_cancelled_waiter_is_forgotten() -> None:
    q: WorkQueue[str] = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    getter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await getter
    q.add("a")
    assert q.get_nowait() == "a"


def test_shut_down_ignores_adds_but_hands_out_what_is_queued() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.shut_down()
    assert q.shutting_down()
    q.add("c")
    assert len(q) == 2
    assert q.get_nowait() == "a"
    assert q.get_nowait() == "b"
    with pytest.raises(QueueShutDown):
        q.get_nowait()
    q.shut_down()  # idempotent


async def test_shut_down_releases_waiting_workers() -> None:
    q: WorkQueue[str] = WorkQueue("things")
    getters = [asyncio.create_task(q.get()) for _ in range(2)]
    await asyncio.sleep(0)
    q.shut_down()
    for getter in getters:
        with pytest.raises(QueueShutDown):
            await asyncio.wait_for(getter, 1)


async def test_async_for_ends_at_shutdown() -> None:
    q: WorkQueue[int] = WorkQueue()
    for i in range(3):
        q.add(i)
    q.shut_down()
    seen = []
    async for item in q:
        seen.append(item)
        q.done(item)
    assert seen == [0, 1, 2]


def test_a_dirty_item_done_after_shutdown_is_still_handed_out() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    assert q.get_nowait() == "a"
    q.add("a")
    q.shut_down()
    with pytest.raises(QueueShutDown):
        q.get_nowait()
    q.done("a")
    assert q.get_nowait() == "a"


async def test_shut_down_with_drain_waits_for_processing() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    q.add("bar")
    first, second = q.get_nowait(), q.get_nowait()
    drain = asyncio.create_task(q.shut_down_with_drain())
    await asyncio.sleep(0)
    with pytest.raises(QueueShutDown):
        await q.get()
    q.done(first)
    await asyncio.sleep(0)
    assert not drain.done()
    q.done(second)
    await asyncio.wait_for(drain, 1)


async def test_shut_down_with_drain_returns_at_once_when_idle() -> None:
    q: WorkQueue[str] = WorkQueue()
    await asyncio.wait_for(q.shut_down_with_drain(), 1)
    assert q.shutting_down()


async def test_shut_down_forces_a_pending_drain() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    q.get_nowait()
    drain = asyncio.create_task(q.shut_down_with_drain())
    await asyncio.sleep(0)
    assert not drain.done()
    q.shut_down()  # e.g. a second SIGTERM
    await asyncio.wait_for(drain, 1)


async def test_drain_with_a_dirty_item() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    gotten = q.get_nowait()
    q.add("foo")
    drain = asyncio.create_task(q.shut_down_with_drain())
    await asyncio.sleep(0)
    with pytest.raises(QueueShutDown):
        q.get_nowait()
    q.done(gotten)  # re-queues the dirty item
    again = q.get_nowait()
    assert again == "foo"
    q.done(again)
    with pytest.raises(QueueShutDown):
        q.get_nowait()
    await asyncio.wait_for(drain, 1)


async def test_concurrent_drains_all_return() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.get_nowait()
    drains = [asyncio.create_task(q.shut_down_with_drain()) for _ in range(2)]
    await asyncio.sleep(0)
    q.done("a")
    await asyncio.wait_for(asyncio.gather(*drains), 1)


async def test_cancelled_drain_leaves_no_waiter() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.get_nowait()
    drain = asyncio.create_task(q.shut_down_with_drain())
    await asyncio.sleep(0)
    drain.cancel()
    with pytest.raises(asyncio.CancelledError):
        await drain
    assert q._drainers == []
    q.done("a")


def test_name_and_repr() -> None:
    q: WorkQueue[str] = WorkQueue("pods")
    q.add("a")
    assert q.name == "pods"
    assert "pods" in repr(q)
    assert "queued=1" in repr(q)
