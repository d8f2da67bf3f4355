"""The CronTab kind in two versions, converted hub (v1) and spoke (v1beta1).

Both versions carry the same scheduling fields next to the schedule (named and defaulted as
batch/v1 CronJob's: ``startingDeadlineSeconds``, ``successfulJobsHistoryLimit`` 3,
``failedJobsHistoryLimit`` 1, ``timeZone`` UTC) and the same status, written by the controller
(examples/crontab/controller.py).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from examples.kube import Condition
from kubeop.crd import CamelModel, CustomResource, PrinterColumn

GROUP = "stable.example.com"


class Schedule(CamelModel):
    """The five fields of a cron expression, each as written (``*/5``, ``1-5``, ``0,30``)."""

    minute: str = "*"
    hour: str = "*"
    day_of_month: str = "*"
    month: str = "*"
    day_of_week: str = "*"

    def expression(self) -> str:
        return " ".join((self.minute, self.hour, self.day_of_month, self.month, self.day_of_week))


class Scheduling(CamelModel):
    """When a scheduled run may still start, how many finished Jobs are kept, the time zone."""

    starting_deadline_seconds: int | None = Field(
        default=None,
        ge=0,
        description="A run later than this many seconds after its scheduled time is skipped "
        "(counted as missed); unset: a late run always starts.",
    )
    successful_jobs_history_limit: int | None = Field(
        default=None, ge=0, description="Successful Jobs kept (default 3); older ones are deleted."
    )
    failed_jobs_history_limit: int | None = Field(
        default=None, ge=0, description="Failed Jobs kept (default 1); older ones are deleted."
    )
    time_zone: str | None = Field(
        default=None, description="The IANA time zone of the schedule, e.g. Europe/Berlin (default UTC)."
    )


class CronTabSpec(Scheduling):
    schedule: Schedule
    image: str
    replicas: int | None = None


class JobReference(CamelModel):
    """A Job the CronTab started (an ObjectReference, as CronJob's status.active)."""

    api_version: Literal["batch/v1"] = "batch/v1"
    kind: Literal["Job"] = "Job"
    name: str
    namespace: str
    uid: str | None = None


class CronTabStatus(CamelModel):
    """What the controller observed and did: running Jobs, the last run, the Scheduled condition."""

    active: list[JobReference] = Field(default_factory=list)
    last_schedule_time: str | None = Field(default=None, description="The scheduled time of the last run.")
    last_successful_time: str | None = Field(
        default=None, description="When the last successful Job completed."
    )
    conditions: list[Condition] = Field(default_factory=list)
    observed_generation: int | None = None


class CronTab(
    CustomResource,
    group=GROUP,
    version="v1",
    kind="CronTab",
    short_names=["ct"],
    storage=True,
    subresources=("status",),
    printer_columns=[
        PrinterColumn("Image", ".spec.image"),
        PrinterColumn("Replicas", ".spec.replicas"),
        PrinterColumn("Last Schedule", ".status.lastScheduleTime"),
    ],
):
    """v1: the hub of conversions and the version objects are stored in."""

    spec: CronTabSpec
    status: CronTabStatus | None = None


class CronTabSpecV1Beta1(Scheduling):
    cron_spec: str
    image: str
    replicas: int | None = None


class CronTabV1Beta1(
    CustomResource,
    group=GROUP,
    version="v1beta1",
    kind="CronTab",
    short_names=["ct"],
    deprecated=True,
    deprecation_warning="stable.example.com/v1beta1 CronTab is deprecated; use stable.example.com/v1",
    subresources=("status",),
    printer_columns=[
        PrinterColumn("Spec", ".spec.cronSpec"),
        PrinterColumn("Image", ".spec.image"),
        PrinterColumn("Last Schedule", ".status.lastScheduleTime"),
    ],
):
    """v1beta1: the schedule as one string, as seed 001 wrote it."""

    spec: CronTabSpecV1Beta1
    status: CronTabStatus | None = None

    def to_hub(self) -> CronTab:
        fields = self.spec.cron_spec.split(" ")
        if len(fields) != 5:
            raise ValueError(f"spec.cronSpec {self.spec.cron_spec!r} does not have five fields")
        minute, hour, dom, month, dow = fields
        schedule = Schedule(minute=minute, hour=hour, day_of_month=dom, month=month, day_of_week=dow)
        return CronTab(
            metadata=self.metadata,
            spec=CronTabSpec(
                schedule=schedule,
                image=self.spec.image,
                replicas=self.spec.replicas,
                **_scheduling(self.spec),
            ),
            status=self.status,
        )

    @classmethod
    def from_hub(cls, hub: CronTab) -> CronTabV1Beta1:
        spec = CronTabSpecV1Beta1(
            cron_spec=hub.spec.schedule.expression(),
            image=hub.spec.image,
            replicas=hub.spec.replicas,
            **_scheduling(hub.spec),
        )
        return cls(metadata=hub.metadata, spec=spec, status=hub.status)


def _scheduling(spec: Scheduling) -> dict[str, Any]:
    return {name: getattr(spec, name) for name in Scheduling.model_fields}


VERSIONS: list[type[CustomResource]] = [CronTabV1Beta1, CronTab]
