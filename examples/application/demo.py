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
from examples.application.crd import Application
from examples.application.operator import controller
from kubeop import Client, Manager, is_true
from kubeop.kinds import Deployment
from kubeop.manager import Serving
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
        serving = Serving(metrics_address="127.0.0.1:0", health_address=None)
        manager = Manager(client, name="application-operator", serving=serving)
        manager.add(controller())
        stop = asyncio.Event()
        task = asyncio.create_task(manager.start(stop))
        say("==> Application operator running")
        await client.create(crd.sample("web", NAMESPACE, replicas=3))
        say("==> created Application demo/web (3 replicas of nginx)")

        async def available() -> Application | None:
            app = await client.get(Application, "web", namespace=NAMESPACE)
            status = app.status
            ok = status is not None and is_true(status.conditions, "Available") and status.ready_replicas == 3
            return app if ok else None

        await wait_for("Application web is Available with 3 ready replicas", available)
        print(cp.kubectl("get", "applications,deployments,pods", "-n", NAMESPACE, "-o", "wide").stdout)
        dep = await client.get(Deployment, "web", namespace=NAMESPACE)
        before = (await client.get(Application, "web", namespace=NAMESPACE)).status
        count_before = (before.reconcile_count if before else None) or 0
        await client.delete(Deployment, "web", namespace=NAMESPACE)
        say("==> deleted Deployment demo/web behind the operator's back")

        async def restored() -> bool:
            try:
                new = await client.get(Deployment, "web", namespace=NAMESPACE)
            except Exception:
                return False
            return new.metadata.uid != dep.metadata.uid

        await wait_for("the operator recreated the Deployment", restored)

        async def available_again() -> Application | None:
            app = await available()
            count = (app.status.reconcile_count if app and app.status else None) or 0
            return app if count > count_before else None

        await wait_for("Application web is Available again, its status counting the repair", available_again)
        app = await client.get(Application, "web", namespace=NAMESPACE)
        print(cp.kubectl("get", "application", "web", "-n", NAMESPACE, "-o", "jsonpath={.status}").stdout)
        print()
        st = app.status or crd.ApplicationStatus()
        say(
            f"==> status: readyReplicas={st.ready_replicas} observedGeneration={st.observed_generation} "
            f"reconcileCount={st.reconcile_count}"
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
