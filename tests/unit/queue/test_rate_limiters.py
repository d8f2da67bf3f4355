"""Rate limiters: the exact delay sequences of client-go's default_rate_limiters.go."""

from __future__ import annotations

import math

import pytest

from kubeop.queue import (
    BucketRateLimiter,
    FakeClock,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
)


def test_exponential_doubles_per_item_and_forget_resets() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.001, 1.0)
    assert [limiter.when("one") for _ in range(5)] == [0.001, 0.002, 0.004, 0.008, 0.016]
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two") for _ in range(2)] == [0.001, 0.002]
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 0.001
    limiter.forget("never-seen")


def test_exponential_defaults_cap_at_1000_seconds() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter()
    delays = [limiter.when("x") for _ in range(25)]
    assert delays[:4] == [0.005, 0.01, 0.02, 0.04]
    assert delays[17] == 0.005 * 2**17  # 655.36 s, the last doubling under the cap
    assert delays[18:] == [1000.0] * 7


def test_exponential_survives_huge_failure_counts() -> None:
    limiter: ItemExponentialFailureRateLimiter[str] = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    for _ in range(2000):
        delay = limiter.when("x")
    assert delay == 1000.0
    assert limiter.num_requeues("x") == 2000


def test_fast_slow() -> None:
    limiter: ItemFastSlowRateLimiter[str] = ItemFastSlowRateLimiter(0.005, 10.0, 3)
    assert [limiter.when("one") for _ in range(5)] == [0.005, 0.005, 0.005, 10.0, 10.0]
    assert limiter.num_requeues("one") == 5
    assert limiter.when("two") == 0.005
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 0.005


def test_bucket_burst_then_spacing() -> None:
    clock = FakeClock()
    limiter: BucketRateLimiter[str] = BucketRateLimiter(10, 100, clock=clock.now)
    assert [limiter.when("x") for _ in range(100)] == [0.0] * 100
    # Each further call at the same instant reserves the next future token.
    assert [limiter.when("x") for _ in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    # 0.3 s later the three reserved tokens are paid for: the next one is 0.1 s away again.
    clock.advance(0.3)
    assert limiter.when("x") == pytest.approx(0.1)
    assert limiter.num_requeues("x") == 0
    limiter.forget("x")


def test_bucket_refills_up_to_burst_only() -> None:
    clock = FakeClock()
    limiter: BucketRateLimiter[str] = BucketRateLimiter(1, 2, clock=clock.now)
    assert [limiter.when("x") for _ in range(3)] == [0.0, 0.0, 1.0]
    clock.advance(100)  # far more than needed: refills to 2 tokens, not 99
    assert [limiter.when("x") for _ in range(3)] == [0.0, 0.0, 1.0]


def test_bucket_without_limit_and_bad_arguments() -> None:
    limiter: BucketRateLimiter[str] = BucketRateLimiter(math.inf, 1)
    assert [limiter.when("x") for _ in range(10)] == [0.0] * 10
    with pytest.raises(ValueError):
        BucketRateLimiter(0, 1)
    with pytest.raises(ValueError):
        BucketRateLimiter(1, 0)


def test_max_of_returns_the_worst_and_asks_everyone() -> None:
    limiter: MaxOfRateLimiter[str] = MaxOfRateLimiter(
        ItemFastSlowRateLimiter(0.005, 3.0, 3),
        ItemExponentialFailureRateLimiter(0.001, 1.0),
    )
    assert [limiter.when("one") for _ in range(5)] == [0.005, 0.005, 0.005, 3.0, 3.0]
    assert limiter.num_requeues("one") == 5
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 0.005
    assert MaxOfRateLimiter[str]().when("x") == 0.0
    assert MaxOfRateLimiter[str]().num_requeues("x") == 0


def test_with_max_wait() -> None:
    limiter: WithMaxWaitRateLimiter[str] = WithMaxWaitRateLimiter(
        ItemExponentialFailureRateLimiter(1.0, 1000.0), 3.0
    )
    assert [limiter.when("x") for _ in range(4)] == [1.0, 2.0, 3.0, 3.0]
    assert limiter.num_requeues("x") == 4
    limiter.forget("x")
    assert limiter.num_requeues("x") == 0


def test_default_controller_rate_limiter() -> None:
    clock = FakeClock()
    limiter: MaxOfRateLimiter[str] = default_controller_rate_limiter(clock=clock.now)
    # Per item: exponential from 5 ms.
    assert [limiter.when("a") for _ in range(3)] == [0.005, 0.01, 0.02]
    # Overall: 3 tokens used; 97 more retries of other items go through at the per-item delay...
    assert {limiter.when(f"k{i}") for i in range(97)} == {0.005}
    # ...and then the bucket is empty and paces retries at 10 per second.
    assert limiter.when("b") == pytest.approx(0.1)
    assert limiter.when("c") == pytest.approx(0.2)
    assert limiter.num_requeues("a") == 3
    limiter.forget("a")
    assert limiter.when("a") == pytest.approx(0.3)  # exponential reset, bucket still empty


def test_limiters_satisfy_the_protocol() -> None:
    limiters: list[RateLimiter[str]] = [
        ItemExponentialFailureRateLimiter(),
        ItemFastSlowRateLimiter(0.1, 1.0, 1),
        BucketRateLimiter(),
        MaxOfRateLimiter(),
        WithMaxWaitRateLimiter(BucketRateLimiter(), 1.0),
        default_controller_rate_limiter(),
    ]
    for limiter in limiters:
        assert limiter.when("x") >= 0.0
