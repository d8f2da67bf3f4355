"""CronTab stable.example.com/v1beta1: the schedule as one string (``cronSpec``), as seed 001
wrote it; deprecated, converted to and from v1 (the hub)."""

from __future__ import annotations

from examples.crontab.api.v1.crontab import (
    GROUP,
    CronTab,
    CronTabSpec,
    CronTabStatus,
    Schedule,
    Scheduling,
    scheduling_fields,
)
from kubeop.crd import CustomResource, PrinterColumn


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

    # --8<-- [start:convert]
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
                **scheduling_fields(self.spec),
            ),
            status=self.status,
        )

    @classmethod
    def from_hub(cls, hub: CronTab) -> CronTabV1Beta1:
        spec = CronTabSpecV1Beta1(
            cron_spec=hub.spec.schedule.expression(),
            image=hub.spec.image,
            replicas=hub.spec.replicas,
            **scheduling_fields(hub.spec),
        )
        return cls(metadata=hub.metadata, spec=spec, status=hub.status)


# --8<-- [end:convert]
