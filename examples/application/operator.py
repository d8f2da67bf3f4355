"""The Application operator (seed 004).

An ``Application`` (apps.example.com/v1) carries a Deployment template. The operator keeps a
Deployment of the same name in line with it: creates it, restores it when someone deletes or
edits it, rolls it when the Application's spec changes, and reports in the status how many
reconciles changed something, the Deployment's ready replicas and the observed generation.
The Deployment is a dependent (:class:`kubeop.Dependent`): kubeop writes it, owns it, watches it
and reports its conditions; the reconcile adds the Application's own status fields.

Typed: the Application is read as :class:`~examples.application.crd.Application` and the
Deployment is built, written and read back as :class:`kubeop.kinds.Deployment`.

Run it against any cluster (``KUBECONFIG``): ``python -m examples.application``.
"""

from __future__ import annotations

from examples.application.crd import Application, ApplicationStatus
from kubeop import (
    Context,
    Controller,
    Dependent,
    GenerationChanged,
    Request,
    Result,
    TerminalError,
)
from kubeop.kinds import Deployment
from kubeop.kinds.apps_v1 import DeploymentSpec
from kubeop.kinds.core_v1 import PodTemplateSpec
from kubeop.kinds.meta_v1 import LabelSelector, ObjectMeta

APPLICATIONS = Application.resource
DEPLOYMENTS = Deployment.resource
FIELD_MANAGER = "application-operator"


def desired_deployment(app: Application, ctx: Context) -> Deployment:
    """The Deployment an Application asks for (new models: cached objects are never mutated)."""
    if not (app.spec.template.get("spec") or {}).get("containers"):
        ctx.recorder.event(app, "Warning", "InvalidSpec", "spec.template.spec.containers must not be empty")
        raise TerminalError("spec.template.spec.containers is empty: add at least one container")
    name = app.metadata.name or ""
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "application-operator"}
    # spec.template is free-form in the CRD (a dict); as a model it is a copy of its own.
    template = PodTemplateSpec.model_validate(app.spec.template)
    template.metadata = template.metadata or ObjectMeta()
    template.metadata.labels = {**(template.metadata.labels or {}), **labels}
    return Deployment(
        metadata=ObjectMeta(name=name, namespace=app.metadata.namespace, labels=labels),
        spec=DeploymentSpec(
            replicas=app.spec.replicas,
            selector=LabelSelector(match_labels=labels),
            template=template,
        ),
    )


def replicas(deployment: Deployment) -> tuple[int, int]:
    """(ready, wanted) replicas of a Deployment as the server has it."""
    ready = (deployment.status.ready_replicas if deployment.status else None) or 0
    want = deployment.spec.replicas if deployment.spec and deployment.spec.replicas is not None else 1
    return ready, want


def all_ready(deployment: Deployment) -> bool:
    ready, want = replicas(deployment)
    return ready >= want


async def report(req: Request, ctx: Context) -> Result | None:
    """After the Deployment's dependent: the Available condition, the ready replicas, the
    observed generation and the count of reconciles that changed something, in the status write
    kubeop makes with the dependents' conditions."""
    result = ctx.dependents
    if result is None or result.deleting:
        return None  # deleted: the garbage collector removes the Deployment it owned
    app: Application = result.primary
    state = result.states["deployment"]
    if state.action in ("created", "updated"):
        ctx.log.info("deployment %s", state.action)
        ctx.recorder.event(
            app, "Normal", f"Deployment{state.action.capitalize()}", f"Deployment {req.name} {state.action}"
        )
    ready, want = replicas(state.actual) if state.actual is not None else (0, app.spec.replicas)
    generation = app.metadata.generation
    result.set_condition(
        "Available",
        ready >= want,
        "ReplicasReady" if ready >= want else "ReplicasNotReady",
        f"{ready}/{want} replicas ready",
    )
    status = app.status or ApplicationStatus()
    conditions = status.conditions or []
    changed = state.action in ("created", "updated") or (
        status.observed_generation != generation
        or status.ready_replicas != ready
        or result.conditions(conditions, generation) != conditions
    )
    result.status.update({"observedGeneration": generation, "readyReplicas": ready})
    if changed:
        result.status["reconcileCount"] = (status.reconcile_count or 0) + 1
    return None


def controller() -> Controller:
    deployment = Dependent(Deployment, desired=desired_deployment, ready=all_ready)
    return (
        Controller.for_(Application, GenerationChanged)
        .dependents(deployment)
        .named("application")
        .reconcile(report)
    )
