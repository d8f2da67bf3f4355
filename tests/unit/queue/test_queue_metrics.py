"""Metrics hooks: the values client-go's metrics_test.go expects, on a fake clock."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from kubeop.queue import (
    CounterMetric,
    DelayingQueue,
    FakeClock,
    GaugeMetric,
    HistogramMetric,
    NoopMetricsProvider,
    RateLimitingQueue,
    SettableGaugeMetric,
    WorkQueue,
)


@dataclass
class Metric:
    value: float = 0.0
    observations: list[float] = field(default_factory=list)

    def inc(self) -> None:
        self.value += 1

    def dec(self) -> None:
        self.value -= 1

    def set(self, value: float) -> None:
        self.value = value

    def observe(self, value: float) -> None:
        self.observations.append(value)


@dataclass
class Provider:
    names: list[str] = field(default_factory=list)
    depth: Metric = field(default_factory=Metric)
    adds: Metric = field(default_factory=Metric)
    latency: Metric = field(default_factory=Metric)
    duration: Metric = field(default_factory=Metric)
    unfinished: Metric = field(default_factory=Metric)
    longest: Metric = field(default_factory=Metric)
    retries: Metric = field(default_factory=Metric)

    def new_depth_metric(self, name: str) -> GaugeMetric:
        self.names.append(name)
        return self.depth

    def new_adds_metric(self, name: str) -> CounterMetric:
        return self.adds

    def new_latency_metric(self, name: str) -> HistogramMetric:
        return self.latency

    def new_work_duration_metric(self, name: str) -> HistogramMetric:
        return self.duration

    def new_unfinished_work_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self.unfinished

    def new_longest_running_processor_seconds_metric(self, name: str) -> SettableGaugeMetric:
        return self.longest

    def new_retries_metric(self, name: str) -> CounterMetric:
        return self.retries


def test_queue_metrics_like_client_go() -> None:
    provider = Provider()
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue("test", metrics=provider, clock=clock)
    assert provider.names == ["test"]

    q.add("foo")
    assert provider.adds.value == 1
    assert provider.depth.value == 1

    clock.advance(50e-6)
    item = q.get_nowait()
    assert provider.latency.observations == pytest.approx([50e-6])
    assert provider.depth.value == 0

    # Added back while processing; repeated adds are de-duplicated but the item counts in depth.
    for _ in range(5):
        q.add(item)
    assert provider.adds.value == 2
    assert provider.depth.value == 1

    clock.advance(25e-6)
    q.done(item)
    assert provider.duration.observations == pytest.approx([25e-6])
    assert provider.depth.value == 1

    item = q.get_nowait()
    assert provider.latency.observations[1] == pytest.approx(25e-6)

    # The unfinished-work gauges are refreshed every 0.5 s from the first get (at 50 us); the
    # item being processed now was taken at 75 us.
    clock.advance(0.5)
    assert provider.unfinished.value == pytest.approx(0.5 - 25e-6)
    assert provider.longest.value == pytest.approx(0.5 - 25e-6)

    q.done(item)
    assert provider.duration.observations[-1] == pytest.approx(0.5)
    clock.advance(0.5)
    assert provider.unfinished.value == 0.0
    assert provider.longest.value == 0.0

    q.shut_down()
    assert clock.pending == 0


def test_unfinished_work_sums_all_processors() -> None:
    provider = Provider()
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue("test", metrics=provider, clock=clock)
    q.add("a")
    q.get_nowait()
    clock.advance(0.25)
    q.add("b")
    q.get_nowait()
    clock.advance(0.25)  # the first refresh: "a" for 0.5 s, "b" for 0.25 s
    assert provider.unfinished.value == 0.75
    assert provider.longest.value == pytest.approx(0.5)


def test_retries_count_every_add_after() -> None:
    provider = Provider()
    clock = FakeClock()
    q: RateLimitingQueue[str] = RateLimitingQueue(name="test", metrics=provider, clock=clock)
    q.add_after("a", 0)
    q.add_after("b", 1)
    q.add_rate_limited("c")
    assert provider.retries.value == 3
    q.shut_down()
    q.add_after("d", 1)
    assert provider.retries.value == 3


def test_no_metrics_without_a_name_or_a_provider() -> None:
    provider = Provider()
    for q in (
        DelayingQueue[str](metrics=provider),
        DelayingQueue[str]("named"),
        DelayingQueue[str]("named", metrics=NoopMetricsProvider()),
    ):
        q.add("a")
        q.add_after("b", 0)
        assert q._metrics is None
        assert q._retries is None
    assert provider.names == []
    assert provider.adds.value == 0


def test_noop_provider_metrics_accept_everything() -> None:
    noop = NoopMetricsProvider()
    noop.new_depth_metric("x").inc()
    noop.new_depth_metric("x").dec()
    noop.new_adds_metric("x").inc()
    noop.new_latency_metric("x").observe(1.0)
    noop.new_work_duration_metric("x").observe(1.0)
    noop.new_unfinished_work_seconds_metric("x").set(1.0)
    noop.new_longest_running_processor_seconds_metric("x").set(1.0)
    noop.new_retries_metric("x").inc()


async def test_unfinished_work_on_the_loop_clock() -> None:
    provider = Provider()
    q: WorkQueue[str] = WorkQueue("test", metrics=provider)
    q.add("a")
    assert await q.get() == "a"
    assert q._unfinished_timer is not None
    q.shut_down()
    assert q._unfinished_timer is None
    await asyncio.sleep(0)
