"""The MySQL controller (seed 000).

For each MySQL it keeps: a root-password Secret (generated once, never overwritten; or the
user's, named in ``spec.rootPasswordSecret``), a headless Service for the pods' stable names, a
client Service, and a StatefulSet of ``spec.replicas`` mysql pods, each with a volume from the
``volumeClaimTemplate`` (removed with the StatefulSet).

Mail on every pod start and stop, exactly once per transition. A reconcile compares the pods
with ``status.pods`` (the pods whose start was already noticed): a Running pod not in it has
started, a pod in it that is no longer Running (deleted, failed, gone) has stopped. Each
transition is first *recorded* in ``status.outbox`` (a status write with the resourceVersion as
precondition, so two writers cannot both record it), then mailed, then removed from the outbox.
Resyncs, restarts and leader changes find the transitions already recorded: no second mail. A
mail SMTP refuses stays in the outbox with its attempt count and next attempt time (backoff
doubling up to a cap, kept on the cluster too), a Warning Event per failed attempt, and the
``Notified`` condition saying why.

Deleting a MySQL runs a finalizer: the StatefulSet is scaled to 0, the stop mails go out, and
only then does the MySQL (and, by garbage collection, everything it owns) go away.

Bad input (replicas < 0, a storage size that does not parse, a root password Secret that does
not exist) is a ``Ready=False`` condition with the reason and a Warning Event, and nothing is
created; a missing Secret is looked at again when it appears (Secrets are watched).
"""

from __future__ import annotations

import base64
import datetime as dt
import secrets
import smtplib
from collections.abc import Callable
from typing import Any

from examples.kube import (
    References,
    instance_owner,
    now,
    owner_labels,
    parse_quantity,
    parse_time,
    pod_running,
    rfc3339,
    set_conditions,
    status_dict,
)
from examples.mysql.api.v1alpha1.mysql import MySQL, MySQLStatus, Notification, TrackedPod
from examples.mysql.controllers.notify import Mail, Mailer
from kubeop import (
    Context,
    Controller,
    Dependent,
    GenerationChanged,
    PatchType,
    Request,
    Result,
    Workflow,
    rbac_rule,
    set_controller_reference,
)
from kubeop.kinds import Pod, Secret, Service, StatefulSet
from kubeop.kinds.apps_v1 import StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec
from kubeop.kinds.core_v1 import (
    Container,
    ContainerPort,
    EnvVar,
    EnvVarSource,
    PersistentVolumeClaim,
    PersistentVolumeClaimSpec,
    PodSpec,
    PodTemplateSpec,
    SecretKeySelector,
    ServicePort,
    ServiceSpec,
    VolumeMount,
    VolumeResourceRequirements,
)
from kubeop.kinds.meta_v1 import LabelSelector, ObjectMeta

MANAGER = "mysql-operator"
FINALIZER = "db.example.com/stop-and-notify"


def _service(suffix: str, **spec: Any) -> Callable[[MySQL, Context], Service]:
    def desired(db: MySQL, ctx: Context) -> Service:
        labels = owner_labels("mysql", db.metadata.name or "", MANAGER)
        port = ServicePort(name="mysql", port=3306, target_port=3306)
        return Service(
            metadata=ObjectMeta(name=f"{db.metadata.name}{suffix}", labels=labels),
            spec=ServiceSpec(selector=labels, ports=[port], **spec),
        )

    return desired


#: The headless Service (the pods' stable names) and the client Service, written before the
#: StatefulSet by every reconcile of a valid MySQL; the conditions are the controller's own.
SERVICES = Workflow(
    Dependent(
        Service,
        desired=_service("-headless", cluster_ip="None", publish_not_ready_addresses=True),
        name="headless",
    ),
    Dependent(Service, desired=_service("", type="ClusterIP"), name="client"),
    conditions=False,
)


# What the reconciler reads and writes: `kubeop manifests` turns these into config/rbac/role.yaml.
@rbac_rule(groups="db.example.com", resources="mysqls", verbs="get;list;watch;update;patch")
@rbac_rule(groups="db.example.com", resources="mysqls/status", verbs="get;update;patch")
@rbac_rule(groups="db.example.com", resources="mysqls/finalizers", verbs="update")
@rbac_rule(groups="apps", resources="statefulsets", verbs="get;list;watch;create;update;patch")
@rbac_rule(groups="", resources="services", verbs="get;list;watch;create;update;patch")
@rbac_rule(groups="", resources="secrets", verbs="get;list;watch;create")
@rbac_rule(groups="", resources="pods", verbs="get;list;watch")
class MySQLController:
    """The reconciler and the state it shares with its watches (which Secrets are referenced)."""

    def __init__(self, mailer: Mailer | None = None) -> None:
        self.mailer = mailer
        # which Secret each MySQL references: a Secret that appears wakes them
        self.secret_refs = References()

    # -- reconcile -----------------------------------------------------------------------------
    async def reconcile(self, req: Request, ctx: Context) -> Result | None:
        db = await ctx.client.get(MySQL, req.name, namespace=req.namespace)
        if db is None:
            return None
        deleting = db.metadata.deletion_timestamp is not None
        if not deleting:
            await ctx.client.add_finalizer(db, FINALIZER)
        status = db.status.model_copy(deep=True) if db.status else MySQLStatus()
        gen = db.metadata.generation

        problem = self._check(db)
        secret_name: str | None = None
        if problem is None:
            secret_name, problem = await self._password_secret(ctx, db)
        if problem is not None and not deleting:
            reason, message = problem
            ctx.recorder.event(db, "Warning", reason, message)
            ctx.log.warning("%s: %s", reason, message)
            status.conditions = set_conditions(status.conditions, "Ready", False, reason, message, gen)
            status.phase = "Invalid"
            status.observed_generation = gen
            await ctx.client.patch_status(db, status_dict(status))
            return None  # nothing (more) is created; a spec change or the Secret appearing retries

        sts = await self._children(ctx, db, secret_name, replicas=0 if deleting else None)
        pods = await ctx.client.list(
            Pod, namespace=req.namespace, labels=owner_labels("mysql", req.name, MANAGER)
        )
        status.root_password_secret = secret_name or status.root_password_secret
        sts_status = sts.status if sts is not None else None
        status.ready_replicas = (sts_status.ready_replicas or 0) if sts_status is not None else 0
        want = 0 if deleting else db.spec.replicas
        ready = status.ready_replicas >= want and (
            sts is None or (sts_status.replicas if sts_status is not None else 0) == want
        )
        status.phase = "Stopping" if deleting else ("Running" if ready else "Pending")
        status.observed_generation = gen
        status.conditions = set_conditions(
            status.conditions,
            "Ready",
            ready,
            "PodsReady" if ready else "PodsNotReady",
            f"{status.ready_replicas}/{want} pods ready",
            gen,
        )

        # 1. Record the transitions (the cluster remembers them before any mail goes out).
        rv, written = db.metadata.resource_version, db.status
        if self._notice(db, status, pods):
            rv, written = await self._write(ctx, db, status, rv), status.model_copy(deep=True)
        # 2. Mail what is due; record what went out.
        requeue = await self._deliver(ctx, db, status)
        if status != written:
            await self._write(ctx, db, status, rv)
        if self.mailer is not None:
            for sent in db.status.outbox if db.status else []:
                if all(n.id != sent.id for n in status.outbox):
                    self.mailer.forget(_message_id(db, sent))

        if deleting and not pods and not status.outbox:
            await ctx.client.remove_finalizer(db, FINALIZER)
            ctx.log.info("stopped and notified; letting go")
            return None
        return Result(requeue_after=requeue) if requeue is not None else None

    def _check(self, db: MySQL) -> tuple[str, str] | None:
        if db.spec.replicas < 0:
            return "InvalidReplicas", f"spec.replicas is {db.spec.replicas}: it must be 0 or more"
        try:
            size = parse_quantity(db.spec.storage)
        except ValueError as exc:
            return "InvalidStorage", f"spec.storage: {exc}"
        if size <= 0:
            return "InvalidStorage", f"spec.storage is {db.spec.storage!r}: it must be more than 0"
        return None

    async def _password_secret(self, ctx: Context, db: MySQL) -> tuple[str | None, tuple[str, str] | None]:
        ns, name = db.metadata.namespace or "", db.metadata.name or ""
        ref = db.spec.root_password_secret
        self.secret_refs.note(ns, name, ref.name if ref is not None else None)
        if ref is not None:
            secret = await ctx.client.get(Secret, ref.name, namespace=ns)
            if secret is None:
                return None, (
                    "SecretNotFound",
                    f"Secret {ref.name!r} (spec.rootPasswordSecret) does not exist",
                )
            if ref.key not in (secret.data or {}):
                return None, ("SecretKeyNotFound", f"Secret {ref.name!r} has no key {ref.key!r}")
            return ref.name, None
        generated = f"{name}-root-password"
        if await ctx.client.get(Secret, generated, namespace=ns) is None:
            password = base64.b64encode(secrets.token_urlsafe(24).encode()).decode()
            secret_obj = Secret(
                metadata=ObjectMeta(
                    name=generated, namespace=ns, labels=owner_labels("mysql", name, MANAGER)
                ),
                type="Opaque",
                data={"password": password},
            )
            set_controller_reference(db, secret_obj)
            await ctx.client.create(
                secret_obj
            )  # never updated: a password is not rotated behind anyone's back
            ctx.recorder.event(db, "Normal", "PasswordGenerated", f"generated Secret {generated}")
        return generated, None

    async def _children(
        self, ctx: Context, db: MySQL, secret_name: str | None, *, replicas: int | None
    ) -> StatefulSet | None:
        ns, name = db.metadata.namespace or "", db.metadata.name or ""
        labels = owner_labels("mysql", name, MANAGER)
        current: StatefulSet | None = await ctx.client.get(StatefulSet, name, namespace=ns)
        if secret_name is None:  # being deleted with a spec that never worked: scale what exists
            if current is not None and (current.spec.replicas if current.spec else None) != 0:
                await ctx.client.patch(StatefulSet, name, {"spec": {"replicas": 0}}, namespace=ns)
            return current
        result = await SERVICES.reconcile(db, ctx)  # the Services first, then the StatefulSet
        result.raise_for_failures()
        for state in result.states.values():
            if state.action in ("created", "updated"):
                self._changed(ctx, db, "Service", state.actual.metadata.name, state.action)
        password_key = db.spec.root_password_secret.key if db.spec.root_password_secret else "password"
        container = Container(
            name="mysql",
            image=f"mysql:{db.spec.version}",
            ports=[ContainerPort(name="mysql", container_port=3306)],
            env=[
                EnvVar(
                    name="MYSQL_ROOT_PASSWORD",
                    value_from=EnvVarSource(
                        secret_key_ref=SecretKeySelector(name=secret_name, key=password_key)
                    ),
                )
            ],
            volume_mounts=[VolumeMount(name="data", mount_path="/var/lib/mysql")],
        )
        spec = StatefulSetSpec(
            replicas=db.spec.replicas if replicas is None else replicas,
            service_name=f"{name}-headless",
            selector=LabelSelector(match_labels=labels),
            persistent_volume_claim_retention_policy=StatefulSetPersistentVolumeClaimRetentionPolicy(
                when_deleted="Delete", when_scaled="Retain"
            ),
            template=PodTemplateSpec(
                metadata=ObjectMeta(labels=labels), spec=PodSpec(containers=[container])
            ),
        )
        if current is None:  # volumeClaimTemplates cannot change once the StatefulSet exists
            spec.volume_claim_templates = [
                PersistentVolumeClaim(
                    metadata=ObjectMeta(name="data", labels=labels),
                    spec=PersistentVolumeClaimSpec(
                        access_modes=["ReadWriteOnce"],
                        resources=VolumeResourceRequirements(requests={"storage": db.spec.storage}),
                    ),
                )
            ]
        sts = StatefulSet(metadata=ObjectMeta(name=name, namespace=ns, labels=labels), spec=spec)
        set_controller_reference(db, sts)
        action, _ = await ctx.client.create_or_update(sts)
        if action != "unchanged":
            self._changed(ctx, db, "StatefulSet", name, action)
        out: StatefulSet | None = await ctx.client.get(StatefulSet, name, namespace=ns)
        return out

    def _changed(self, ctx: Context, db: MySQL, kind: str, name: str | None, action: str) -> None:
        ctx.log.info("%s %s %s", kind, name, action)
        ctx.recorder.event(db, "Normal", f"{kind}{action.capitalize()}", f"{kind} {name} {action}")

    def _notice(self, db: MySQL, status: MySQLStatus, pods: list[Pod]) -> bool:
        """Move started and stopped pods into the outbox; True when anything was noticed."""
        when = rfc3339(now())
        running = {p.metadata.uid: p for p in pods if pod_running(p) and p.metadata.uid}
        tracked = {t.uid: t for t in status.pods}
        mail = bool(db.spec.notify) and self.mailer is not None
        changed = False
        for uid, gone in tracked.items():
            if uid not in running:
                status.pods = [t for t in status.pods if t.uid != uid]
                if mail:
                    status.outbox.append(
                        Notification(
                            id=f"{uid}/stopped", event="Stopped", pod=gone.name, node=gone.node, time=when
                        )
                    )
                changed = True
        for uid, pod in running.items():
            if uid not in tracked:
                status.pods.append(
                    TrackedPod(name=pod.metadata.name or "", uid=uid, node=_node(pod), since=when)
                )
                if mail:
                    status.outbox.append(
                        Notification(
                            id=f"{uid}/started",
                            event="Started",
                            pod=pod.metadata.name or "",
                            node=_node(pod),
                            time=when,
                        )
                    )
                changed = True
        return changed

    async def _deliver(self, ctx: Context, db: MySQL, status: MySQLStatus) -> float | None:
        """Send the due mails of the outbox; returns seconds until the next attempt, if any."""
        gen = db.metadata.generation
        if db.spec.notify and self.mailer is None:
            status.conditions = set_conditions(
                status.conditions, "Notified", False, "SMTPNotConfigured", "no SMTP server is configured", gen
            )
            return None
        mailer = self.mailer
        if mailer is None or not status.outbox:
            if db.spec.notify:
                status.conditions = set_conditions(
                    status.conditions, "Notified", True, "Delivered", f"{status.mails_sent} mails sent", gen
                )
            return None
        t = now()
        failed: list[Notification] = []
        error = ""
        for note in list(status.outbox):
            due = parse_time(note.next_attempt)
            if due is not None and due > t:
                continue
            if failed:  # SMTP just failed: the rest wait for the next attempt too
                failed.append(note)
                continue
            try:
                await mailer.send(_mail(db, note))
            except (OSError, smtplib.SMTPException) as exc:
                error = f"{type(exc).__name__}: {exc}"
                failed.append(note)
            else:
                status.outbox = [n for n in status.outbox if n.id != note.id]
                status.mails_sent += 1
                ctx.log.info("mailed: pod %s %s", note.pod, note.event.lower())
        for note in failed:
            note.attempts += 1
            delay = mailer.delay(note.attempts)
            note.next_attempt = rfc3339(t + dt.timedelta(seconds=delay))
            note.last_error = error[:300]
        if failed:
            attempts = max(n.attempts for n in failed)
            msg = (
                f"could not mail {len(failed)} notification(s) through {mailer.host}:{mailer.port} "
                f"(attempt {attempts}): {error}; next attempt in {mailer.delay(attempts):.1f} s"
            )
            ctx.recorder.event(db, "Warning", "MailFailed", msg)
            ctx.log.warning("%s", msg)
            status.conditions = set_conditions(
                status.conditions, "Notified", False, "SMTPUnavailable", msg, gen
            )
        elif not status.outbox:
            status.conditions = set_conditions(
                status.conditions, "Notified", True, "Delivered", f"{status.mails_sent} mails sent", gen
            )
        if not status.outbox:
            return None
        nexts = [parse_time(n.next_attempt) or t for n in status.outbox]
        return max(0.05, (min(nexts) - now()).total_seconds())

    async def _write(self, ctx: Context, db: MySQL, status: MySQLStatus, rv: str | None) -> str | None:
        """Write the status with ``rv`` as precondition (Conflict when someone wrote in between)."""
        out = await ctx.client.patch(
            MySQL,
            db.metadata.name or "",
            {"metadata": {"resourceVersion": rv}, "status": status_dict(status)},
            namespace=db.metadata.namespace,
            type=PatchType.MERGE,
            subresource="status",
        )
        new_rv: str | None = out["metadata"]["resourceVersion"]  # patch answers a dict, model or not
        return new_rv


def _node(pod: Pod) -> str | None:
    return pod.spec.node_name if pod.spec is not None else None


def _message_id(db: MySQL, note: Notification) -> str:
    return f"<{note.id.replace('/', '.')}.{db.metadata.uid}@{MANAGER}>"


def _mail(db: MySQL, note: Notification) -> Mail:
    ns, name = db.metadata.namespace, db.metadata.name
    verb = "started" if note.event == "Started" else "stopped"
    body = (
        f"Pod {ns}/{note.pod} of MySQL {name} {verb}.\n\n"
        f"  pod:   {note.pod}\n  node:  {note.node or '(none)'}\n"
        f"  time:  {note.time}\n  event: {note.event}\n"
    )
    return Mail(
        to=tuple(db.spec.notify),
        subject=f"[mysql {ns}/{name}] pod {note.pod} {verb} on {note.node or 'no node'}",
        body=body,
        message_id=_message_id(db, note),
    )


# --8<-- [start:controller]
def controller(mailer: Mailer | None = None) -> Controller:
    """The MySQL controller; ``mailer`` says where mails go (None: no mail is sent)."""
    rec = MySQLController(mailer)
    return (
        Controller.for_(MySQL, GenerationChanged)
        .owns(StatefulSet)
        .owns(Service)
        .owns(Secret)
        .watches(Pod, instance_owner(MANAGER))
        .watches(Secret, rec.secret_refs.referrers)
        .named("mysql")
        .reconcile(rec.reconcile)
    )


# --8<-- [end:controller]
