"""CronTab stable.example.com/v1: the storage version and the hub of conversions (v1beta1, in
api/v1beta1/crontab.py, converts to and from it).

Both versions carry the same scheduling fields next to the schedule (named and defaulted as
batch/v1 CronJob's: ``startingDeadlineSeconds``, ``successfulJobsHistoryLimit`` 3,
``failedJobsHistoryLimit`` 1, ``timeZone`` UTC) and the same status, written by the controller
(examples/crontab/controllers/crontab.py).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from examples.kube import Condition
from kubeop.crd import CamelModel, CustomResource, PrinterColumn

GROUP = "stable.example.com"


# --8<-- [start:schedule]
class Schedule(CamelModel):
    """The five fields of a cron expression, each as written (``*/5``, ``1-5``, ``0,30``)."""

    minute: str = "*"
    hour: str = "*"
    day_of_month: str = "*"
    month: str = "*"
    day_of_week: str = "*"

    def expression(self) -> str:
        return " ".join((self.minute, self.hour, self.day_of_month, self.month, self.day_of_week))


# --8<-- [end:schedule]


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


# --8<-- [start:spec]
class CronTabSpec(Scheduling):
    schedule: Schedule
    image: str
    replicas: int | None = None


# --8<-- [end:spec]


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


# --8<-- [start:kind]
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


# --8<-- [end:kind]


def scheduling_fields(spec: Scheduling) -> dict[str, Any]:
    """The scheduling fields of ``spec`` by name, to carry them across a conversion."""
    return {name: getattr(spec, name) for name in Scheduling.model_fields}
