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
from collections.abc import Callable, Mapping
from typing import Any

from examples.dbcluster.api.v1alpha1.databasecluster import DatabaseCluster, DatabaseClusterStatus, Member
from examples.kube import (
    Condition,
    References,
    instance_owner,
    owner_labels,
    parse_quantity,
    pod_ready,
    set_conditions,
    status_dict,
)
from kubeop import (
    Context,
    Controller,
    Dependent,
    GenerationChanged,
    Request,
    Result,
    Workflow,
    rbac_rule,
    set_controller_reference,
)
from kubeop.kinds import ConfigMap, Pod, Secret, Service, StatefulSet
from kubeop.kinds.apps_v1 import (
    StatefulSetPersistentVolumeClaimRetentionPolicy,
    StatefulSetSpec,
    StatefulSetStatus,
    StatefulSetUpdateStrategy,
)
from kubeop.kinds.core_v1 import (
    ConfigMapVolumeSource,
    Container,
    ContainerPort,
    EnvFromSource,
    PersistentVolumeClaim,
    PersistentVolumeClaimSpec,
    PodSpec,
    PodTemplateSpec,
    SecretEnvSource,
    ServicePort,
    ServiceSpec,
    Volume,
    VolumeMount,
    VolumeResourceRequirements,
)
from kubeop.kinds.meta_v1 import LabelSelector, ObjectMeta

MANAGER = "dbcluster-operator"
FINALIZER = "db.example.com/decommission"
CONFIG_HASH = "db.example.com/config-hash"
ROLE = "db.example.com/role"
PORT = 26257


def config_hash(config: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(dict(config), sort_keys=True).encode()).hexdigest()[:12]


def render_config(config: Mapping[str, str]) -> str:
    return "".join(f"{k} = {v}\n" for k, v in sorted(config.items()))


def _sts_status(sts: StatefulSet) -> StatefulSetStatus:
    return sts.status or StatefulSetStatus(replicas=0)


def _ordinal(pod: Pod) -> int:
    name = pod.metadata.name or ""
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


# -- the ConfigMap and the Services: dependents ----------------------------------------------------
def _labels(dbc: DatabaseCluster) -> dict[str, str]:
    return owner_labels("dbcluster", dbc.metadata.name or "", MANAGER)


def _config(dbc: DatabaseCluster, ctx: Context) -> ConfigMap:
    return ConfigMap(
        metadata=ObjectMeta(name=f"{dbc.metadata.name}-config", labels=_labels(dbc)),
        data={"cluster.conf": render_config(dbc.spec.config), "config-hash": config_hash(dbc.spec.config)},
    )


def _service(suffix: str, role: str, **spec: Any) -> Callable[[DatabaseCluster, Context], Service]:
    def desired(dbc: DatabaseCluster, ctx: Context) -> Service:
        labels = _labels(dbc)
        selector = {**labels, "apps.kubernetes.io/pod-index": "0"} if role == "primary" else labels
        port = ServicePort(name="sql", port=PORT, target_port=PORT)
        return Service(
            metadata=ObjectMeta(name=f"{dbc.metadata.name}{suffix}", labels={**labels, ROLE: role}),
            spec=ServiceSpec(selector=selector, ports=[port], **spec),
        )

    return desired


#: Written before the StatefulSet by every reconcile of a valid DatabaseCluster; the conditions are
#: the controller's own (conditions=False).
CHILDREN = Workflow(
    Dependent(ConfigMap, desired=_config, name="config"),
    Dependent(Service, desired=_service("", "client"), name="client"),
    Dependent(
        Service,
        desired=_service("-peers", "peer", cluster_ip="None", publish_not_ready_addresses=True),
        name="peers",
    ),
    Dependent(Service, desired=_service("-primary", "primary"), name="primary"),
    conditions=False,
)


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
            current = (sts.spec.replicas if sts.spec else None) or 0
            st = _sts_status(sts)
            done = st.observed_generation == sts.metadata.generation and st.replicas == current
            replicas = current
            if current < target:
                step = "ScalingUp"
                if done and (st.ready_replicas or 0) == current:
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
            if sts is not None and replicas != ((sts.spec.replicas if sts.spec else None) or 0):
                await ctx.client.patch(StatefulSet, name, {"spec": {"replicas": replicas}}, namespace=ns)
        else:
            sts = await self._children(ctx, dbc, replicas, hash_, create_volumes=sts is None)

        # Self-healing: a failed member is deleted, and its StatefulSet makes it again.
        for pod in pods:
            phase = pod.status.phase if pod.status else None
            if phase == "Failed" and pod.metadata.deletion_timestamp is None:
                await ctx.client.delete(Pod, pod.metadata.name or "", namespace=ns)
                ctx.recorder.event(
                    dbc, "Warning", "MemberReplaced", f"member {pod.metadata.name} failed: replacing it"
                )

        if deleting and replicas == 0 and not pods and (sts is None or _sts_status(sts).replicas == 0):
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
        # The ConfigMap and the Services first (the members a rollout starts read the new
        # configuration), then the StatefulSet, whose replicas move one step at a time.
        result = await CHILDREN.reconcile(dbc, ctx)
        result.raise_for_failures()
        for state in result.states.values():
            if state.action in ("created", "updated"):
                child = state.actual  # a ConfigMap or a Service model
                self._changed(ctx, dbc, type(child).__name__, child.metadata.name, state.action)
        container = Container(
            name="db",
            image=dbc.spec.image,
            args=["start", "--join", f"{name}-0.{name}-peers", "--config", "/etc/db/cluster.conf"],
            ports=[ContainerPort(name="sql", container_port=PORT)],
            volume_mounts=[
                VolumeMount(name="data", mount_path="/var/lib/db"),
                VolumeMount(name="config", mount_path="/etc/db"),
            ],
        )
        if dbc.spec.credentials_secret:
            container.env_from = [EnvFromSource(secret_ref=SecretEnvSource(name=dbc.spec.credentials_secret))]
        spec = StatefulSetSpec(
            replicas=replicas,
            service_name=f"{name}-peers",
            pod_management_policy="OrderedReady",
            update_strategy=StatefulSetUpdateStrategy(type="RollingUpdate"),
            selector=LabelSelector(match_labels=labels),
            persistent_volume_claim_retention_policy=StatefulSetPersistentVolumeClaimRetentionPolicy(
                when_deleted="Delete", when_scaled="Delete"
            ),
            template=PodTemplateSpec(
                metadata=ObjectMeta(labels=labels, annotations={CONFIG_HASH: hash_}),
                spec=PodSpec(
                    containers=[container],
                    volumes=[Volume(name="config", config_map=ConfigMapVolumeSource(name=f"{name}-config"))],
                ),
            ),
        )
        if create_volumes:  # volumeClaimTemplates cannot change once the StatefulSet exists
            spec.volume_claim_templates = [
                PersistentVolumeClaim(
                    metadata=ObjectMeta(name="data", labels=labels),
                    spec=PersistentVolumeClaimSpec(
                        access_modes=["ReadWriteOnce"],
                        resources=VolumeResourceRequirements(requests={"storage": dbc.spec.storage}),
                    ),
                )
            ]
        sts = StatefulSet(metadata=ObjectMeta(name=name, namespace=ns, labels=labels), spec=spec)
        set_controller_reference(dbc, sts)
        action, _ = await ctx.client.create_or_update(sts)
        if action != "unchanged":
            self._changed(ctx, dbc, "StatefulSet", name, action)
        out: StatefulSet | None = await ctx.client.get(StatefulSet, name, namespace=ns)
        return out

    def _changed(self, ctx: Context, dbc: DatabaseCluster, kind: str, name: str, action: str) -> None:
        ctx.log.info("%s %s %s", kind, name, action)
        if kind != "StatefulSet" or action == "created":
            ctx.recorder.event(dbc, "Normal", f"{kind}{action.capitalize()}", f"{kind} {name} {action}")

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
        ready = [p for p in live if pod_ready(p)]
        status.members = replicas
        status.ready_members = len(ready)
        status.config_hash = hash_
        status.member_status = [
            Member(
                name=p.metadata.name or "",
                ready=pod_ready(p),
                config_hash=(p.metadata.annotations or {}).get(CONFIG_HASH),
            )
            for p in live
        ]
        status.updated_members = sum(1 for m in status.member_status if m.ready and m.config_hash == hash_)
        rolling = sts is not None and (
            any(m.config_hash != hash_ for m in status.member_status)
            or _sts_status(sts).update_revision != _sts_status(sts).current_revision
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
        .owns(StatefulSet)
        .owns(Service)
        .owns(ConfigMap)
        .watches(Pod, instance_owner(MANAGER))
        .watches(Secret, rec.secret_refs.referrers)
        .named("databasecluster")
        .reconcile(rec.reconcile)
    )
