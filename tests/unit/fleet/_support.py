"""What the fleet tests share (and tests/unit/kopf/test_kopf_fleet.py): FakeCluster providers, a
recorder of what a provider asks of the fleet, and bounded waits."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from kubeop.client import Client, ClientConfig
from kubeop.controller import Context, Controller, Request
from kubeop.core.resource import ApiResource
from kubeop.fleet import Engagement, KubeconfigSecrets
from kubeop.testing import FakeCluster

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
BOUND = 10.0


def configmap(name: str, data: dict[str, str] | None = None) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": data or {},
    }


async def create(fake: FakeCluster, *objects: Mapping[str, Any]) -> None:
    """Create ``objects`` in ``fake``, in order."""
    async with fake.client() as api:
        for obj in objects:
            await api.create(dict(obj))


def labeller(seen: list[tuple[str, str]]) -> Controller:
    """Marks each ConfigMap with the cluster that reconciled it (through its own client)."""

    async def reconcile(req: Request, ctx: Context) -> None:
        seen.append((req.cluster, req.name))
        obj = await ctx.client.get(CM, req.name, namespace=req.namespace)
        if obj is None or (obj.get("data") or {}).get("cluster") == req.cluster:
            return
        await ctx.client.patch(CM, req.name, {"data": {"cluster": req.cluster}}, namespace=req.namespace)

    return Controller.for_(CM).named("labeller").reconcile(reconcile)


async def until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(BOUND):
        while not check():  # noqa: ASYNC110 - what is checked has no event to await
            await asyncio.sleep(0.005)


@contextlib.asynccontextmanager
async def in_background(start: Callable[[asyncio.Event], Awaitable[None]]) -> AsyncIterator[asyncio.Event]:
    """Run ``start(stop)`` as a task for the block (yields ``stop``); at its end, set ``stop`` and
    wait (bounded) for the run to return."""
    stop = asyncio.Event()
    run = asyncio.ensure_future(start(stop))
    try:
        yield stop
    finally:
        stop.set()
        await asyncio.wait_for(run, BOUND)


class Fakes:
    """A provider engaging FakeClusters, and the test's handle to engage more or disengage."""

    name = "fakes"

    def __init__(self, clusters: dict[str, FakeCluster]) -> None:
        self.clusters = clusters
        self.fleet: Engagement | None = None

    async def run(self, fleet: Engagement, stop: asyncio.Event) -> None:
        self.fleet = fleet
        for name, fake in self.clusters.items():
            await self.engage(name, fake)
        await stop.wait()

    async def engage(self, name: str, fake: FakeCluster, namespace: str = "default") -> None:
        assert self.fleet is not None
        transport = fake.transport(namespace=namespace)
        await self.fleet.engage(name, transport.config, connect=lambda: fake.client(namespace=namespace))


class Engaged:
    """Records what a provider asks of the fleet: ``("engage", name)`` and ``("disengage", name)``;
    with ``servers``, the engaged server too (``""`` for a disengage)."""

    def __init__(self, *, servers: bool = False) -> None:
        self.servers = servers
        self.log: list[tuple[str, ...]] = []
        self.changed = asyncio.Event()

    async def engage(self, name: str, config: ClientConfig, **_: Any) -> None:
        self.log.append(("engage", name, config.server) if self.servers else ("engage", name))
        self.changed.set()

    async def disengage(self, name: str) -> None:
        self.log.append(("disengage", name, "") if self.servers else ("disengage", name))
        self.changed.set()

    async def wait_for(self, n: int) -> None:
        async with asyncio.timeout(BOUND):
            while len(self.log) < n:
                self.changed.clear()
                await self.changed.wait()


@contextlib.asynccontextmanager
async def hub_secrets(fleet: Engaged) -> AsyncIterator[Client]:
    """The kubeconfig Secrets of namespace ``fleet`` in a FakeCluster hub engaging ``fleet``, run
    for the block: yields the hub's client (the namespace created), closed after the run."""
    api = FakeCluster().client(namespace="fleet")
    try:
        async with in_background(lambda stop: KubeconfigSecrets("fleet", hub=api).run(fleet, stop)):
            await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fleet"}})
            yield api
    finally:
        await api.close()
