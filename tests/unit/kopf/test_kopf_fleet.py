"""kopf's change handlers in a kubeop Fleet (kubeop's extension): they run per cluster, get the
cluster's name as the ``cluster`` kwarg (``""`` on one cluster), and keep their memos per
cluster even for objects of the same name. On kubeop.testing.FakeClusters; every wait bounded."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import kubeop.kopf as kopf
from kubeop.core.resource import ApiResource
from kubeop.fleet import Engagement, Fleet
from kubeop.kopf.running import build_manager, processors
from kubeop.testing import FakeCluster

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
BOUND = 10.0


async def until(check: Callable[[], bool]) -> None:
    async with asyncio.timeout(BOUND):
        while not check():  # noqa: ASYNC110 - what is checked has no event to await
            await asyncio.sleep(0.005)


class Fakes:
    name = "fakes"

    def __init__(self, clusters: dict[str, FakeCluster]) -> None:
        self.clusters = clusters

    async def run(self, fleet: Engagement, stop: asyncio.Event) -> None:
        for name, fake in self.clusters.items():
            transport = fake.transport(namespace="default")
            await fleet.engage(name, transport.config, connect=lambda f=fake: f.client(namespace="default"))
        await stop.wait()


async def test_kopf_handlers_run_per_cluster_with_the_cluster_kwarg() -> None:
    fakes = {n: FakeCluster() for n in ("east", "west")}
    for fake in fakes.values():
        async with fake.client() as api:
            await api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "same"}})
    reg = kopf.Registry()
    seen: list[tuple[str, str, int]] = []

    @kopf.on.create("configmaps", registry=reg, id="mark")
    async def mark(name: str, cluster: str, memo: Any, patch: kopf.Patch, **_: Any) -> None:
        seen.append((cluster, name, id(memo)))
        patch.setdefault("metadata", {}).setdefault("labels", {})["cluster"] = cluster

    manager = build_manager(registry=reg, client=FakeCluster().client())
    fleet = Fleet(Fakes(fakes), name="kopf-fleet")
    for controller in manager.controllers:
        fleet.add(controller)
    stop = asyncio.Event()
    run = asyncio.create_task(fleet.start(stop))
    try:
        await until(lambda: {c for c, _, _ in seen} == {"east", "west"})
        for name, fake in fakes.items():
            async with fake.client() as api:
                async with asyncio.timeout(BOUND):
                    while True:
                        obj = await api.get(CM, "same", namespace="default")
                        if (obj["metadata"].get("labels") or {}).get("cluster") == name:
                            break
                        await asyncio.sleep(0.01)
        # One object named "same" in each cluster: two memos, each handled once.
        assert sorted((c, n) for c, n, _ in seen) == [("east", "same"), ("west", "same")]
        assert len({m for _, _, m in seen}) == 2
    finally:
        stop.set()
        await asyncio.wait_for(run, BOUND)
        await asyncio.gather(*(p.stop_all() for p in processors(manager)))


async def test_on_one_cluster_the_cluster_kwarg_is_empty() -> None:
    from kubeop.kopf.processing import _kwargs

    kwargs = _kwargs(
        {"metadata": {"name": "x"}},
        kopf.Patch(),
        None,
        CM,
        {},
        None,
        None,
        (),  # type: ignore[arg-type]
    )
    assert kwargs["cluster"] == ""
