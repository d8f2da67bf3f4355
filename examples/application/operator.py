"""The Application operator (seed 004).

An ``Application`` (apps.example.com/v1) carries a Deployment template. The operator keeps a
Deployment of the same name in line with it: creates it, restores it when someone deletes or
edits it, rolls it when the Application's spec changes, and reports in the status how many
reconciles changed something, the Deployment's ready replicas and the observed generation.

Typed: the Application is read as :class:`~examples.application.crd.Application` and the
Deployment is built, written and read back as :class:`kubeop.kinds.Deployment`.

Run it against any cluster (``KUBECONFIG``): ``python -m examples.application``.
"""

from __future__ import annotations

import copy

from examples.application.crd import Application, ApplicationStatus
from kubeop import (
    Context,
    Controller,
    GenerationChanged,
    Request,
    Result,
    TerminalError,
    set_condition,
    set_controller_reference,
)
from kubeop.kinds import Deployment
from kubeop.kinds.apps_v1 import DeploymentSpec
from kubeop.kinds.core_v1 import PodTemplateSpec
from kubeop.kinds.meta_v1 import LabelSelector, ObjectMeta

APPLICATIONS = Application.resource
DEPLOYMENTS = Deployment.resource
FIELD_MANAGER = "application-operator"


def desired_deployment(app: Application) -> Deployment:
    """The Deployment an Application asks for (new models: cached objects are never mutated)."""
    name = app.metadata.name or ""
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "application-operator"}
    # spec.template is free-form in the CRD (a dict); as a model it is a copy of its own.
    template = PodTemplateSpec.model_validate(app.spec.template)
    template.metadata = template.metadata or ObjectMeta()
    template.metadata.labels = {**(template.metadata.labels or {}), **labels}
    deployment = Deployment(
        metadata=ObjectMeta(name=name, namespace=app.metadata.namespace, labels=labels),
        spec=DeploymentSpec(
            replicas=app.spec.replicas,
            selector=LabelSelector(match_labels=labels),
            template=template,
        ),
    )
    set_controller_reference(app, deployment)
    return deployment


async def reconcile(req: Request, ctx: Context) -> Result | None:
    app = await ctx.client.get(Application, req.name, namespace=req.namespace)
    if app is None:
        return None  # deleted: the garbage collector removes the Deployment it owned
    if not (app.spec.template.get("spec") or {}).get("containers"):
        ctx.recorder.event(app, "Warning", "InvalidSpec", "spec.template.spec.containers must not be empty")
        raise TerminalError("spec.template.spec.containers is empty: add at least one container")
    action, written = await ctx.client.create_or_update(desired_deployment(app))
    deployment = Deployment.model_validate(written)
    if action != "unchanged":
        ctx.log.info("deployment %s", action)
        ctx.recorder.event(
            app, "Normal", f"Deployment{action.capitalize()}", f"Deployment {req.name} {action}"
        )
    status = app.status or ApplicationStatus()
    ready = (deployment.status.ready_replicas if deployment.status else None) or 0
    want = deployment.spec.replicas if deployment.spec and deployment.spec.replicas is not None else 1
    generation = app.metadata.generation
    conditions = copy.deepcopy(status.conditions or [])
    set_condition(
        conditions,
        "Available",
        ready >= want,
        "ReplicasReady" if ready >= want else "ReplicasNotReady",
        f"{ready}/{want} replicas ready",
        observed_generation=generation,
    )
    changed = action != "unchanged" or (
        status.observed_generation != generation
        or status.ready_replicas != ready
        or status.conditions != conditions
    )
    if changed:
        await ctx.client.patch_status(
            app,
            {
                "observedGeneration": generation,
                "readyReplicas": ready,
                "conditions": conditions,
                "reconcileCount": (status.reconcile_count or 0) + 1,
            },
        )
    return None


def controller() -> Controller:
    return (
        Controller.for_(Application, GenerationChanged)
        .owns(Deployment)
        .named("application")
        .reconcile(reconcile)
    )
