"""An API server outage in the middle of converging: nothing is lost, and the controller is back
at work promptly once the server returns (its own control plane: the shared one is not killed)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kubeop.controller import Context, Controller, Request, label_selector, set_controller_reference
from kubeop.core.resource import ApiResource
from kubeop.manager import Manager, Serving
from kubeop.testing import ControlPlane

from .conftest import client_for, running

pytestmark = pytest.mark.controlplane
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
N = 60
# The brief's scenario: kube-apiserver killed mid-converge and back 5 s later.
OUTAGE = 5.0


@pytest.fixture(scope="module")
def own_plane() -> Iterator[ControlPlane]:
    with ControlPlane(full=False) as cp:
        yield cp


async def test_apiserver_restart_mid_converge_loses_nothing_and_recovers_fast(
    own_plane: ControlPlane,
) -> None:
    cp = own_plane
    cp.create_namespace("faults")

    async def reconcile(req: Request, ctx: Context) -> None:
        src = await ctx.client.get(CONFIGMAPS, req.name, namespace=req.namespace)
        if src is None:
            return
        await asyncio.sleep(0.05)  # a reconcile that takes a while: some are in flight at the kill
        copy: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{req.name}-copy", "namespace": req.namespace},
            "data": dict(src.get("data") or {}),
        }
        set_controller_reference(src, copy)
        await ctx.client.create_or_update(copy)

    async with client_for(cp.kubeconfig_path) as client:
        manager = Manager(client, name="copier", serving=Serving(metrics_address=None, health_address=None))
        manager.add(
            Controller.for_(CONFIGMAPS, label_selector("role=source"), namespace="faults")
            .max_concurrent(4)
            .reconcile(reconcile)
        )
        async with running(manager):
            for i in range(N):
                await client.create(
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {
                            "name": f"s{i:03d}",
                            "namespace": "faults",
                            "labels": {"role": "source"},
                        },
                        "data": {"i": str(i)},
                    }
                )
            await asyncio.sleep(0.3)  # some copies exist, most do not
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, cp.stop_apiserver)
            await asyncio.sleep(OUTAGE)
            await loop.run_in_executor(None, cp.start_apiserver)
            back = time.monotonic()
            while True:
                try:
                    copies = await client.list(CONFIGMAPS, namespace="faults")
                    names = {c["metadata"]["name"] for c in copies.items}
                    if all(f"s{i:03d}-copy" in names for i in range(N)):
                        break
                except Exception:
                    pass
                assert time.monotonic() - back < 30, "did not converge after the API server returned"
                await asyncio.sleep(0.1)
            took = time.monotonic() - back
            for c in copies.items:
                if c["metadata"]["name"].endswith("-copy"):
                    assert c["data"]["i"] == c["metadata"]["name"][1:4].lstrip("0") or c["data"]["i"] == "0"
    # The requirement is convergence within 3 s of the server's return (bench/operator measures it);
    # the test allows slack for a loaded machine.
    assert took < 6, f"converged {took:.1f} s after the API server returned"
