"""The DatabaseCluster controller (seed 002's vendor operator, in kubeop).

Children, all owned by the DatabaseCluster: a ConfigMap ``<name>-config`` with the cluster's
configuration, a Service per role (``<name>`` for clients, ``<name>-peers`` headless for the
members' stable names, ``<name>-primary`` for member 0) and a StatefulSet of the members, each
with a volume.

- Ordered scaling, one member at a time: the operator moves the StatefulSet's replicas one step
  towards ``spec.replicas`` and takes the next step only when the previous one is done (a new
  member Ready, a removed member gone). Status: ``members``, ``readyMembers``, phase ScalingUp or
  ScalingDown, ``Progressing`` with the member being added or decommissioned.
- Self-healing: a deleted member pod is recreated with its volume (by the StatefulSet), a failed
  one is deleted so it is recreated, a deleted child is recreated; ``Degraded`` says which
  members are down meanwhile.
- Configuration: its hash is a pod template annotation, so a change rolls through the members
  one by one (highest ordinal first, the next only when the previous is Ready again); status
  ``updatedMembers`` and ``Progressing`` (RollingConfig) show the progress.
- Delete: a finalizer decommissions the members one at a time (highest first) before the
  DatabaseCluster goes; then garbage collection removes the rest, volumes included.
- Bad input (replicas < 0, a storage size that does not parse, a credentials Secret that does not
  exist): ``Degraded=True`` with the reason, a Warning Event, nothing created; the Secret is
  watched, so creating it carries on.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from examples.dbcluster.api.v1alpha1.databasecluster import DatabaseCluster, DatabaseClusterStatus, Member
from examples.kube import (
    CONFIGMAPS,
    PODS,
    SECRETS,
    SERVICES,
    STATEFULSETS,
    Condition,
    Pod,
    References,
    Secret,
    StatefulSet,
    instance_owner,
    owner_labels,
    parse_quantity,
    set_conditions,
    status_dict,
)
from kubeop import (
    Context,
    Controller,
    GenerationChanged,
    Request,
    Result,
    rbac_rule,
    set_controller_reference,
)

MANAGER = "dbcluster-operator"
FINALIZER = "db.example.com/decommission"
CONFIG_HASH = "db.example.com/config-hash"
ROLE = "db.example.com/role"
PORT = 26257


def config_hash(config: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(dict(config), sort_keys=True).encode()).hexdigest()[:12]


def render_config(config: Mapping[str, str]) -> str:
    return "".join(f"{k} = {v}\n" for k, v in sorted(config.items()))


def _ordinal(pod: Pod) -> int:
    name = pod.metadata.name or ""
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


# --8<-- [start:rbac]
# What the reconciler reads and writes: `kubeop manifests` turns these into config/rbac/role.yaml.
@rbac_rule(groups="db.example.com", resources="databaseclusters", verbs="get;list;watch;update;patch")
@rbac_rule(groups="db.example.com", resources="databaseclusters/status", verbs="get;update;patch")
@rbac_rule(groups="db.example.com", resources="databaseclusters/finalizers", verbs="update")
@rbac_rule(groups="apps", resources="statefulsets", verbs="get;list;watch;create;update;patch")
@rbac_rule(groups="", resources="services;configmaps", verbs="get;list;watch;create;update;patch")
@rbac_rule(groups="", resources="pods", verbs="get;list;watch;delete")
@rbac_rule(groups="", resources="secrets", verbs="get;list;watch")
class DatabaseClusterController:
    # --8<-- [end:rbac]
    def __init__(self, progress_requeue: float = 5.0) -> None:
        self.progress_requeue = progress_requeue
        # which Secret each object references: a Secret that appears wakes them
        self.secret_refs = References()

    # -- reconcile -----------------------------------------------------------------------------
    async def reconcile(self, req: Request, ctx: Context) -> Result | None:
        dbc = await ctx.client.get(DatabaseCluster, req.name, namespace=req.namespace)
        if dbc is None:
            return None
        # --8<-- [start:finalizer]
        deleting = dbc.metadata.deletion_timestamp is not None
        if not deleting:
            await ctx.client.add_finalizer(dbc, FINALIZER)
        # --8<-- [end:finalizer]
        status = dbc.status.model_copy(deep=True) if dbc.status else DatabaseClusterStatus()
        gen = dbc.metadata.generation
        status.observed_generation = gen

        # --8<-- [start:invalid]
        problem = await self._check(ctx, dbc)
        if problem is not None and not deleting:
            reason, message = problem
            ctx.recorder.event(dbc, "Warning", reason, message)
            ctx.log.warning("%s: %s", reason, message)
            status.phase = "Invalid"
            conds = set_conditions(status.conditions, "Degraded", True, reason, message, gen)
            conds = set_conditions(
                conds, "Progressing", False, "InvalidSpec", f"waiting for a fix: {message}", gen
            )
            if not any(c.type == "Available" for c in conds):
                conds = set_conditions(conds, "Available", False, "InvalidSpec", message, gen)
            status.conditions = conds
            await ctx.client.patch_status(dbc, status_dict(status))
            return None
        # --8<-- [end:invalid]

        ns, name = req.namespace, req.name
        sts: StatefulSet | None = await ctx.client.get(StatefulSet, name, namespace=ns)
        if deleting and sts is None:
            await ctx.client.remove_finalizer(dbc, FINALIZER)
            return None
        target = 0 if deleting else dbc.spec.replicas
        pods = sorted(
            await ctx.client.list(Pod, namespace=ns, labels=owner_labels("dbcluster", name, MANAGER)),
            key=_ordinal,
        )

        # --8<-- [start:step]
        # One step towards the target, only once the previous step is done.
        step = ""
        if sts is None:
            replicas = min(target, 1)
            step = "Creating"
        else:
            current = sts.spec.replicas or 0
            done = (
                sts.status.observed_generation == sts.metadata.generation and sts.status.replicas == current
            )
            replicas = current
            if current < target:
                step = "ScalingUp"
                if done and sts.status.ready_replicas == current:
                    replicas = current + 1
                    ctx.recorder.event(dbc, "Normal", "MemberAdded", f"adding member {name}-{current}")
            elif current > target:
                step = "Decommissioning" if deleting else "ScalingDown"
                if done:
                    replicas = current - 1
                    ctx.recorder.event(
                        dbc, "Normal", "MemberDecommissioned", f"decommissioning member {name}-{current - 1}"
                    )
        # --8<-- [end:step]
        hash_ = config_hash(dbc.spec.config)
        if deleting:
            if sts is not None and replicas != (sts.spec.replicas or 0):
                await ctx.client.patch(STATEFULSETS, name, {"spec": {"replicas": replicas}}, namespace=ns)
        else:
            sts = await self._children(ctx, dbc, replicas, hash_, create_volumes=sts is None)

        # Self-healing: a failed member is deleted, and its StatefulSet makes it again.
        for pod in pods:
            if pod.status.phase == "Failed" and pod.metadata.deletion_timestamp is None:
                await ctx.client.delete(PODS, pod.metadata.name or "", namespace=ns)
                ctx.recorder.event(
                    dbc, "Warning", "MemberReplaced", f"member {pod.metadata.name} failed: replacing it"
                )

        if deleting and replicas == 0 and not pods and (sts is None or sts.status.replicas == 0):
            ctx.log.info("every member decommissioned")
            await ctx.client.remove_finalizer(dbc, FINALIZER)
            return None

        self._report(status, dbc, sts, pods, replicas, target, hash_, step)
        await ctx.client.patch_status(dbc, status_dict(status))
        progressing = any(c.type == "Progressing" and c.status == "True" for c in status.conditions)
        return Result(requeue_after=self.progress_requeue) if progressing else None

    async def _check(self, ctx: Context, dbc: DatabaseCluster) -> tuple[str, str] | None:
        ns, name = dbc.metadata.namespace or "", dbc.metadata.name or ""
        if dbc.spec.replicas < 0:
            return "InvalidReplicas", f"spec.replicas is {dbc.spec.replicas}: it must be 0 or more"
        try:
            size = parse_quantity(dbc.spec.storage)
        except ValueError as exc:
            return "InvalidStorage", f"spec.storage: {exc}"
        if size <= 0:
            return "InvalidStorage", f"spec.storage is {dbc.spec.storage!r}: it must be more than 0"
        ref = dbc.spec.credentials_secret
        self.secret_refs.note(ns, name, ref)
        if ref and await ctx.client.get(Secret, ref, namespace=ns) is None:
            return "SecretNotFound", f"Secret {ref!r} (spec.credentialsSecret) does not exist"
        return None

    async def _children(
        self, ctx: Context, dbc: DatabaseCluster, replicas: int, hash_: str, *, create_volumes: bool
    ) -> StatefulSet | None:
        ns, name = dbc.metadata.namespace or "", dbc.metadata.name or ""
        labels = owner_labels("dbcluster", name, MANAGER)
        port = {"name": "sql", "port": PORT, "targetPort": PORT}

        def service(svc_name: str, role: str, **spec: Any) -> dict[str, Any]:
            return {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": svc_name, "namespace": ns, "labels": {**labels, ROLE: role}},
                "spec": {"selector": labels, "ports": [port], **spec},
            }

        configmap = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{name}-config", "namespace": ns, "labels": labels},
            "data": {"cluster.conf": render_config(dbc.spec.config), "config-hash": hash_},
        }
        container: dict[str, Any] = {
            "name": "db",
            "image": dbc.spec.image,
            "args": ["start", "--join", f"{name}-0.{name}-peers", "--config", "/etc/db/cluster.conf"],
            "ports": [{"name": "sql", "containerPort": PORT}],
            "volumeMounts": [
                {"name": "data", "mountPath": "/var/lib/db"},
                {"name": "config", "mountPath": "/etc/db"},
            ],
        }
        if dbc.spec.credentials_secret:
            container["envFrom"] = [{"secretRef": {"name": dbc.spec.credentials_secret}}]
        spec: dict[str, Any] = {
            "replicas": replicas,
            "serviceName": f"{name}-peers",
            "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate"},
            "selector": {"matchLabels": labels},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Delete"},
            "template": {
                "metadata": {"labels": labels, "annotations": {CONFIG_HASH: hash_}},
                "spec": {
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": f"{name}-config"}}],
                },
            },
        }
        if create_volumes:  # volumeClaimTemplates cannot change once the StatefulSet exists
            spec["volumeClaimTemplates"] = [
                {
                    "metadata": {"name": "data", "labels": labels},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": dbc.spec.storage}},
                    },
                }
            ]
        sts = {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": spec,
        }
        children = [
            configmap,  # first: the members a rollout starts read the new configuration
            service(name, "client"),
            service(f"{name}-peers", "peer", clusterIP="None", publishNotReadyAddresses=True),
            {
                **service(f"{name}-primary", "primary"),
                "spec": {"selector": {**labels, "apps.kubernetes.io/pod-index": "0"}, "ports": [port]},
            },
            sts,
        ]
        for child in children:
            set_controller_reference(dbc, child)
            action, _ = await ctx.client.create_or_update(child)
            if action != "unchanged":
                kind, child_name = child["kind"], child["metadata"]["name"]
                ctx.log.info("%s %s %s", kind, child_name, action)
                if kind != "StatefulSet" or action == "created":
                    ctx.recorder.event(
                        dbc, "Normal", f"{kind}{action.capitalize()}", f"{kind} {child_name} {action}"
                    )
        out: StatefulSet | None = await ctx.client.get(StatefulSet, name, namespace=ns)
        return out

    def _report(
        self,
        status: DatabaseClusterStatus,
        dbc: DatabaseCluster,
        sts: StatefulSet | None,
        pods: list[Pod],
        replicas: int,
        target: int,
        hash_: str,
        step: str,
    ) -> None:
        gen = dbc.metadata.generation
        live = [p for p in pods if p.metadata.deletion_timestamp is None]
        ready = [p for p in live if p.ready]
        status.members = replicas
        status.ready_members = len(ready)
        status.config_hash = hash_
        status.member_status = [
            Member(
                name=p.metadata.name or "",
                ready=p.ready,
                config_hash=(p.metadata.annotations or {}).get(CONFIG_HASH),
            )
            for p in live
        ]
        status.updated_members = sum(1 for m in status.member_status if m.ready and m.config_hash == hash_)
        rolling = sts is not None and (
            any(m.config_hash != hash_ for m in status.member_status)
            or sts.status.update_revision != sts.status.current_revision
        )
        if not step and rolling:
            step = "RollingConfig"
        messages = {
            "Creating": f"creating the cluster: {len(ready)}/{target} members ready",
            "ScalingUp": f"adding members one at a time: {len(ready)}/{target} ready",
            "ScalingDown": f"decommissioning members one at a time: {replicas} left, {target} wanted",
            "Decommissioning": f"decommissioning before delete: {replicas} members left",
            "RollingConfig": f"rolling configuration {hash_}: "
            f"{status.updated_members}/{replicas} members updated",
        }
        conds: list[Condition] = status.conditions
        if step:
            conds = set_conditions(conds, "Progressing", True, step, messages[step], gen)
        else:
            conds = set_conditions(
                conds, "Progressing", False, "Stable", f"{replicas} members, configuration {hash_}", gen
            )
        quorum = target // 2 + 1 if target else 0
        if target == 0:
            conds = set_conditions(conds, "Available", False, "NoMembers", "the cluster has no members", gen)
        elif len(ready) >= quorum:
            conds = set_conditions(
                conds,
                "Available",
                True,
                "QuorumReady",
                f"{len(ready)}/{target} members ready ({quorum} needed)",
                gen,
            )
        else:
            conds = set_conditions(
                conds,
                "Available",
                False,
                "QuorumLost",
                f"{len(ready)}/{target} members ready ({quorum} needed)",
                gen,
            )
        expected = min(replicas, target) - (1 if step in ("RollingConfig", "ScalingUp", "Creating") else 0)
        down = [m.name for m in status.member_status if not m.ready]
        missing = max(0, min(replicas, target) - len(live))
        if len(ready) < expected:
            what = (
                ", ".join(down) + (f" and {missing} missing" if missing else "")
                if down
                else f"{missing} missing"
            )
            conds = set_conditions(
                conds, "Degraded", True, "MembersUnavailable", f"members not ready: {what}", gen
            )
        else:
            conds = set_conditions(
                conds, "Degraded", False, "MembersReady", f"{len(ready)} members ready", gen
            )
        status.conditions = conds
        degraded = any(c.type == "Degraded" and c.status == "True" for c in conds)
        status.phase = step or ("Degraded" if degraded else "Running")


# --8<-- [start:controller] (to the end of the file)
def controller(progress_requeue: float = 5.0) -> Controller:
    """The DatabaseCluster controller (``progress_requeue``: how often a step in progress is
    looked at again besides the watches)."""
    rec = DatabaseClusterController(progress_requeue)
    return (
        Controller.for_(DatabaseCluster, GenerationChanged)
        .owns(STATEFULSETS)
        .owns(SERVICES)
        .owns(CONFIGMAPS)
        .watches(PODS, instance_owner(MANAGER))
        .watches(SECRETS, rec.secret_refs.referrers)
        .named("databasecluster")
        .reconcile(rec.reconcile)
    )
