"""HandlerThreads: a webhook's own bounded threads, never queued behind stuck calls."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import threading
import weakref

import pytest

from kubeop.webhook.threads import HandlerThreads, Saturated

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


async def settle(threads: HandlerThreads, stuck: int) -> None:
    for _ in range(500):
        if threads.stuck == stuck:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{threads.stuck} stuck calls, expected {stuck}")


async def test_calls_run_on_daemon_threads_with_the_callers_context() -> None:
    threads = HandlerThreads(2)
    WHO.set("caller")

    def where() -> tuple[str, bool, str]:
        current = threading.current_thread()
        return WHO.get(), current.daemon, current.name

    assert await threads.run(where) == ("caller", True, "kubeop-webhook")
    with pytest.raises(ZeroDivisionError):
        await threads.run(lambda: 1 / 0)
    with pytest.raises(ValueError, match="at least one thread"):
        HandlerThreads(0)


async def test_at_most_size_calls_run_at_once_and_the_rest_wait_their_turn() -> None:
    threads = HandlerThreads(2)
    running, peak, lock = [0], [0], threading.Lock()
    gate = threading.Event()

    def work() -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        gate.wait(5)
        with lock:
            running[0] -= 1
        return 1

    calls = [asyncio.create_task(threads.run(work)) for _ in range(6)]
    await asyncio.sleep(0.1)
    gate.set()
    assert sum(await asyncio.gather(*calls)) == 6 and peak[0] == 2


async def test_a_call_cancelled_before_it_starts_never_runs() -> None:
    threads = HandlerThreads(1)
    gate, ran = threading.Event(), []
    first = asyncio.create_task(threads.run(gate.wait, 5))
    await asyncio.sleep(0.05)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.05):
            await threads.run(ran.append, "second")
    assert threads.stuck == 0  # it never had a thread
    gate.set()
    assert await first is True
    await threads.run(ran.append, "third")
    assert ran == ["third"]


async def test_stuck_calls_are_counted_until_they_return_and_saturate_at_size() -> None:
    threads = HandlerThreads(2)
    gate = threading.Event()
    try:
        for _ in range(2):
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.05):
                    await threads.run(gate.wait, 5)
        assert threads.stuck == 2
        with pytest.raises(Saturated, match="2 calls still running past their deadline") as refused:
            await threads.run(lambda: None)
        assert refused.value.stuck == 2
    finally:
        gate.set()
    await settle(threads, 0)
    assert await threads.run(lambda: "free again") == "free again"


class Decoded:
    """Stands for a review's decoded objects (megabytes of them, for a large review)."""


async def _dropped(threads: HandlerThreads, arg: Decoded) -> None:
    try:
        async with asyncio.timeout(0.05):
            await threads.run(lambda obj: obj, arg)
    except TimeoutError:
        pass


async def test_a_call_cancelled_before_it_starts_lets_go_of_its_arguments_at_once() -> None:
    """Not once a thread frees up: a stuck thread would pin every dropped call's objects."""
    threads = HandlerThreads(1)
    gate = threading.Event()
    first = asyncio.create_task(threads.run(gate.wait, 5))
    try:
        await asyncio.sleep(0.05)
        arg = Decoded()
        ref = weakref.ref(arg)
        await _dropped(threads, arg)
        del arg
        await asyncio.sleep(0.05)  # the loop's own references to the cancelled call go
        gc.collect()
        assert ref() is None, "the queue still holds a dropped call's arguments"
    finally:
        gate.set()
    assert await first is True
    assert await threads.run(lambda: "next") == "next"
