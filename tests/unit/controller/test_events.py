"""EventRecorder: one Event per distinct occurrence, repeats folded into a series, a per-object cap."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubeop.controller import EventRecorder

from .fakes import app


class Api:
    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str, Any]] = []

    async def create(self, body: dict[str, Any], **kw: Any) -> dict[str, Any]:
        self.created.append(body)
        return body

    async def patch(self, res: Any, name: str, body: Any, **kw: Any) -> dict[str, Any]:
        self.patched.append((name, body))
        return {}


async def test_repeats_become_one_series_patch() -> None:
    api = Api()
    rec = EventRecorder(api, "test-controller", series_interval=0.05)  # type: ignore[arg-type]
    obj = app("a")
    for _ in range(10):
        rec.event(obj, "Warning", "Failed", "could not reach the database")
    await asyncio.sleep(0.15)
    await rec.flush()
    assert len(api.created) == 1
    event = api.created[0]
    assert event["regarding"]["uid"] == "uid-a" and event["reportingController"] == "test-controller"
    assert event["type"] == "Warning" and event["reason"] == "Failed" and event["action"] == "Failed"
    assert api.patched and api.patched[-1][1]["series"]["count"] == 10
    assert len(api.patched) <= 2


async def test_distinct_events_per_object_are_capped() -> None:
    api = Api()
    rec = EventRecorder(api, "c", burst=3)  # type: ignore[arg-type]
    for i in range(5):
        rec.event(app("a"), "Normal", "Step", f"step {i}")
    rec.event(app("b"), "Normal", "Step", "other object")
    await rec.flush()
    assert len(api.created) == 4 and rec.dropped == 2


async def test_bad_type_is_rejected() -> None:
    rec = EventRecorder(Api(), "c")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Normal"):
        rec.event(app("a"), "Error", "X", "y")


async def test_old_series_and_budgets_are_forgotten() -> None:
    api = Api()
    rec = EventRecorder(api, "c", window=0.05)  # type: ignore[arg-type]
    rec.event(app("a"), "Normal", "Once", "x")
    await rec.flush()
    await asyncio.sleep(0.1)
    for i in range(999):
        rec.event(app(f"o{i}"), "Normal", "Other", "y")
    await rec.flush()
    assert not any(key[0] == "uid-a" for key in rec._series) and "uid-a" not in rec._budget


async def test_tracked_reports_the_bookkeeping_sizes() -> None:
    api = Api()
    rec = EventRecorder(api, "c")  # type: ignore[arg-type]
    assert rec.tracked == {"series": 0, "budgets": 0, "pending": 0}
    for i in range(3):
        rec.event(app(f"o{i}"), "Normal", "Synced", "ok")
    rec.event(app("o0"), "Normal", "Synced", "ok")  # a repeat: same series
    assert rec.tracked["series"] == 3 and rec.tracked["budgets"] == 3 and rec.tracked["pending"] >= 3
    await rec.flush()
    assert rec.tracked["pending"] == 0


async def test_the_bookkeeping_sizes_are_gauges() -> None:
    from kubeop.controller import Metrics, ReconcilerClient

    from .fakes import FakeFactory

    rec = EventRecorder(Api(), "c")  # type: ignore[arg-type]
    client = ReconcilerClient(Api(), FakeFactory())  # type: ignore[arg-type]
    metrics = Metrics()
    metrics.observe_bookkeeping(client, rec)
    rec.event(app("a"), "Normal", "Synced", "ok")
    client._recent[(object(), "k")] = {}  # type: ignore[index]
    sample = metrics.registry.get_sample_value
    assert sample("kubeop_event_recorder_tracked", {"kind": "series"}) == 1
    assert sample("kubeop_event_recorder_tracked", {"kind": "budgets"}) == 1
    assert sample("kubeop_reconciler_client_remembered_writes") == 1
    await rec.flush()
    assert sample("kubeop_event_recorder_tracked", {"kind": "pending"}) == 0
