"""The Application operator (seed 004).

An ``Application`` (apps.example.com/v1) carries a Deployment template. The operator keeps a
Deployment of the same name in line with it: creates it, restores it when someone deletes or
edits it, rolls it when the Application's spec changes, and reports in the status how many
reconciles changed something, the Deployment's ready replicas and the observed generation.

Run it against any cluster (``KUBECONFIG``): ``python -m examples.application``.
"""

from __future__ import annotations

import copy
from typing import Any

from examples.application.crd import Application
from kubeop import (
    ApiResource,
    Context,
    Controller,
    GenerationChanged,
    Request,
    Result,
    TerminalError,
    set_condition,
    set_controller_reference,
)

APPLICATIONS = Application.resource
DEPLOYMENTS = ApiResource("apps", "v1", "deployments", kind="Deployment")
FIELD_MANAGER = "application-operator"


def desired_deployment(app: dict[str, Any]) -> dict[str, Any]:
    """The Deployment an Application asks for (a new dict: cached objects are never mutated)."""
    md = app["metadata"]
    spec = app.get("spec") or {}
    template = copy.deepcopy(spec.get("template") or {})
    labels = {"app.kubernetes.io/name": md["name"], "app.kubernetes.io/managed-by": "application-operator"}
    pod_meta = template.setdefault("metadata", {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **labels}
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": md["name"], "namespace": md["namespace"], "labels": labels},
        "spec": {
            "replicas": spec.get("replicas", 1),
            "selector": {"matchLabels": labels},
            "template": template,
        },
    }
    set_controller_reference(app, deployment)
    return deployment


async def reconcile(req: Request, ctx: Context) -> Result | None:
    app = await ctx.client.get(APPLICATIONS, req.name, namespace=req.namespace)
    if app is None:
        return None  # deleted: the garbage collector removes the Deployment it owned
    if not (app.get("spec") or {}).get("template", {}).get("spec", {}).get("containers"):
        ctx.recorder.event(app, "Warning", "InvalidSpec", "spec.template.spec.containers must not be empty")
        raise TerminalError("spec.template.spec.containers is empty: add at least one container")
    action, deployment = await ctx.client.create_or_update(desired_deployment(app))
    if action != "unchanged":
        ctx.log.info("deployment %s", action)
        ctx.recorder.event(
            app, "Normal", f"Deployment{action.capitalize()}", f"Deployment {req.name} {action}"
        )
    status = app.get("status") or {}
    dep_status = deployment.get("status") or {}
    ready = dep_status.get("readyReplicas") or 0
    want = (deployment.get("spec") or {}).get("replicas", 1)
    conditions = copy.deepcopy(status.get("conditions") or [])
    set_condition(
        conditions,
        "Available",
        ready >= want,
        "ReplicasReady" if ready >= want else "ReplicasNotReady",
        f"{ready}/{want} replicas ready",
        observed_generation=app["metadata"].get("generation"),
    )
    new_status = {
        "observedGeneration": app["metadata"].get("generation"),
        "readyReplicas": ready,
        "conditions": conditions,
    }
    changed = action != "unchanged" or any(status.get(k) != v for k, v in new_status.items())
    if changed:
        new_status["reconcileCount"] = (status.get("reconcileCount") or 0) + 1
        await ctx.client.patch_status(app, new_status)
    return None


def controller() -> Controller:
    return (
        Controller.for_(APPLICATIONS, GenerationChanged)
        .owns(DEPLOYMENTS)
        .named("application")
        .reconcile(reconcile)
    )
