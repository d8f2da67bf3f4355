"""Backoff values (client-go's reflector) and the shared server probe that ends waits early."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from kubeop.cache import Backoff, BackoffConfig, ServerProbe, probe_for


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_delays_double_from_800ms_to_30s() -> None:
    backoff = Backoff(BackoffConfig(jitter=0.0), clock=Clock())
    assert [backoff.next_delay() for _ in range(8)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]


def test_jitter_stretches_each_delay_by_up_to_double() -> None:
    backoff = Backoff(rng=random.Random(7), clock=Clock())
    for base in (0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0):
        assert base <= backoff.next_delay() < 2 * base


def test_reset_after_two_healthy_minutes_only() -> None:
    clock = Clock()
    backoff = Backoff(BackoffConfig(jitter=0.0), clock=clock)
    backoff.next_delay()
    backoff.next_delay()
    clock.now += 119
    assert backoff.next_delay() == 3.2  # failures kept coming: no reset
    clock.now += 121
    assert backoff.next_delay() == 0.8
    backoff.next_delay()
    backoff.reset()
    assert backoff.next_delay() == 0.8


def test_bad_config_is_rejected() -> None:
    with pytest.raises(ValueError):
        BackoffConfig(initial=0)
    with pytest.raises(ValueError):
        BackoffConfig(initial=5, cap=1)


class Server:
    def __init__(self) -> None:
        self.up = True
        self.checks = 0

    async def check(self) -> bool:
        self.checks += 1
        return self.up


async def test_a_server_that_comes_back_releases_every_waiter_at_once() -> None:
    server = Server()
    server.up = False
    probe = ServerProbe(server.check, interval=0.01, spread=0.0)
    waits = [asyncio.create_task(probe.wait(30)) for _ in range(20)]
    await asyncio.sleep(0.05)
    started = time.monotonic()
    server.up = True
    assert await asyncio.wait_for(asyncio.gather(*waits), 1) == [True] * 20
    assert time.monotonic() - started < 0.2
    checks = server.checks
    assert checks < 40  # one probe for all waiters, every 10 ms
    await asyncio.sleep(0.05)
    assert server.checks == checks  # nobody waits: no probing
    assert probe._task is None  # and no task left behind


async def test_a_server_that_never_went_down_releases_nobody_early() -> None:
    server = Server()
    probe = ServerProbe(server.check, interval=0.01, spread=0.0)
    started = time.monotonic()
    assert await probe.wait(0.1) is False
    assert time.monotonic() - started >= 0.1
    assert await probe.wait(0) is False


async def test_a_server_seen_down_before_the_wait_releases_at_the_first_ready_check() -> None:
    server = Server()
    server.up = False
    probe = ServerProbe(server.check, interval=0.01, spread=0.0)
    assert await probe.wait(0.03) is False  # down all along
    server.up = True  # back while the watcher was busy failing its next attempt
    started = time.monotonic()
    assert await probe.wait(30) is True
    assert time.monotonic() - started < 0.1
    assert await probe.wait(0.05) is False  # seen up since: no more early releases
    forgetful = ServerProbe(server.check, interval=0.01, spread=0.0, memory=0.0)
    server.up = False
    await forgetful.wait(0.03)
    server.up = True
    assert await forgetful.wait(0.05) is False


async def test_a_failing_check_counts_as_down() -> None:
    calls = 0

    async def check() -> bool:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ConnectionError("refused")
        return True

    probe = ServerProbe(check, interval=0.01, spread=0.0)
    assert await asyncio.wait_for(probe.wait(30), 1) is True
    await probe.close()


async def test_released_waiters_are_spread_out() -> None:
    server = Server()
    server.up = False
    probe = ServerProbe(server.check, interval=0.01, spread=0.05, rng=random.Random(1))
    released: list[float] = []

    async def wait() -> None:
        await probe.wait(30)
        released.append(time.monotonic())

    waits = [asyncio.create_task(wait()) for _ in range(10)]
    await asyncio.sleep(0.03)
    server.up = True
    await asyncio.wait_for(asyncio.gather(*waits), 1)
    assert max(released) - min(released) > 0.005


async def test_one_probe_per_client() -> None:
    class Transport:
        def __init__(self) -> None:
            self.calls = 0

        async def probe(self, path: str) -> int:
            self.calls += 1
            return 200 if self.calls > 1 else 503

    class FakeClient:
        def __init__(self) -> None:
            self.transport = Transport()

    a, b = FakeClient(), FakeClient()
    assert probe_for(a) is probe_for(a)
    assert probe_for(a) is not probe_for(b)
    probe = probe_for(a)
    probe.interval = 0.01
    assert await asyncio.wait_for(probe.wait(30), 1) is True
    assert a.transport.calls == 2


class _Transport:
    def __init__(self) -> None:
        self.calls = 0

    async def probe(self, path: str) -> int:
        self.calls += 1
        return 200 if self.calls > 1 else 503


class _Client:
    def __init__(self) -> None:
        self.transport = _Transport()


async def test_for_client_makes_a_new_probe_each_time_and_reads_readyz() -> None:
    client = _Client()
    probe = ServerProbe.for_client(client, interval=0.01, spread=0.0)
    assert ServerProbe.for_client(client) is not probe  # no registry: the builder shares it
    assert await asyncio.wait_for(probe.wait(30), 1) is True
    assert client.transport.calls == 2


def test_probe_for_is_deprecated() -> None:
    with pytest.warns(DeprecationWarning, match="ServerProbe.for_client"):
        probe_for(_Client())


def test_the_factory_shares_its_probe_with_every_informer_and_takes_one_given() -> None:
    from typing import Any, cast

    from kubeop.cache import SharedInformerFactory
    from kubeop.testing import FakeCluster

    client = FakeCluster().client()
    factory = SharedInformerFactory(client)
    informers = [factory.informer("configmaps"), factory.informer("secrets", namespace="x")]
    assert all(cast(Any, i.watcher.source).probe is factory.probe for i in informers)
    given = ServerProbe.for_client(client)
    assert SharedInformerFactory(client, probe=given).probe is given
    assert SharedInformerFactory(client).probe is not factory.probe
