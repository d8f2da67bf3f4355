"""examples/fleet, the Widget fleet operator, as a process against three local control planes
(the session's and two minimal ones): every Widget in every cluster gets its ConfigMap, written
by that cluster's run (``data.cluster``); a change in one cluster converges there; /metrics
labels the controller's series with each cluster; SIGTERM stops it cleanly. Every wait bounded."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from examples.fleet.crd import CRD, sample

from kubeop.client import Client, load_kubeconfig
from kubeop.core.resource import ApiResource
from kubeop.testing import ControlPlane
from kubeop.testing.controlplane import free_port

pytestmark = pytest.mark.controlplane

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
WIDGETS = ApiResource("fleet.example.com", "v1", "widgets", kind="Widget")
BOUND = 60.0
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def planes(control_plane: ControlPlane) -> Iterator[dict[str, ControlPlane]]:
    """Three clusters, the Widget CRD installed in each."""
    with ControlPlane(full=False) as east, ControlPlane(full=False) as west:
        out = {"hub": control_plane, "east": east, "west": west}
        for cp in out.values():
            cp.install_crds([CRD])
        yield out


@pytest.fixture
async def clients(planes: dict[str, ControlPlane]) -> AsyncIterator[dict[str, Client]]:
    out = {name: Client(load_kubeconfig(cp.kubeconfig_path, qps=None)) for name, cp in planes.items()}
    yield out
    for c in out.values():
        await c.close()


@pytest.fixture
def operator(
    planes: dict[str, ControlPlane], tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = free_port()
    log = (tmp_path / "operator.log").open("wb")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO)]))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "examples.fleet",
            *(f"{name}={cp.kubeconfig_path}" for name, cp in planes.items()),
            "--metrics-bind-address",
            f"127.0.0.1:{port}",
        ],
        env=env,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        log.close()


async def config_map(api: Client, name: str, ns: str, want: dict[str, str]) -> None:
    async with asyncio.timeout(BOUND):
        while True:
            cm = await api.get_or_none(CM, name, namespace=ns)
            if cm is not None and all((cm.get("data") or {}).get(k) == v for k, v in want.items()):
                return
            await asyncio.sleep(0.1)


async def test_the_fleet_example_converges_widgets_in_three_clusters(
    clients: dict[str, Client], operator: tuple[subprocess.Popen[bytes], int]
) -> None:
    proc, port = operator
    ns = f"widgets-{secrets.token_hex(3)}"
    for api in clients.values():
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    t0 = time.monotonic()
    for name, api in clients.items():
        await api.create(sample("w", f"value-in-{name}", namespace=ns))
    for name, api in clients.items():
        await config_map(api, "w", ns, {"value": f"value-in-{name}", "cluster": name})
        async with asyncio.timeout(BOUND):
            while ((await api.get(WIDGETS, "w", namespace=ns)).get("status") or {}).get("cluster") != name:  # noqa: ASYNC110
                await asyncio.sleep(0.1)
    assert time.monotonic() - t0 < BOUND
    # A change in one cluster converges there; the others keep theirs.
    await clients["west"].patch(WIDGETS, "w", {"spec": {"value": "changed"}}, namespace=ns)
    await config_map(clients["west"], "w", ns, {"value": "changed", "cluster": "west"})
    await config_map(clients["east"], "w", ns, {"value": "value-in-east"})
    # The controller's series carry the cluster.
    text = await asyncio.to_thread(
        lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    )
    for name in clients:
        assert (
            f'controller_runtime_reconcile_total{{cluster="{name}",controller="widget",result="success"}}'
            in text
        )
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, 30) == 0
    for api in clients.values():
        await api.delete(ApiResource("", "v1", "namespaces", kind="Namespace", namespaced=False), ns)
