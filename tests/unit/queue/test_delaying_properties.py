"""Property-based tests of delays: add_after, add_rate_limited and the token bucket, on a fake clock.

Delays are whole seconds (or powers of two), so clock arithmetic is exact and the tests can ask
for the exact time an item was added.
"""

from __future__ import annotations

import itertools
import math
from typing import Literal

from hypothesis import given, settings
from hypothesis import strategies as st

from kubeop.queue import (
    BucketRateLimiter,
    FakeClock,
    ItemExponentialFailureRateLimiter,
    RateLimitingQueue,
)

ITEMS = st.integers(min_value=0, max_value=4)

Op = tuple[Literal["after"], int, int] | tuple[Literal["advance"], int]
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("after"), ITEMS, st.integers(min_value=-1, max_value=8)),
        st.tuples(st.just("advance"), st.integers(min_value=0, max_value=4)),
    ),
    max_size=50,
)


class RecordingQueue(RateLimitingQueue[int]):
    """Records the clock time of every add, so a test can see when the timer added an item."""

    __slots__ = ("added",)

    def __init__(self, clock: FakeClock, base: float = 1.0) -> None:
        super().__init__(ItemExponentialFailureRateLimiter(base, 64.0), clock=clock)
        self.added: list[tuple[int, float]] = []

    def add(self, item: int) -> None:
        self.added.append((item, self._clock.now()))
        super().add(item)

    def take_all(self) -> list[int]:
        items = []
        while len(self):
            item = self.get_nowait()
            self.done(item)
            items.append(item)
        return items


@settings(max_examples=200, deadline=None)
@given(ops=OPS)
def test_add_after_adds_each_item_at_its_earliest_ready_time(ops: list[Op]) -> None:
    clock = FakeClock()
    q = RecordingQueue(clock)
    due: dict[int, tuple[float, int]] = {}  # item -> (earliest ready time, arrival order)
    seq = 0
    for op in ops:
        q.added.clear()
        if op[0] == "after":
            _, item, delay = op
            q.add_after(item, delay)
            if delay <= 0:
                assert q.take_all() == [item]
            elif item not in due or clock.now() + delay < due[item][0]:
                due[item] = (clock.now() + delay, seq)
                seq += 1
        else:
            clock.advance(op[1])
            fired = sorted((when, order, item) for item, (when, order) in due.items() if when <= clock.now())
            # Every due item is added exactly at its time, in time order, and handed out once.
            assert q.added == [(item, when) for when, _, item in fired]
            assert q.take_all() == [item for _, _, item in fired]
            for _, _, item in fired:
                del due[item]
        assert q.waiting == len(due)
        assert {item: q.ready_at(item) for item in due} == {item: when for item, (when, _) in due.items()}
        assert clock.pending <= 1, "one timer at most"
        assert (clock.pending == 1) == bool(due)
    q.shut_down()
    assert clock.pending == 0


RL_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("fail"), ITEMS),
        st.tuples(st.just("forget"), ITEMS),
        st.tuples(st.just("advance"), st.integers(min_value=0, max_value=20)),
    ),
    max_size=50,
)


@settings(max_examples=200, deadline=None)
@given(ops=RL_OPS)
def test_rate_limited_delays_follow_the_limiter(ops: list[tuple[str, int]]) -> None:
    clock = FakeClock()
    q = RecordingQueue(clock)
    failures: dict[int, int] = {}
    due: dict[int, float] = {}
    for name, value in ops:
        q.added.clear()
        if name == "fail":
            n = failures.get(value, 0)
            q.add_rate_limited(value)
            failures[value] = n + 1
            ready = clock.now() + min(2.0**n, 64.0)  # 1 s, 2 s, 4 s, ... capped at 64 s
            due[value] = min(due.get(value, math.inf), ready)
        elif name == "forget":
            q.forget(value)
            failures.pop(value, None)
        else:
            clock.advance(value)
            fired = {item: when for item, when in due.items() if when <= clock.now()}
            assert sorted(q.added) == sorted(fired.items())
            assert sorted(q.take_all()) == sorted(fired)
            for item in fired:
                del due[item]
        for item in range(5):
            assert q.num_requeues(item) == failures.get(item, 0)
            assert q.ready_at(item) == due.get(item)


@settings(max_examples=200, deadline=None)
@given(
    qps=st.sampled_from([1.0, 2.0, 10.0, 50.0]),
    burst=st.integers(min_value=1, max_value=20),
    steps=st.lists(
        st.tuples(st.integers(min_value=0, max_value=1000), st.integers(min_value=1, max_value=30)),
        max_size=20,
    ),
)
def test_token_bucket_never_exceeds_burst_plus_rate(
    qps: float, burst: int, steps: list[tuple[int, int]]
) -> None:
    """However calls arrive, reserved times never run ahead of ``burst + qps * elapsed``."""
    clock = FakeClock()
    limiter: BucketRateLimiter[str] = BucketRateLimiter(qps, burst, clock=clock.now)
    acts: list[float] = []
    for wait_ms, calls in steps:
        clock.advance(wait_ms / 1000)
        for _ in range(calls):
            delay = limiter.when("x")
            assert delay >= 0
            acts.append(clock.now() + delay)
    assert all(later >= earlier - 1e-9 for earlier, later in itertools.pairwise(acts))
    for i, act in enumerate(acts):
        # i + 1 tokens have been spent by time `act`; at most burst + qps * act were available.
        assert i + 1 <= burst + qps * act + 1e-6
