"""The CronTab kind in two versions, converted hub (v1) and spoke (v1beta1)."""

from __future__ import annotations

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


class CronTabSpec(CamelModel):
    schedule: Schedule
    image: str
    replicas: int | None = None


class CronTab(
    CustomResource,
    group=GROUP,
    version="v1",
    kind="CronTab",
    short_names=["ct"],
    storage=True,
    printer_columns=[PrinterColumn("Image", ".spec.image"), PrinterColumn("Replicas", ".spec.replicas")],
):
    """v1: the hub of conversions and the version objects are stored in."""

    spec: CronTabSpec


class CronTabSpecV1Beta1(CamelModel):
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
    printer_columns=[PrinterColumn("Spec", ".spec.cronSpec"), PrinterColumn("Image", ".spec.image")],
):
    """v1beta1: the schedule as one string, as seed 001 wrote it."""

    spec: CronTabSpecV1Beta1

    def to_hub(self) -> CronTab:
        fields = self.spec.cron_spec.split(" ")
        if len(fields) != 5:
            raise ValueError(f"spec.cronSpec {self.spec.cron_spec!r} does not have five fields")
        minute, hour, dom, month, dow = fields
        schedule = Schedule(minute=minute, hour=hour, day_of_month=dom, month=month, day_of_week=dow)
        return CronTab(
            metadata=self.metadata,
            spec=CronTabSpec(schedule=schedule, image=self.spec.image, replicas=self.spec.replicas),
        )

    @classmethod
    def from_hub(cls, hub: CronTab) -> CronTabV1Beta1:
        spec = CronTabSpecV1Beta1(
            cron_spec=hub.spec.schedule.expression(), image=hub.spec.image, replicas=hub.spec.replicas
        )
        return cls(metadata=hub.metadata, spec=spec)


VERSIONS: list[type[CustomResource]] = [CronTabV1Beta1, CronTab]
