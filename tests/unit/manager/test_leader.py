"""LeaderElector against a Lease on a FakeCluster: holding, and knowing when it may have been replaced."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from kubeop.cache import SharedInformerFactory
from kubeop.client import Client
from kubeop.controller import ReconcilerClient, WritePolicy
from kubeop.core.resource import ApiResource
from kubeop.manager import Manager, Serving
from kubeop.manager.leader import LeaderElector, LeadershipLost
from kubeop.testing import FakeCluster
from kubeop.testing.fake import FakeTransport

from ..controller.fakes import CONFIGMAPS

LEASES = ApiResource("coordination.k8s.io", "v1", "leases", kind="Lease")


@dataclass
class LeaseClient:
    """A client of a fake cluster, and the Lease writes it sent."""

    cluster: FakeCluster
    client: Client
    transport: FakeTransport

    @property
    def updates(self) -> int:
        return sum(1 for r in self.transport.sent if r.method == "PUT" and "/leases/" in r.path)


@pytest.fixture
async def api() -> AsyncIterator[LeaseClient]:
    cluster = FakeCluster()
    transport = cluster.transport()
    async with Client(transport=transport) as client:
        yield LeaseClient(cluster, client, transport)


def elector(api: LeaseClient) -> LeaderElector:
    return LeaderElector(
        api.client,
        "op",
        "default",
        identity="me",
        lease_duration=1.0,
        renew_deadline=0.5,
        retry_period=0.1,
    )


async def test_a_leader_holds_while_it_renews(api: LeaseClient) -> None:
    le = elector(api)
    assert not le.holds()
    await le.acquire()
    assert le.is_leader and le.holds()
    holding = asyncio.create_task(le.hold())
    await asyncio.sleep(0.8)  # longer than the renew deadline: renewals keep it
    assert le.holds() and api.updates >= 5
    lease = await api.client.get(LEASES, "op", namespace="default")
    assert lease["spec"]["holderIdentity"] == "me"
    holding.cancel()
    with pytest.raises(asyncio.CancelledError):
        await holding


async def test_a_leader_whose_loop_stalled_past_the_deadline_stops_before_renewing(api: LeaseClient) -> None:
    """A paused process (SIGSTOP) or a blocked loop may have been replaced meanwhile: it must not
    act as the leader once it runs again, not even until its next renew attempt answers."""
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


async def test_the_manager_fences_controller_writes_with_the_lease(api: LeaseClient) -> None:
    manager = Manager(
        name="t", leader_election=True, serving=Serving(metrics_address=None, health_address=None)
    )
    manager.elector = le = elector(api)
    client = ReconcilerClient(
        api.client, SharedInformerFactory(api.client), policy=WritePolicy(guard=manager._fence)
    )
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
    with pytest.raises(LeadershipLost):
        await client.create(cm)  # not the leader yet
    await le.acquire()
    await client.create(cm)
    time.sleep(0.55)  # noqa: ASYNC251 - nothing renews within the deadline
    with pytest.raises(LeadershipLost):
        await client.create(cm)
    created = await api.client.list(CONFIGMAPS, namespace="default")
    assert [c["metadata"]["name"] for c in created.items] == ["c"]
