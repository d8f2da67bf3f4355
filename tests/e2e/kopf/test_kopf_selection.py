"""kopf's resource selectors on the real control plane, through ``kopf.operator()`` as a kopf
operator runs: ``('v1', 'Secret')`` (the core group by version and kind), a CRD's short name and
its category each handle real objects (discovery resolves them at start, as kopf does)."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import pytest

import kubeop.kopf as kopf
from kubeop.testing import ControlPlane
from tests.support.crds import widget_crd

pytestmark = pytest.mark.controlplane

GROUP = "selection.kopf.kubeop.dev"
CRD = copy.deepcopy(widget_crd(GROUP, plural="selwidgets", kind="SelWidget", free_spec=True))
CRD["spec"]["names"].update(shortNames=["selw"], categories=["kubeop-selection"])


async def test_v1_kind_short_name_and_category_handle_real_objects(
    control_plane: ControlPlane, namespace: str, kubeconfig_path: str, monkeypatch: Any
) -> None:
    monkeypatch.setenv("KUBECONFIG", kubeconfig_path)
    control_plane.install_crds([CRD])
    handled: list[tuple[str, str]] = []
    reg = kopf.Registry()

    @kopf.on.create("v1", "Secret", labels={"kopf-selection": "yes"}, registry=reg)
    def secret(name: str, **_: Any) -> None:
        handled.append(("secret", name))

    @kopf.on.create("selw", registry=reg)
    def by_short_name(name: str, **_: Any) -> None:
        handled.append(("short name", name))

    @kopf.on.event(category="kubeop-selection", registry=reg)
    def by_category(name: str, type: str | None, **_: Any) -> None:
        if type in (None, "ADDED"):
            handled.append(("category", name))

    stop, ready = asyncio.Event(), asyncio.Event()
    running = asyncio.create_task(
        kopf.operator(registry=reg, namespaces=[namespace], stop_flag=stop, ready_flag=ready)
    )
    try:
        await asyncio.wait_for(ready.wait(), 30)
        control_plane.api.call(
            "POST",
            f"/api/v1/namespaces/{namespace}/secrets",
            {"metadata": {"name": "s1", "labels": {"kopf-selection": "yes"}}},
        )
        control_plane.api.call(
            "POST",
            f"/apis/{GROUP}/v1/namespaces/{namespace}/selwidgets",
            {"apiVersion": f"{GROUP}/v1", "kind": "SelWidget", "metadata": {"name": "w1"}, "spec": {}},
        )
        expected = {("secret", "s1"), ("short name", "w1"), ("category", "w1")}
        deadline = time.monotonic() + 30
        while not expected <= set(handled):
            assert not running.done(), running.result()
            assert time.monotonic() < deadline, f"handled {handled}, expected {sorted(expected)}"
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        assert sorted(handled) == sorted(expected)  # each once
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)
