"""The main job: a local control plane, the Application operator, a sample Application.

    python -m examples.application.demo

Starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK fake nodes on
loopback; installs the Application CRD; runs the operator; creates an Application with 3
replicas; shows its Deployment's pods Running and its status; deletes the Deployment behind the
operator's back and shows it restored; then stops everything.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from examples.application import crd
from examples.application.operator import APPLICATIONS, DEPLOYMENTS, controller
from kubeop import Client, Manager, is_true
from kubeop.testing import ControlPlane

NAMESPACE = "demo"


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def wait_for(what: str, check: Any, timeout: float = 90.0) -> Any:
    t0 = time.monotonic()
    while True:
        value = await check()
        if value:
            say(f"==> {what} ({time.monotonic() - t0:.1f} s)")
            return value
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


async def run(cp: ControlPlane) -> None:
    cp.install_crds([crd.CRD])
    cp.create_namespace(NAMESPACE)
    async with Client.from_kubeconfig(cp.kubeconfig_path, qps=None) as client:
        manager = Manager(
            client, name="application-operator", metrics_address="127.0.0.1:0", health_address=None
        )
        manager.add(controller())
        stop = asyncio.Event()
        task = asyncio.create_task(manager.start(stop))
        say("==> Application operator running")
        await client.create(crd.sample("web", NAMESPACE, replicas=3))
        say("==> created Application demo/web (3 replicas of nginx)")

        async def available() -> Any:
            app = await client.get(APPLICATIONS, "web", namespace=NAMESPACE)
            status = app.get("status") or {}
            return (
                app
                if is_true(status.get("conditions"), "Available") and status.get("readyReplicas") == 3
                else None
            )

        await wait_for("Application web is Available with 3 ready replicas", available)
        print(cp.kubectl("get", "applications,deployments,pods", "-n", NAMESPACE, "-o", "wide").stdout)
        dep = await client.get(DEPLOYMENTS, "web", namespace=NAMESPACE)
        count_before = (await client.get(APPLICATIONS, "web", namespace=NAMESPACE))["status"][
            "reconcileCount"
        ]
        await client.delete(DEPLOYMENTS, "web", namespace=NAMESPACE)
        say("==> deleted Deployment demo/web behind the operator's back")

        async def restored() -> bool:
            try:
                new = await client.get(DEPLOYMENTS, "web", namespace=NAMESPACE)
            except Exception:
                return False
            return bool(new["metadata"]["uid"] != dep["metadata"]["uid"])

        await wait_for("the operator recreated the Deployment", restored)

        async def available_again() -> Any:
            app = await available()
            return app if app and app["status"]["reconcileCount"] > count_before else None

        await wait_for("Application web is Available again, its status counting the repair", available_again)
        app = await client.get(APPLICATIONS, "web", namespace=NAMESPACE)
        print(cp.kubectl("get", "application", "web", "-n", NAMESPACE, "-o", "jsonpath={.status}").stdout)
        print()
        st = app["status"]
        say(
            f"==> status: readyReplicas={st['readyReplicas']} observedGeneration={st['observedGeneration']} "
            f"reconcileCount={st['reconcileCount']}"
        )
        stop.set()
        await task


def main() -> None:
    t0 = time.monotonic()
    with ControlPlane(full=True, nodes=2, progress=say) as cp:
        say(f"==> local control plane up in {time.monotonic() - t0:.1f} s ({cp.server})")
        asyncio.run(run(cp))
    say(f"==> demo done in {time.monotonic() - t0:.1f} s; every process stopped")


if __name__ == "__main__":
    main()
