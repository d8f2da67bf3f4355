"""The seed examples, end to end on the real control plane with KWOK nodes."""

from __future__ import annotations

from typing import Any

import pytest
from examples.application import crd as app_crd
from examples.application.operator import APPLICATIONS, DEPLOYMENTS
from examples.application.operator import controller as app_controller
from examples.demo import crd as demo_crd
from examples.demo.operator import DEMOS, PODS
from examples.demo.operator import controller as demo_controller

from kubeop.core.errors import NotFound
from kubeop.manager import Manager, Serving
from kubeop.testing import ControlPlane

from .conftest import client_for, eventually, running

pytestmark = [pytest.mark.controlplane, pytest.mark.full]


async def _gone(client: Any, res: Any, name: str, ns: str) -> bool:
    try:
        await client.get(res, name, namespace=ns)
    except NotFound:
        return True
    return False


async def test_application_owns_and_restores_its_deployment(
    control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.install_crds([app_crd.CRD])
    async with client_for(control_plane.kubeconfig_path) as client:
        manager = Manager(
            client, name="application-operator", serving=Serving(metrics_address=None, health_address=None)
        )
        manager.add(app_controller())
        async with running(manager):
            await client.create(app_crd.sample("web", namespace, replicas=2))

            async def ready() -> Any:
                app = await client.get(APPLICATIONS, "web", namespace=namespace)
                st = app.get("status") or {}
                return app if st.get("readyReplicas") == 2 and st.get("observedGeneration") == 1 else None

            app = await eventually(ready, 60, "2 ready replicas in the Application's status")
            assert app["status"]["reconcileCount"] >= 1
            assert {c["type"]: c["status"] for c in app["status"]["conditions"]}["Available"] == "True"
            dep = await client.get(DEPLOYMENTS, "web", namespace=namespace)
            ref = dep["metadata"]["ownerReferences"][0]
            assert ref["kind"] == "Application" and ref["uid"] == app["metadata"]["uid"] and ref["controller"]
            pods = await client.list(PODS, namespace=namespace, label_selector="app.kubernetes.io/name=web")
            assert sum(1 for p in pods.items if p["status"].get("phase") == "Running") == 2

            # Someone deletes the Deployment: it comes back (a new object).
            await client.delete(DEPLOYMENTS, "web", namespace=namespace)

            async def recreated() -> bool:
                d = await client.get(DEPLOYMENTS, "web", namespace=namespace)
                return bool(d["metadata"]["uid"] != dep["metadata"]["uid"])

            await eventually(recreated, 30, "the deleted Deployment to be recreated")

            # Someone edits it: the edit is reverted.
            await client.patch(DEPLOYMENTS, "web", {"spec": {"replicas": 5}}, namespace=namespace)

            async def reverted() -> bool:
                d = await client.get(DEPLOYMENTS, "web", namespace=namespace)
                return bool(d["spec"]["replicas"] == 2)

            await eventually(reverted, 30, "the edited Deployment to be restored")

            # The Application's spec changes: the Deployment rolls.
            await client.patch(
                APPLICATIONS,
                "web",
                {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.28"}]}}}},
                namespace=namespace,
            )

            async def rolled() -> bool:
                d = await client.get(DEPLOYMENTS, "web", namespace=namespace)
                a = await client.get(APPLICATIONS, "web", namespace=namespace)
                image = d["spec"]["template"]["spec"]["containers"][0]["image"]
                return image == "nginx:1.28" and (a.get("status") or {}).get("observedGeneration") == 2

            await eventually(rolled, 30, "the Deployment to roll to the new image")

            # Deleting the Application garbage-collects the Deployment.
            await client.delete(APPLICATIONS, "web", namespace=namespace, propagation_policy="Foreground")
            # kube-controller-manager's garbage collector learns of a new CRD at its next discovery
            # (up to ~45 s after it starts, measured in tests/faults), then collects.
            await eventually(lambda: _gone(client, DEPLOYMENTS, "web", namespace), 120, "garbage collection")


async def test_invalid_application_is_a_terminal_error_with_an_event(
    control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.install_crds([app_crd.CRD])
    async with client_for(control_plane.kubeconfig_path) as client:
        manager = Manager(
            client, name="application-operator", serving=Serving(metrics_address=None, health_address=None)
        )
        manager.add(app_controller())
        async with running(manager):
            bad = app_crd.sample("empty", namespace)
            bad["spec"]["template"]["spec"]["containers"] = []
            await client.create(bad)

            async def warned() -> Any:
                events = await client.list("events.events.k8s.io", namespace=namespace)
                return [e for e in events.items if e.get("reason") == "InvalidSpec"]

            events = await eventually(warned, 20, "an InvalidSpec event")
            assert events[0]["type"] == "Warning" and "containers" in events[0]["note"]
            assert await _gone(client, DEPLOYMENTS, "empty", namespace)


async def test_demo_keeps_one_pod_per_demo(control_plane: ControlPlane, namespace: str) -> None:
    control_plane.install_crds([demo_crd.CRD])
    async with client_for(control_plane.kubeconfig_path) as client:
        manager = Manager(
            client, name="demo-operator", serving=Serving(metrics_address=None, health_address=None)
        )
        manager.add(demo_controller())
        async with running(manager):
            await client.create(demo_crd.sample("hello", namespace))

            async def running_pod() -> Any:
                pod = await client.get(PODS, "hello-pod", namespace=namespace)
                return pod if pod["status"].get("phase") == "Running" else None

            pod = await eventually(running_pod, 60, "the Demo's Pod to run")
            assert pod["metadata"]["ownerReferences"][0]["kind"] == "Demo"

            async def status_running() -> bool:
                d = await client.get(DEMOS, "hello", namespace=namespace)
                return bool((d.get("status") or {}).get("phase") == "Running")

            await eventually(status_running, 30, "the Demo's status to say Running")

            await client.delete(PODS, "hello-pod", namespace=namespace, grace_period_seconds=0)

            async def replaced() -> bool:
                p = await client.get(PODS, "hello-pod", namespace=namespace)
                return bool(
                    p["metadata"]["uid"] != pod["metadata"]["uid"] and p["status"].get("phase") == "Running"
                )

            await eventually(replaced, 60, "the deleted Pod to be recreated and run")
            pods = await client.list(PODS, namespace=namespace)
            assert len(pods.items) == 1

            await client.delete(DEMOS, "hello", namespace=namespace)
            await eventually(
                lambda: _gone(client, PODS, "hello-pod", namespace), 60, "the Pod to be collected"
            )
