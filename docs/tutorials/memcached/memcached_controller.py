"""The Memcached controller: a Deployment of spec.size memcached Pods, conditions derived from
that Deployment's status (Ready, Progressing, Degraded), and a finalizer that records an Event
before a Memcached goes.

The Memcached tutorial (docs/tutorials/memcached.md) shows this file, and
tests/e2e/cli/test_tutorial_e2e.py copies it into a project made by ``kubeop init`` as
memcached_operator/controllers/memcached.py.
"""

from __future__ import annotations

from typing import Any

from kubeop import (
    ApiResource,
    Context,
    Controller,
    GenerationChanged,
    Request,
    Result,
    rbac_rule,
    set_condition,
    set_controller_reference,
)

from memcached_operator.api.v1.memcached import Memcached

# --8<-- [start:resources]
DEPLOYMENTS = ApiResource("apps", "v1", "deployments", kind="Deployment")
FINALIZER = "cache.example.com/finalizer"
# --8<-- [end:resources]


# --8<-- [start:rbac]
@rbac_rule(groups="cache.example.com", resources="memcacheds", verbs="get;list;watch;update;patch")
@rbac_rule(groups="cache.example.com", resources="memcacheds/status", verbs="get;update;patch")
@rbac_rule(groups="cache.example.com", resources="memcacheds/finalizers", verbs="update")
@rbac_rule(groups="apps", resources="deployments", verbs="get;list;watch;create;update;patch;delete")
@rbac_rule(groups="events.k8s.io", resources="events", verbs="create;patch")
# --8<-- [end:rbac]
# --8<-- [start:reconcile]
async def reconcile(req: Request, ctx: Context) -> Result | None:
    obj = await ctx.client.get(Memcached, req.name, namespace=req.namespace)
    if obj is None:
        return None  # deleted: the Deployment goes with it (garbage collection)

    async def cleanup(gone: Memcached) -> None:
        ctx.recorder.event(gone, "Normal", "Finalizing", f"Memcached {req.name} is being deleted")

    if await ctx.client.finalize(obj, FINALIZER, cleanup):
        return None  # being deleted: cleanup ran, the finalizer is off
    # --8<-- [end:reconcile]
    # --8<-- [start:deployment]
    labels = {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": req.name}
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": req.name, "namespace": req.namespace, "labels": labels},
        "spec": {
            "replicas": obj.spec.size,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "memcached", "image": "memcached:1.6"}]},
            },
        },
    }
    set_controller_reference(obj, deployment)
    _, deployment = await ctx.client.create_or_update(deployment)
    # --8<-- [end:deployment]
    # --8<-- [start:status]
    generation = obj.metadata.generation
    current = obj.status.model_dump(exclude_none=True) if obj.status else {}
    conditions: list[dict[str, Any]] = list(current.get("conditions", []))
    for type_, status, reason, message in deployment_conditions(deployment, obj.spec.size):
        set_condition(conditions, type_, status, reason, message, observed_generation=generation)
    await ctx.client.patch_status(obj, {"observedGeneration": generation, "conditions": conditions})
    return None


def deployment_conditions(deployment: dict[str, Any], size: int) -> list[tuple[str, bool, str, str]]:
    """Ready, Progressing and Degraded as (type, status, reason, message), from what the
    Deployment controller reports: Ready once ``size`` Pods of the current spec are available."""
    status = deployment.get("status") or {}
    seen = status.get("observedGeneration", 0) >= deployment["metadata"].get("generation", 0)
    available = status.get("availableReplicas", 0)
    updated = status.get("updatedReplicas", 0)
    failed = [
        c
        for c in status.get("conditions", [])
        if (c["type"] == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded")
        or (c["type"] == "ReplicaFailure" and c["status"] == "True")
    ]
    if failed:
        reason, message = failed[0].get("reason", "DeploymentFailed"), failed[0].get("message", "")
        return [
            ("Ready", False, reason, f"{available}/{size} Pods available; {message}"),
            ("Progressing", False, reason, message),
            ("Degraded", True, reason, message),
        ]
    if seen and updated >= size and available >= size:
        message = f"{available}/{size} Pods available"
        return [
            ("Ready", True, "Available", message),
            ("Progressing", False, "Available", message),
            ("Degraded", False, "Available", ""),
        ]
    message = f"{available}/{size} Pods available, {updated} up to date"
    return [
        ("Ready", False, "Progressing", message),
        ("Progressing", True, "Progressing", message),
        ("Degraded", False, "Progressing", ""),
    ]
    # --8<-- [end:status]


# --8<-- [start:controller] (to the end of the file)
def controller() -> Controller:
    return Controller.for_(Memcached, GenerationChanged).owns(DEPLOYMENTS).reconcile(reconcile)
