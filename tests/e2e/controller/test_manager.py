"""Manager behaviour on the real control plane: leader election, metrics, probes, SIGTERM drain."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubeop.controller import Context, Controller, Request, label_selector
from kubeop.core.resource import ApiResource
from kubeop.manager import Manager, Runtime, Serving
from kubeop.testing import ControlPlane

from .conftest import client_for, eventually, running

pytestmark = pytest.mark.controlplane
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
OPERATOR = Path(__file__).parent / "_operator.py"


class Proc:
    """A subprocess operator whose output lines are collected by a thread."""

    def __init__(self, cp: ControlPlane, *args: str) -> None:
        env = dict(cp.env(), PYTHONPATH=os.pathsep.join(sys.path))
        self.popen = subprocess.Popen(
            [sys.executable, str(OPERATOR), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.times: dict[str, float] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            line = line.strip()
            self.lines.append(line)
            self.times.setdefault(line, time.monotonic())

    def said(self, text: str) -> bool:
        return any(text in line for line in self.lines)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)


def _configmap(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": "probe"}},
    }


async def test_only_the_leader_reconciles_and_a_killed_leader_is_replaced(
    control_plane: ControlPlane, namespace: str
) -> None:
    a = Proc(control_plane, namespace, "alpha", "--leader-election")
    b = Proc(control_plane, namespace, "beta", "--leader-election")
    try:
        async with client_for(control_plane.kubeconfig_path) as client:
            await eventually(lambda: _async(a.said("leading") or b.said("leading")), 30, "a leader")
            await asyncio.sleep(1.5)
            leader, follower = (a, b) if a.said("leading") else (b, a)
            assert not follower.said("leading"), "two leaders"
            lid = "alpha" if leader is a else "beta"
            await client.create(_configmap(namespace, "one"))

            async def annotated(name: str, who: str) -> bool:
                cm = await client.get(CONFIGMAPS, name, namespace=namespace)
                return bool((cm["metadata"].get("annotations") or {}).get("reconciled-by") == who)

            await eventually(lambda: annotated("one", lid), 20, "the leader's reconcile")
            assert not follower.said("reconciling"), "the follower reconciled"

            leader.kill(signal.SIGKILL)
            killed_at = time.monotonic()
            await eventually(lambda: _async(follower.said("leading")), 20, "the follower to take over")
            took = follower.times["leading"] - killed_at
            assert took <= 6 + 2, f"takeover took {took:.1f} s (lease 6 s)"
            fid = "beta" if follower is b else "alpha"
            await client.create(_configmap(namespace, "two"))
            await eventually(lambda: annotated("two", fid), 20, "the new leader's reconcile")
    finally:
        a.kill()
        b.kill()


async def _async(value: bool) -> bool:
    return value


async def test_sigterm_drains_in_flight_reconciles(control_plane: ControlPlane, namespace: str) -> None:
    proc = Proc(control_plane, namespace, "drainer", "--slow", "2")
    try:
        async with client_for(control_plane.kubeconfig_path) as client:
            await asyncio.sleep(1)
            await client.create(_configmap(namespace, "slow"))
            await eventually(lambda: _async(proc.said("reconciling slow")), 30, "the reconcile to start")
            proc.kill(signal.SIGTERM)
            code = await asyncio.get_running_loop().run_in_executor(None, proc.popen.wait, 20)
            assert code == 0, proc.lines
            assert proc.said("stopped")
            cm = await client.get(CONFIGMAPS, "slow", namespace=namespace)
            assert cm["metadata"]["annotations"]["reconciled-by"] == "drainer"
    finally:
        proc.kill()


async def test_metrics_and_probes(control_plane: ControlPlane, namespace: str) -> None:
    calls = 0

    async def reconcile(req: Request, ctx: Context) -> None:
        nonlocal calls
        calls += 1
        if req.name == "fails":
            raise RuntimeError("always")

    async with client_for(control_plane.kubeconfig_path) as client:
        manager = Manager(
            client,
            name="metrics-test",
            serving=Serving(metrics_address="127.0.0.1:0", health_address="127.0.0.1:0"),
        )
        manager.add(
            Controller.for_(CONFIGMAPS, label_selector("app=probe"), namespace=namespace)
            .named("probe")
            .reconcile(reconcile)
        )
        async with running(manager):
            for name in ("a", "b", "fails"):
                await client.create(_configmap(namespace, name))
            await eventually(lambda: _async(calls >= 4), 20, "reconciles")
            health, metrics = manager.servers
            async with aiohttp.ClientSession() as http:
                base = f"http://127.0.0.1:{health.port}"
                for path in ("/healthz", "/readyz"):
                    async with http.get(base + path) as r:
                        assert r.status == 200 and await r.text() == "ok"
                async with http.get(base + "/readyz?verbose") as r:
                    assert "[+]caches-synced ok" in await r.text()
                async with http.get(f"http://127.0.0.1:{metrics.port}/metrics") as r:
                    text = await r.text()
        for series in (
            'controller_runtime_reconcile_total{controller="probe",result="success"} 2.0',
            'controller_runtime_reconcile_errors_total{controller="probe"}',
            'controller_runtime_reconcile_time_seconds_bucket{controller="probe",le="0.005"}',
            'controller_runtime_max_concurrent_reconciles{controller="probe"} 1.0',
            'workqueue_adds_total{controller="probe",name="probe"}',
            'workqueue_depth{controller="probe",name="probe"}',
            "workqueue_retries_total",
            "workqueue_queue_duration_seconds_bucket",
            'rest_client_requests_total{code="200",host=',
            "rest_client_request_duration_seconds_bucket{host=",
        ):
            assert series in text, series
        errors = [
            line
            for line in text.splitlines()
            if line.startswith('controller_runtime_reconcile_errors_total{controller="probe"}')
        ]
        assert float(errors[0].split()[-1]) >= 2


async def test_missing_rbac_fails_fast_and_stop_during_sync_is_honoured(control_plane: ControlPlane) -> None:
    kubeconfig = control_plane.kubeconfig_for_user("no-permissions")

    async def reconcile(req: Request, ctx: Context) -> None:
        pass

    async with client_for(kubeconfig) as client:
        manager = Manager(
            client,
            name="unauthorized",
            serving=Serving(metrics_address=None, health_address=None),
            runtime=Runtime(cache_sync_timeout=3),
        )
        manager.add(Controller.for_(CONFIGMAPS).reconcile(reconcile))
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="RBAC"):
            await manager.start(asyncio.Event())
        assert time.monotonic() - started < 15

        manager = Manager(
            client, name="unauthorized", serving=Serving(metrics_address=None, health_address=None)
        )
        manager.add(Controller.for_(CONFIGMAPS).reconcile(reconcile))
        stop = asyncio.Event()
        task = asyncio.create_task(manager.start(stop))
        await asyncio.sleep(1)
        stop.set()
        stopped = time.monotonic()
        await asyncio.wait_for(task, 10)
        assert time.monotonic() - stopped < 5
