"""RateLimitingQueue: add_rate_limited waits as long as the limiter says."""

from __future__ import annotations

from kubeop.queue import (
    FakeClock,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimitingQueue,
)


def test_add_rate_limited_follows_the_limiter() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter(1.0, 1000.0), clock=clock)
    q.add_rate_limited("one")
    assert q.ready_at("one") == 1.0
    q.add_rate_limited("one")  # 2 s later than now: the earlier 1 s entry stays
    assert q.ready_at("one") == 1.0
    assert q.num_requeues("one") == 2
    clock.advance(1)
    assert q.get_nowait() == "one"
    q.done("one")
    q.add_rate_limited("one")
    assert q.ready_at("one") == 1.0 + 4.0
    q.forget("one")
    assert q.num_requeues("one") == 0
    q.add_rate_limited("two")
    q.add_rate_limited("one")
    assert q.ready_at("two") == 2.0
    assert q.ready_at("one") == 2.0  # forgotten: back to the base delay, earlier than 5.0


def test_the_default_limiter_is_the_controller_one() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    assert isinstance(q.rate_limiter, MaxOfRateLimiter)
    assert q.rate_limiter.when("x") == 0.005


def test_shutting_down_still_counts_the_failure() -> None:
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue(ItemExponentialFailureRateLimiter(), clock=clock)
    q.shut_down()
    q.add_rate_limited("x")
    assert q.num_requeues("x") == 1
    assert q.waiting == 0
