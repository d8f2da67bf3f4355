"""Clocks: FakeClock ordering and cancellation; LoopClock inside and outside a loop."""

from __future__ import annotations

import asyncio
import time

import pytest

from kubeop.queue import FakeClock, LoopClock


def test_fake_clock_fires_in_order_at_the_due_time() -> None:
    clock = FakeClock(10.0)
    fired: list[tuple[str, float]] = []
    clock.call_later(2, lambda: fired.append(("b", clock.now())))
    clock.call_later(1, lambda: fired.append(("a", clock.now())))
    clock.call_later(2, lambda: fired.append(("c", clock.now())))
    assert clock.next_due() == 11.0
    clock.advance(5)
    assert fired == [("a", 11.0), ("b", 12.0), ("c", 12.0)]
    assert clock.now() == 15.0
    assert clock.next_due() is None


def test_fake_clock_cancel_and_nested_timers() -> None:
    clock = FakeClock()
    fired: list[str] = []
    handle = clock.call_later(1, lambda: fired.append("cancelled"))
    handle.cancel()
    clock.call_later(1, lambda: clock.call_later(1, lambda: fired.append("nested")))
    assert clock.pending == 1
    clock.advance(3)
    assert fired == ["nested"]
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_loop_clock_outside_a_loop_is_monotonic() -> None:
    before = time.monotonic()
    assert LoopClock().now() >= before


async def test_loop_clock_uses_the_loop() -> None:
    loop = asyncio.get_running_loop()
    clock = LoopClock()
    assert abs(clock.now() - loop.time()) < 1
    fired = asyncio.Event()
    clock.call_later(0.001, fired.set)
    await asyncio.wait_for(fired.wait(), 1)
