"""EventRecorder: one Event per distinct occurrence, repeats folded into a series, a per-object cap.

The recorder writes to a :class:`~kubeop.testing.FakeCluster`: its requests are checked by
what the client sent and by the Events the server holds (a series patch of an Event that was
never created would be a 404 here, as on a real server).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from kubeop.client import Client
from kubeop.controller import EventRecorder
from kubeop.core.resource import ApiResource
from kubeop.testing import FakeCluster
from kubeop.testing.fake import FakeTransport

from .fakes import app

EVENTS = ApiResource("events.k8s.io", "v1", "events", kind="Event")


@dataclass
class Api:
    """A client of a fake cluster and the requests it sent."""

    client: Client
    transport: FakeTransport

    def sent(self, method: str) -> list[Any]:
        return [r for r in self.transport.sent if r.method == method and "/events" in r.path]

    async def events(self) -> list[dict[str, Any]]:
        return list((await self.client.list(EVENTS, namespace="default")).items)


@pytest.fixture
async def api(fake_cluster: FakeCluster) -> AsyncIterator[Api]:
    transport = fake_cluster.transport()
    async with Client(transport=transport) as client:
        yield Api(client, transport)


async def test_repeats_become_one_series_patch(api: Api) -> None:
    rec = EventRecorder(api.client, "test-controller", series_interval=0.05)
    obj = app("a")
    for _ in range(10):
        rec.event(obj, "Warning", "Failed", "could not reach the database")
    await asyncio.sleep(0.15)
    await rec.flush()
    assert len(api.sent("POST")) == 1
    [event] = await api.events()
    assert event["regarding"]["uid"] == "uid-a" and event["reportingController"] == "test-controller"
    assert event["type"] == "Warning" and event["reason"] == "Failed" and event["action"] == "Failed"
    assert event["series"]["count"] == 10  # the last series patch, as the server stored it
    assert 1 <= len(api.sent("PATCH")) <= 2
    assert rec.written == 1 + len(api.sent("PATCH"))


async def test_distinct_events_per_object_are_capped(api: Api) -> None:
    rec = EventRecorder(api.client, "c", burst=3)
    for i in range(5):
        rec.event(app("a"), "Normal", "Step", f"step {i}")
    rec.event(app("b"), "Normal", "Step", "other object")
    await rec.flush()
    assert len(api.sent("POST")) == 4 and rec.dropped == 2
    notes = sorted((e["regarding"]["name"], e["note"]) for e in await api.events())
    assert notes == [("a", "step 0"), ("a", "step 1"), ("a", "step 2"), ("b", "other object")]


async def test_bad_type_is_rejected(api: Api) -> None:
    rec = EventRecorder(api.client, "c")
    with pytest.raises(ValueError, match="Normal"):
        rec.event(app("a"), "Error", "X", "y")
    await rec.flush()
    assert api.sent("POST") == []


async def test_old_series_and_budgets_are_forgotten(api: Api) -> None:
    rec = EventRecorder(api.client, "c", window=0.05)
    rec.event(app("a"), "Normal", "Once", "x")
    await rec.flush()
    await asyncio.sleep(0.1)
    for i in range(999):
        rec.event(app(f"o{i}"), "Normal", "Other", "y")
    await rec.flush()
    assert not any(key[0] == "uid-a" for key in rec._series) and "uid-a" not in rec._budget


async def test_tracked_reports_the_bookkeeping_sizes(api: Api) -> None:
    rec = EventRecorder(api.client, "c")
    assert rec.tracked == {"series": 0, "budgets": 0, "pending": 0}
    for i in range(3):
        rec.event(app(f"o{i}"), "Normal", "Synced", "ok")
    rec.event(app("o0"), "Normal", "Synced", "ok")  # a repeat: same series
    assert rec.tracked["series"] == 3 and rec.tracked["budgets"] == 3 and rec.tracked["pending"] >= 3
    await rec.flush()
    assert rec.tracked["pending"] == 0


async def test_the_bookkeeping_sizes_are_gauges(api: Api) -> None:
    from kubeop.cache import SharedInformerFactory
    from kubeop.controller import Metrics, ReconcilerClient

    rec = EventRecorder(api.client, "c")
    client = ReconcilerClient(api.client, SharedInformerFactory(api.client))
    metrics = Metrics()
    metrics.observe_bookkeeping(client, rec)
    rec.event(app("a"), "Normal", "Synced", "ok")
    client._ledger.remember(EVENTS, {"metadata": {"name": "k", "namespace": "default"}})
    sample = metrics.registry.get_sample_value
    assert sample("kubeop_event_recorder_tracked", {"kind": "series"}) == 1
    assert sample("kubeop_event_recorder_tracked", {"kind": "budgets"}) == 1
    assert sample("kubeop_reconciler_client_remembered_writes") == 1
    await rec.flush()
    assert sample("kubeop_event_recorder_tracked", {"kind": "pending"}) == 0
