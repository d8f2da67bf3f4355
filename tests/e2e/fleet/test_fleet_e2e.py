"""A Fleet on three real control planes (the session's as the hub, two minimal ones of this
module's own): one operator process converges all three; a cluster whose kubeconfig Secret is
created in the hub is engaged and converged, and disengaged (its tasks gone) when the Secret is
deleted; one cluster's kube-apiserver killed for a while does not slow the others, and its
objects converge soon after it returns."""

from __future__ import annotations

import asyncio
import base64
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeop.client import Client, load_kubeconfig
from kubeop.controller import Context, Controller, Request
from kubeop.core.resource import ApiResource
from kubeop.fleet import Fleet, Kubeconfigs, KubeconfigSecrets
from kubeop.testing import ControlPlane

pytestmark = pytest.mark.controlplane

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
SECRETS = ApiResource("", "v1", "secrets", kind="Secret")
NAMESPACES = ApiResource("", "v1", "namespaces", kind="Namespace", namespaced=False)
BOUND = 60.0
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def members() -> Iterator[tuple[ControlPlane, ControlPlane]]:
    """Two etcd + kube-apiserver pairs for this module only (one gets its apiserver killed)."""
    with ControlPlane(full=False) as a, ControlPlane(full=False) as b:
        yield a, b


def inline_kubeconfig(cp: ControlPlane) -> str:
    """The admin kubeconfig of ``cp`` with its files inlined (what a kubeconfig Secret holds)."""
    cfg: dict[str, Any] = yaml.safe_load(Path(cp.kubeconfig_path).read_text())
    cluster = cfg["clusters"][0]["cluster"]
    cluster["certificate-authority-data"] = _b64(cluster.pop("certificate-authority"))
    user = cfg["users"][0]["user"]
    user["client-certificate-data"] = _b64(user.pop("client-certificate"))
    user["client-key-data"] = _b64(user.pop("client-key"))
    return yaml.safe_dump(cfg)


def _b64(path: str) -> str:
    return base64.b64encode(Path(path).read_bytes()).decode()


def marker() -> Controller:
    """Writes the reconciling cluster's name into each ConfigMap labelled fleet=yes."""

    async def reconcile(req: Request, ctx: Context) -> None:
        obj = await ctx.client.get(CM, req.name, namespace=req.namespace)
        if obj is None or (obj.get("data") or {}).get("cluster") == req.cluster:
            return
        await ctx.client.patch(CM, req.name, {"data": {"cluster": req.cluster}}, namespace=req.namespace)

    return Controller.for_(CM, label_selector="fleet=yes").named("marker").reconcile(reconcile)


def configmap(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {"fleet": "yes"}},
    }


async def converged(api: Client, name: str, namespace: str, cluster: str, bound: float = BOUND) -> float:
    """Seconds until ConfigMap ``name`` carries ``cluster`` (fails the test after ``bound``)."""
    t0 = time.monotonic()
    async with asyncio.timeout(bound):
        while True:
            obj = await api.get_or_none(CM, name, namespace=namespace)
            if obj is not None and (obj.get("data") or {}).get("cluster") == cluster:
                return time.monotonic() - t0
            await asyncio.sleep(0.05)


@pytest.fixture
async def clients(
    control_plane: ControlPlane, members: tuple[ControlPlane, ControlPlane]
) -> AsyncIterator[dict[str, Client]]:
    hub, (a, b) = control_plane, members
    out = {
        name: Client(load_kubeconfig(cp.kubeconfig_path, qps=None))
        for name, cp in (("hub", hub), ("east", a), ("west", b))
    }
    yield out
    for c in out.values():
        await c.close()


async def test_one_process_converges_three_clusters_and_follows_the_hubs_secrets(
    control_plane: ControlPlane, members: tuple[ControlPlane, ControlPlane], clients: dict[str, Client]
) -> None:
    a, b = members
    ns = f"fleet-{secrets.token_hex(3)}"
    for api in clients.values():
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    hub_config = load_kubeconfig(control_plane.kubeconfig_path, qps=None)
    fleet = Fleet(
        Kubeconfigs({"hub": hub_config, "east": a.kubeconfig_path}),
        KubeconfigSecrets(ns, hub=hub_config),
        name="fleet-e2e",
    )
    fleet.add(marker())
    stop = asyncio.Event()
    run = asyncio.create_task(fleet.start(stop))
    try:
        await fleet.wait_engaged("hub", BOUND)
        await fleet.wait_engaged("east", BOUND)
        for name in ("hub", "east"):
            await clients[name].create(configmap("one", ns))
            await converged(clients[name], "one", ns, name)
        assert "west" not in fleet.clusters
        tasks_before = len(asyncio.all_tasks())
        # A kubeconfig Secret for "west" in the hub engages it.
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": "west-kubeconfig",
                "namespace": ns,
                "labels": {"cluster.x-k8s.io/cluster-name": "west"},
            },
            "data": {"value": base64.b64encode(inline_kubeconfig(b).encode()).decode()},
        }
        await clients["hub"].create(secret)
        await fleet.wait_engaged("west", BOUND)
        await clients["west"].create(configmap("one", ns))
        await converged(clients["west"], "one", ns, "west")
        # Deleting it disengages "west": its watches and workers stop, nothing is left running.
        await clients["hub"].delete(SECRETS, "west-kubeconfig", namespace=ns)
        async with asyncio.timeout(BOUND):
            while "west" in fleet.clusters or len(asyncio.all_tasks()) > tasks_before:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        await clients["west"].create(configmap("two", ns))
        await clients["east"].create(configmap("two", ns))
        await converged(clients["east"], "two", ns, "east")
        await asyncio.sleep(0.5)
        unmarked = await clients["west"].get(CM, "two", namespace=ns)
        assert "cluster" not in (unmarked.get("data") or {})
    finally:
        stop.set()
        await asyncio.wait_for(run, BOUND)
    for api in clients.values():
        await api.delete(NAMESPACES, ns)


async def test_a_dead_cluster_does_not_slow_the_others_and_converges_when_it_returns(
    control_plane: ControlPlane, members: tuple[ControlPlane, ControlPlane], clients: dict[str, Client]
) -> None:
    a, b = members
    ns = f"fleet-{secrets.token_hex(3)}"
    for api in clients.values():
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    fleet = Fleet(
        Kubeconfigs(
            {
                "hub": load_kubeconfig(control_plane.kubeconfig_path, qps=None),
                "east": a.kubeconfig_path,
                "west": b.kubeconfig_path,
            }
        ),
        name="fleet-e2e",
    )
    fleet.add(marker())
    stop = asyncio.Event()
    run = asyncio.create_task(fleet.start(stop))
    try:
        for name in ("hub", "east", "west"):
            await fleet.wait_engaged(name, BOUND)
        b.stop_apiserver(kill=True)  # west's kube-apiserver SIGKILLed
        # While west is down, the other two still converge each change quickly.
        latencies = []
        for i in range(5):
            for name in ("hub", "east"):
                await clients[name].create(configmap(f"during-{i}", ns))
                latencies.append(await converged(clients[name], f"during-{i}", ns, name))
        assert max(latencies) < 2.0, latencies
        await asyncio.sleep(5)  # west stays down a while: its watches back off
        b.start_apiserver()
        t_back = time.monotonic()
        # A ConfigMap created right after it returns converges soon after.
        async with asyncio.timeout(BOUND):
            while True:
                try:
                    await clients["west"].create(configmap("after", ns))
                    break
                except Exception:
                    await asyncio.sleep(0.1)
        await converged(clients["west"], "after", ns, "west")
        back = time.monotonic() - t_back
        print(f"west converged {back:.2f} s after its apiserver was started again")
        assert back < 3.0
    finally:
        stop.set()
        await asyncio.wait_for(run, BOUND)


async def test_two_replicas_share_the_clusters_and_a_killed_ones_move_within_the_lease(
    control_plane: ControlPlane,
    members: tuple[ControlPlane, ControlPlane],
    clients: dict[str, Client],
    tmp_path: Path,
) -> None:
    """Six cluster names over the three control planes (two names per plane: each name is a
    cluster to the fleet), two replica processes. Every cluster's probe ConfigMap is written by
    exactly one replica at a time; SIGKILL one and its clusters are written by the other within
    lease_duration (3 s) + 2 s."""
    import os
    import signal
    import subprocess
    import sys

    a, b = members
    ns = f"fleet-{secrets.token_hex(3)}"
    for api in clients.values():
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        await api.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe", "namespace": ns}}
        )
    planes = {"hub": control_plane, "east": a, "west": b}
    names = {f"{plane}-{i}": cp.kubeconfig_path for plane, cp in planes.items() for i in (1, 2)}
    args = [f"{name}={path}" for name, path in names.items()]
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO}"}
    logs = tmp_path

    def spawn(identity: str) -> subprocess.Popen[bytes]:
        command = [
            sys.executable,
            "-m",
            "tests.e2e.fleet.replica",
            identity,
            ns,
            control_plane.kubeconfig_path,
        ]
        with open(logs / f"{identity}.log", "wb") as out:
            return subprocess.Popen(
                [*command, *args], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
            )

    def tail(identity: str) -> str:
        return (logs / f"{identity}.log").read_text(errors="replace")[-4000:]

    async def writers() -> dict[str, str]:
        """Each cluster name -> the replica whose mark is on its probe now."""
        out: dict[str, str] = {}
        for plane, api in clients.items():
            probe = await api.get(CM, "probe", namespace=ns)
            for key, value in ((probe.get("metadata") or {}).get("annotations") or {}).items():
                if key.startswith("fleet.kubeop.dev/") and key.split("/", 1)[1].startswith(plane):
                    out[key.split("/", 1)[1]] = value.split()[0]
        return out

    one, two = spawn("replica-1"), spawn("replica-2")
    try:
        # Both replicas settle into a split: every cluster marked, by both replicas between them.
        history: dict[str, list[str]] = {n: [] for n in names}
        async with asyncio.timeout(BOUND):
            while True:
                now = await writers()
                if set(now) == set(names) and set(now.values()) == {"replica-1", "replica-2"}:
                    break
                if one.poll() is not None or two.poll() is not None:
                    raise AssertionError(f"a replica exited: {tail('replica-1')}\n{tail('replica-2')}")
                await asyncio.sleep(0.2)
        # For a while, each cluster keeps one writer (no alternation: one replica at a time).
        for _ in range(15):
            for name, writer in (await writers()).items():
                if not history[name] or history[name][-1] != writer:
                    history[name].append(writer)
            await asyncio.sleep(0.2)
        assert all(len(h) == 1 for h in history.values()), history
        victims = {n for n, h in history.items() if h[-1] == "replica-1"}
        one.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        async with asyncio.timeout(BOUND):
            while True:
                now = await writers()
                if all(now.get(n) == "replica-2" for n in victims):
                    break
                await asyncio.sleep(0.1)
        moved = time.monotonic() - killed
        print(f"clusters of the killed replica written by the other {moved:.2f} s after SIGKILL")
        assert moved < 3.0 + 2.0 + 1.0, tail("replica-2")
    finally:
        for p in (one, two):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in (one, two):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        for api in clients.values():
            await api.delete(NAMESPACES, ns)
