"""Token bucket on a fake clock; retry decisions and delays."""

from __future__ import annotations

import asyncio
import random

import pytest

from kubeop.client.ratelimit import TokenBucket
from kubeop.client.retry import RetryPolicy, parse_retry_after


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


async def test_burst_then_qps() -> None:
    t = FakeTime()
    bucket = TokenBucket(qps=10, burst=3, clock=t.clock, sleep=t.sleep)
    waits = [await bucket.acquire() for _ in range(5)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert waits[3] == pytest.approx(0.1)
    assert waits[4] == pytest.approx(0.1)
    assert t.now == pytest.approx(0.2)


async def test_refills_up_to_burst_only() -> None:
    t = FakeTime()
    bucket = TokenBucket(qps=2, burst=2, clock=t.clock, sleep=t.sleep)
    await bucket.acquire()
    await bucket.acquire()
    t.now += 100  # idle for long: the bucket holds at most `burst` tokens
    assert bucket.tokens == 2
    assert [await bucket.acquire() for _ in range(3)] == [0.0, 0.0, pytest.approx(0.5)]


async def test_concurrent_waiters_are_spaced_by_reservation() -> None:
    t = FakeTime()
    bucket = TokenBucket(qps=4, burst=1, clock=t.clock, sleep=t.sleep)
    delays = [bucket.reserve() for _ in range(4)]
    assert delays == [0.0, pytest.approx(0.25), pytest.approx(0.5), pytest.approx(0.75)]


async def test_cancelled_waiter_returns_its_token() -> None:
    t = FakeTime()
    gate = asyncio.Event()

    async def blocking_sleep(_: float) -> None:
        await gate.wait()

    bucket = TokenBucket(qps=1, burst=1, clock=t.clock, sleep=blocking_sleep)
    await bucket.acquire()
    task = asyncio.create_task(bucket.acquire())
    await asyncio.sleep(0)
    assert bucket.tokens == pytest.approx(-1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert bucket.tokens == pytest.approx(0)


def test_try_acquire() -> None:
    t = FakeTime()
    bucket = TokenBucket(qps=1, burst=1, clock=t.clock, sleep=t.sleep)
    assert bucket.try_acquire() and not bucket.try_acquire()
    t.now += 1
    assert bucket.try_acquire()


def test_bad_parameters() -> None:
    with pytest.raises(ValueError):
        TokenBucket(0, 1)
    with pytest.raises(ValueError):
        TokenBucket(1, 0)


@pytest.mark.parametrize(
    ("status", "idempotent", "expected"),
    [
        (429, False, True),  # rejected before processing: safe for any method
        (429, True, True),
        (503, True, True),
        (503, False, False),  # a create that hit a 503 may have happened
        (500, True, True),
        (None, True, True),  # connection error on a read
        (None, False, False),
        (404, True, False),
        (409, True, False),
    ],
)
def test_should_retry(status: int | None, idempotent: bool, expected: bool) -> None:
    assert RetryPolicy().should_retry(1, status=status, idempotent=idempotent) is expected


def test_attempts_are_bounded() -> None:
    policy = RetryPolicy(max_attempts=3)
    assert policy.should_retry(2, status=429, idempotent=True)
    assert not policy.should_retry(3, status=429, idempotent=True)


def test_delay_honours_retry_after_and_caps() -> None:
    policy = RetryPolicy(base_delay=0.2, max_delay=5.0, random=random.Random(1))
    assert policy.delay(1, retry_after=2) == 2
    assert policy.delay(1, retry_after=60) == 5.0
    for attempt in range(1, 10):
        ceiling = min(5.0, 0.2 * 2 ** (attempt - 1))
        assert ceiling / 2 <= policy.delay(attempt) <= ceiling


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("3", 3.0),
        (" 1.5 ", 1.5),
        ("", None),
        (None, None),
        ("soon", None),
        ("-1", None),
        ("inf", None),
        ("nan", None),
        ("1e999", None),
    ],
)
def test_parse_retry_after(value: str | None, expected: float | None) -> None:
    assert parse_retry_after(value) == expected
