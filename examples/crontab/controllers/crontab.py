"""The CronTab controller (seed 001): a batch/v1 Job at each time the cron expression names.

Each reconcile, at ``ctx.now()`` (the manager's clock, which a test steps):

1. Reads the CronTab's Jobs (owned, labelled with its name) and writes what they say into the
   status: ``active`` (references of the Jobs still running), ``lastSuccessfulTime``.
2. Deletes finished Jobs beyond ``successfulJobsHistoryLimit`` (3) and
   ``failedJobsHistoryLimit`` (1), oldest scheduled time first, propagation Background.
3. Plans with :func:`examples.crontab.schedule.plan`: the most recent scheduled time not yet
   run (after ``lastScheduleTime``, else the creation), within ``startingDeadlineSeconds``.
   Its Job is named ``<crontab>-<minutes since the epoch>``: a second create for the same time
   (another replica, a restart before the status was written) is AlreadyExists, which means
   done. Then ``lastScheduleTime`` moves to that time.
4. Comes back at the next scheduled time, plus 100 ms (``Result(requeue_after=...)``).

The Job: ``spec.replicas`` (1 when unset) pods of ``spec.image`` run at once
(``parallelism``) and must all succeed (``completions``), restartPolicy Never, the CronTab as
controller owner (garbage-collected with it).

The ``Scheduled`` condition says how scheduling goes: True ``OnSchedule`` (next run named),
True ``TooManyMissedTimes`` (over 100 times were missed; the most recent ran), False
``MissedSchedule`` (the most recent time was more than startingDeadlineSeconds ago and was
skipped), False ``InvalidSchedule`` (no Job is made; nothing is retried until the spec changes),
False ``JobNameTaken`` (a Job of that name exists and is not this CronTab's). Every False one,
and TooManyMissedTimes, is also a Warning Event, once per change of the condition.
"""

from __future__ import annotations

import datetime as dt

from examples.crontab.api.v1.crontab import CronTab, CronTabStatus, JobReference
from examples.crontab.cron import cron_problem
from examples.crontab.schedule import MACROS, CronSchedule, InvalidSchedule, Plan, job_name, plan
from examples.kube import (
    condition,
    job_failed,
    job_finished,
    job_succeeded,
    owner_labels,
    parse_time,
    rfc3339,
    set_conditions,
    status_dict,
)
from kubeop.controller import (
    Context,
    Controller,
    GenerationChanged,
    Request,
    Result,
    set_controller_reference,
)
from kubeop.core.errors import AlreadyExists, NotFound
from kubeop.crd import rbac_rule
from kubeop.kinds import Job
from kubeop.kinds.batch_v1 import JobSpec
from kubeop.kinds.core_v1 import Container, PodSpec, PodTemplateSpec
from kubeop.kinds.meta_v1 import ObjectMeta

__all__ = ["SCHEDULED_AT", "CronTabController", "controller", "job_manifest"]

MANAGER = "crontab-operator"
#: The annotation on each Job with the time it was scheduled for (RFC 3339).
SCHEDULED_AT = "stable.example.com/scheduled-at"
DEFAULT_SUCCESSFUL_HISTORY = 3
DEFAULT_FAILED_HISTORY = 1
#: After the scheduled time, so the requeue never lands a hair before it.
SLACK = 0.1
#: Longest name a Job can have and still label its pods (63) with "-<8 digit minutes>" added.
MAX_NAME = 52


# --8<-- [start:job]
def job_manifest(ct: CronTab, scheduled: dt.datetime) -> Job:
    """The Job for the run of ``ct`` scheduled at ``scheduled``."""
    name, ns = ct.metadata.name or "", ct.metadata.namespace or ""
    replicas = 1 if ct.spec.replicas is None else ct.spec.replicas
    job = Job(
        metadata=ObjectMeta(
            name=job_name(name, scheduled),
            namespace=ns,
            labels=owner_labels("crontab", name, MANAGER),
            annotations={SCHEDULED_AT: rfc3339(scheduled)},
        ),
        spec=JobSpec(
            parallelism=replicas,
            completions=replicas,
            template=PodTemplateSpec(
                metadata=ObjectMeta(labels=owner_labels("crontab", name, MANAGER)),
                spec=PodSpec(
                    restart_policy="Never",
                    containers=[Container(name="crontab", image=ct.spec.image)],
                ),
            ),
        ),
    )
    set_controller_reference(ct, job)
    return job


# --8<-- [end:job]


def _scheduled_at(job: Job) -> dt.datetime:
    annotations = job.metadata.annotations or {}
    return (
        parse_time(annotations.get(SCHEDULED_AT))
        or parse_time(job.metadata.creation_timestamp)
        or dt.datetime.min.replace(tzinfo=dt.UTC)
    )


def _ref(job: Job) -> JobReference:
    return JobReference(
        name=job.metadata.name or "", namespace=job.metadata.namespace or "", uid=job.metadata.uid
    )


def expired(jobs: list[Job], successful_limit: int, failed_limit: int) -> list[Job]:
    """The finished Jobs to delete: all but the newest ``successful_limit`` successful and
    ``failed_limit`` failed ones (newest by scheduled time)."""
    newest = sorted(jobs, key=_scheduled_at, reverse=True)
    succeeded = [j for j in newest if job_succeeded(j)]
    failed = [j for j in newest if job_failed(j)]
    return succeeded[successful_limit:] + failed[failed_limit:]


def schedule_of(ct: CronTab) -> CronSchedule:
    """The CronTab's schedule, or InvalidSchedule naming the field that is wrong."""
    expression = ct.spec.schedule.expression()
    if expression.strip().lower() not in MACROS:
        problem = cron_problem(expression)
        if problem is not None:
            raise InvalidSchedule(f"spec.schedule: {problem}")
    try:
        return CronSchedule(expression, ct.spec.time_zone)
    except InvalidSchedule as exc:
        field = "spec.timeZone" if "time zone" in str(exc) else "spec.schedule"
        raise InvalidSchedule(f"{field}: {exc}") from None


# --8<-- [start:rbac]
@rbac_rule(groups="stable.example.com", resources="crontabs", verbs="get;list;watch")
@rbac_rule(groups="stable.example.com", resources="crontabs/status", verbs="get;update;patch")
@rbac_rule(groups="stable.example.com", resources="crontabs/finalizers", verbs="update")  # blockOwnerDeletion
@rbac_rule(groups="batch", resources="jobs", verbs="get;list;watch;create;delete")
class CronTabController:
    # --8<-- [end:rbac]
    """Reconciles CronTabs into Jobs; see the module docstring."""

    async def reconcile(self, req: Request, ctx: Context) -> Result | None:
        ct = await ctx.client.get(CronTab, req.name, namespace=req.namespace)
        if ct is None or ct.metadata.deletion_timestamp is not None:
            return None
        now = ctx.now()
        status = ct.status.model_copy(deep=True) if ct.status else CronTabStatus()
        gen = ct.metadata.generation
        status.observed_generation = gen

        jobs = [
            j
            for j in await ctx.client.list(
                Job, namespace=req.namespace, labels=owner_labels("crontab", req.name, MANAGER)
            )
            if _owned_by(j, ct)
        ]
        await self._trim(ctx, ct, jobs)
        self._observe(status, jobs)

        try:
            schedule = schedule_of(ct)
            if len(req.name) > MAX_NAME:
                raise InvalidSchedule(
                    f"metadata.name is {len(req.name)} characters: a CronTab that runs Jobs may have "
                    f"at most {MAX_NAME} (its Jobs' names add 9)"
                )
        except InvalidSchedule as exc:
            await self._report(ctx, ct, status, False, "InvalidSchedule", str(exc))
            return None  # a spec change brings it back: nothing to retry until then

        # --8<-- [start:plan]
        last = parse_time(status.last_schedule_time)
        created = parse_time(ct.metadata.creation_timestamp) or now
        todo = plan(
            schedule,
            last=last,
            created=created,
            now=now,
            starting_deadline_seconds=ct.spec.starting_deadline_seconds,
        )
        reason, message, ok = "OnSchedule", f"next run at {rfc3339(todo.next)}", True
        if todo.run is not None:
            taken = await self._run(ctx, ct, status, jobs, todo.run)
            if taken is not None:
                reason, message, ok = "JobNameTaken", taken, False
            elif todo.too_many_missed:
                reason, ok = "TooManyMissedTimes", True
                message = (
                    f"more than {todo.unmet - 1} scheduled times were missed (check clock skew, or set "
                    f"or decrease spec.startingDeadlineSeconds); ran the most recent, "
                    f"{rfc3339(todo.run)}; {message}"
                )
        elif todo.missed is not None:
            reason, ok = "MissedSchedule", False
            message = (
                f"missed the run at {rfc3339(todo.missed)}: more than spec.startingDeadlineSeconds "
                f"({ct.spec.starting_deadline_seconds} s) ago; {message}"
            )
        elif (said := condition(status.conditions, "Scheduled")) and said.reason == "TooManyMissedTimes":
            reason, message = said.reason, said.message  # until the next run: it still holds
        if not await self._report(ctx, ct, status, ok, reason, message):
            return None  # deleted meanwhile: nothing to come back for
        return Result(requeue_after=_requeue_after(todo, ctx.now()))

    # --8<-- [end:plan]

    async def _run(
        self, ctx: Context, ct: CronTab, status: CronTabStatus, jobs: list[Job], scheduled: dt.datetime
    ) -> str | None:
        """Start the Job for ``scheduled`` unless it exists; a problem message, or None."""
        name = job_name(ct.metadata.name or "", scheduled)
        if any(j.metadata.name == name for j in jobs):
            ctx.log.debug("job %s exists already", name)
        else:
            try:
                job = Job.model_validate(await ctx.client.create(job_manifest(ct, scheduled)))
            except AlreadyExists:
                job = await ctx.client.api.get(Job, name, namespace=ct.metadata.namespace)
                if not _owned_by(job, ct):
                    return f"Job {name} exists and is not this CronTab's: delete or rename it"
                ctx.log.info("job %s was created by another instance", name)
            else:
                ctx.log.debug("created job %s for %s", name, rfc3339(scheduled))
                ctx.recorder.event(ct, "Normal", "SuccessfulCreate", f"Created job {name}")
            if not job_finished(job) and all(r.name != name for r in status.active):
                status.active.append(_ref(job))
        status.last_schedule_time = rfc3339(scheduled)
        return None

    async def _trim(self, ctx: Context, ct: CronTab, jobs: list[Job]) -> None:
        spec = ct.spec
        ok = spec.successful_jobs_history_limit
        failed = spec.failed_jobs_history_limit
        for job in expired(
            jobs,
            DEFAULT_SUCCESSFUL_HISTORY if ok is None else ok,
            DEFAULT_FAILED_HISTORY if failed is None else failed,
        ):
            name = job.metadata.name or ""
            if await ctx.client.delete(
                Job, name, namespace=ct.metadata.namespace, propagation_policy="Background"
            ):
                ctx.log.info("deleted finished job %s (history limit)", name)
                ctx.recorder.event(ct, "Normal", "SuccessfulDelete", f"Deleted job {name}")
            jobs.remove(job)

    def _observe(self, status: CronTabStatus, jobs: list[Job]) -> None:
        running = sorted((j for j in jobs if not job_finished(j)), key=_scheduled_at)
        status.active = [_ref(j) for j in running]
        completions = [parse_time(j.status.completion_time) for j in jobs if j.status and job_succeeded(j)]
        times = [t for t in [*completions, parse_time(status.last_successful_time)] if t is not None]
        if times:
            status.last_successful_time = rfc3339(max(times))

    async def _report(
        self, ctx: Context, ct: CronTab, status: CronTabStatus, ok: bool, reason: str, message: str
    ) -> bool:
        """Write the status with the Scheduled condition; False when the CronTab is gone."""
        before = condition(status.conditions, "Scheduled")
        changed = before is None or before.reason != reason or before.message != message
        if changed and (not ok or reason != "OnSchedule"):
            ctx.recorder.event(ct, "Warning", reason, message)
            ctx.log.warning("%s: %s", reason, message)
        status.conditions = set_conditions(
            status.conditions, "Scheduled", ok, reason, message, ct.metadata.generation
        )
        try:
            await ctx.client.patch_status(ct, status_dict(status))
        except NotFound:  # deleted during this reconcile: its Jobs go with it (owner references)
            ctx.log.debug("crontab %s is gone: status not written", ct.metadata.name)
            return False
        return True


def _owned_by(job: Job, ct: CronTab) -> bool:
    refs = job.metadata.owner_references or []
    return any(r.uid == ct.metadata.uid and r.controller for r in refs)


def _requeue_after(todo: Plan, now: dt.datetime) -> float:
    return max((todo.next - now).total_seconds(), 0.0) + SLACK


# --8<-- [start:controller]
def controller() -> Controller:
    """The CronTab controller: CronTabs (spec changes) and the Jobs they own."""
    rec = CronTabController()
    return Controller.for_(CronTab, GenerationChanged).owns(Job).named("crontab").reconcile(rec.reconcile)


# --8<-- [end:controller]
