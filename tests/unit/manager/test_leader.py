"""LeaderElector against an in-memory Lease: holding, and knowing when it may have been replaced."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import pytest

from kubeop.controller import ReconcilerClient
from kubeop.core.errors import NotFound
from kubeop.manager import Manager
from kubeop.manager.leader import LeaderElector, LeadershipLost

from ..controller.fakes import CONFIGMAPS, FakeFactory


class LeaseApi:
    """One Lease in memory; every write bumps its resourceVersion."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.updates = 0

    async def get(self, res: Any, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        if self.lease is None:
            raise NotFound("no lease")
        return copy.deepcopy(self.lease)

    async def create(self, body: dict[str, Any], *, resource: Any) -> dict[str, Any]:
        self.rv += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)

    async def update(self, body: dict[str, Any], *, resource: Any) -> dict[str, Any]:
        self.rv += 1
        self.updates += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(self.lease)


def elector(api: LeaseApi) -> LeaderElector:
    return LeaderElector(
        api,  # type: ignore[arg-type]
        "op",
        "default",
        identity="me",
        lease_duration=1.0,
        renew_deadline=0.5,
        retry_period=0.1,
    )


async def test_a_leader_holds_while_it_renews() -> None:
    api = LeaseApi()
    le = elector(api)
    assert not le.holds()
    await le.acquire()
    assert le.is_leader and le.holds()
    holding = asyncio.create_task(le.hold())
    await asyncio.sleep(0.8)  # longer than the renew deadline: renewals keep it
    assert le.holds() and api.updates >= 5
    holding.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holding


async def test_a_leader_whose_loop_stalled_past_the_deadline_stops_before_renewing() -> None:
    """A paused process (SIGSTOP) or a blocked loop may have been replaced meanwhile: it must not
    act as the leader once it runs again, not even until its next renew attempt answers."""
    api = LeaseApi()
    le = elector(api)
    await le.acquire()
    holding = asyncio.create_task(le.hold())
    await asyncio.sleep(0.15)
    time.sleep(0.6)  # noqa: ASYNC251 - the event loop blocked for longer than the renew deadline
    assert not le.holds(), "a leader that has not renewed within the deadline must not write"
    updates = api.updates
    with pytest.raises(LeadershipLost):
        await holding
    assert api.updates == updates, "no renew attempt after the deadline passed"
    assert not le.is_leader


async def test_the_manager_fences_controller_writes_with_the_lease() -> None:
    class Writes:
        def __init__(self) -> None:
            self.created: list[str] = []

        async def create(self, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
            self.created.append(obj["metadata"]["name"])
            return dict(obj, metadata={**obj["metadata"], "resourceVersion": "1"})

    manager = Manager(name="t", leader_election=True, metrics_address=None, health_address=None)
    manager.elector = le = elector(LeaseApi())
    writes = Writes()
    client = ReconcilerClient(writes, FakeFactory())  # type: ignore[arg-type]
    client.write_guard = manager._fence
    client._resources[("v1", "ConfigMap")] = CONFIGMAPS
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
    with pytest.raises(LeadershipLost):
        await client.create(cm)  # not the leader yet
    await le.acquire()
    await client.create(cm)
    time.sleep(0.55)  # noqa: ASYNC251 - nothing renews within the deadline
    with pytest.raises(LeadershipLost):
        await client.create(cm)
    assert writes.created == ["c"]
