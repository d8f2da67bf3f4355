"""More open watches than the client has request slots: requests and leader election carry on
(issue 12, defect 1: with 100 watches open every other request used to wait and time out, and a
healthy leader lost its lease)."""

from __future__ import annotations

import asyncio
import time

import pytest

from kubeop.client import Client
from kubeop.core.resource import ApiResource
from kubeop.manager.leader import LeaderElector

pytestmark = pytest.mark.controlplane
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
WATCHES = 120  # the client's default max_connections is 100


async def test_watches_beyond_the_connection_cap_starve_nothing(client: Client, namespace: str) -> None:
    assert client.config.max_connections < WATCHES
    seen: list[asyncio.Event] = [asyncio.Event() for _ in range(WATCHES)]

    async def watch(i: int) -> None:
        async for event in client.watch(CONFIGMAPS, namespace=namespace, timeout_seconds=120):
            if event.object["metadata"].get("name") == "ping":
                seen[i].set()

    tasks = [asyncio.create_task(watch(i)) for i in range(WATCHES)]
    changes: list[bool] = []
    try:
        await asyncio.sleep(1.0)
        await client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ping", "namespace": namespace}}
        )
        try:
            async with asyncio.timeout(30):
                await asyncio.gather(*(e.wait() for e in seen))  # every watch is open and live
        except TimeoutError:
            failed = [t for t in tasks if t.done()]
            raise AssertionError(
                f"{sum(not e.is_set() for e in seen)} of {WATCHES} watches did not see the change; "
                f"ended: {[t.exception() for t in failed][:3]}"
            ) from None

        started = time.monotonic()
        got = await asyncio.gather(*(client.get(CONFIGMAPS, "ping", namespace=namespace) for _ in range(50)))
        assert len(got) == 50
        assert time.monotonic() - started < 5.0

        elector = LeaderElector(
            client,
            "many-watches",
            namespace,
            lease_duration=4.0,
            renew_deadline=3.0,
            retry_period=1.0,
            on_change=changes.append,
        )
        async with asyncio.timeout(10):
            await elector.acquire()
        holding = asyncio.create_task(elector.hold())
        await asyncio.sleep(6.0)  # two renew deadlines
        assert not holding.done(), f"leadership lost with {WATCHES} watches open: {holding!r}"
        holding.cancel()
        await asyncio.gather(holding, return_exceptions=True)
        assert changes == [True] or changes == [True, False]  # acquired; released on cancel only
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
