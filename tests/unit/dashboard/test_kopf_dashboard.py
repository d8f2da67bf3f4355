"""A kopf operator runs on the same Manager: its handlers' controller is on the dashboard (kopf
retries a failing handler itself, through its progress annotations: those retries are reconciles
that succeed, so they do not show as errors)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import pytest

import kubeop.kopf as kopf
from kubeop.kopf.running import build_manager
from kubeop.manager import Dashboard
from kubeop.testing import FakeCluster

from .test_manager_dashboard import _create, _get


async def test_a_kopf_operators_handlers_appear() -> None:
    reg = kopf.Registry()

    @kopf.on.create("configmaps", registry=reg, id="greet")
    def greet(name: str, **_: Any) -> None:
        if name == "bad":
            raise kopf.TemporaryError("bad is not ready yet", delay=30)

    fake = FakeCluster()
    await _create(fake, "good")
    await _create(fake, "bad")
    manager = build_manager(
        registry=reg, client=fake.client(), dashboard=Dashboard(address="127.0.0.1:0", refresh=0.1)
    )
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    try:
        deadline = time.monotonic() + 15
        rows: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not task.done():
            server = manager.dashboard_server
            if server is not None and server.port:
                page = orjson.loads((await _get(server.port, "/api/overview"))[1])
                rows = [c for c in page["controllers"] if c["reconciles_per_s"]]
                if rows:
                    break
            await asyncio.sleep(0.1)
        assert rows, "no kopf controller on the dashboard"
        assert [(c["name"], c["kind"]) for c in rows] == [("kopf-configmaps", "ConfigMap")]
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


def test_kubeop_run_dashboard_reaches_a_kopf_operators_manager(monkeypatch: pytest.MonkeyPatch) -> None:
    """``kubeop run --dashboard`` and ``python -m kubeop.kopf run`` meet in KUBEOP_DASHBOARD,
    which the Manager that ``kopf.run()`` builds reads (kopf's own CLI has no such flag)."""
    reg = kopf.Registry()

    @kopf.on.create("configmaps", registry=reg, id="greet")
    def greet(**_: Any) -> None:
        pass

    monkeypatch.setenv("KUBEOP_DASHBOARD", "127.0.0.1:9191")
    assert build_manager(registry=reg, client=FakeCluster().client()).dashboard == Dashboard(
        address="127.0.0.1:9191"
    )
    monkeypatch.setenv("KUBEOP_DASHBOARD", "1")
    assert build_manager(registry=reg, client=FakeCluster().client()).dashboard == Dashboard()
    monkeypatch.delenv("KUBEOP_DASHBOARD")
    assert build_manager(registry=reg, client=FakeCluster().client()).dashboard is None
