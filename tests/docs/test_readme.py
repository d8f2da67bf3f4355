"""The README's operator runs as shown, against the local control plane.

The block is executed as a reader's module would be, except that ``Manager`` is one that starts
no metrics or probe server and whose ``run()`` hands the manager to the test instead of blocking
until SIGTERM. The test installs the block's ``Widget`` CRD, runs the manager, creates a Widget
and waits for the ConfigMap and the status the reconciler writes.
"""

from __future__ import annotations

import asyncio
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import kubeop
from kubeop.client import Client
from kubeop.crd import crd_manifest
from kubeop.kinds import ConfigMap
from kubeop.testing import ControlPlane
from tests.docs.blocks import page_blocks

pytestmark = [pytest.mark.controlplane]

ROOT = Path(__file__).resolve().parents[2]
README_MODULE = "kubeop_readme"


def _operator_block() -> str:
    blocks = [b for b in page_blocks(ROOT / "README.md", root=ROOT) if b.lang == "python"]
    found = [b for b in blocks if "manager.run()" in b.code and "async def reconcile" in b.code]
    assert found, "README.md has no python block with a reconcile and manager.run()"
    return found[0].code


async def test_the_readme_operator_reconciles_a_widget(
    control_plane: ControlPlane, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[Any] = []

    class ReadmeManager(kubeop.Manager):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("metrics_address", None)
            kwargs.setdefault("health_address", None)
            super().__init__(*args, **kwargs)

        def run(self) -> None:
            started.append(self)

    monkeypatch.setattr(kubeop, "Manager", ReadmeManager)
    module = types.ModuleType(README_MODULE)  # pydantic resolves annotations through sys.modules
    monkeypatch.setitem(sys.modules, README_MODULE, module)
    monkeypatch.setenv("KUBECONFIG", control_plane.kubeconfig_path)
    exec(compile(_operator_block(), "README.md", "exec"), module.__dict__)
    assert len(started) == 1, "the README's block should call manager.run() once"
    widget_kind = module.__dict__["Widget"]
    control_plane.install_crds([crd_manifest(widget_kind)])

    stop = asyncio.Event()
    running = asyncio.create_task(started[0].start(stop))
    try:
        async with Client.from_kubeconfig(control_plane.kubeconfig_path) as client:
            widget = widget_kind.model_validate(
                {"metadata": {"name": "hello", "namespace": namespace}, "spec": {"value": "world"}}
            )
            await client.create(widget)
            for _ in range(300):
                cm = await client.get_or_none(ConfigMap, "hello", namespace=namespace)
                got = await client.get(widget_kind, "hello", namespace=namespace)
                if cm is not None and got.status is not None and got.status.observed_generation == 1:
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("no ConfigMap hello and observedGeneration 1 after 30 s")
            assert cm.data == {"value": "world"}
            (owner,) = cm.metadata.owner_references or []
            assert (owner.kind, owner.name, owner.uid) == ("Widget", "hello", got.metadata.uid)
    finally:
        stop.set()
        await running
