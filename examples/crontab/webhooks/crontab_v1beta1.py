"""The CronTab v1beta1 webhooks: validation of the cron expression (what a CronJob's schedule
accepts, see examples/crontab/cron.py), replicas defaulted to 1, a descriptor written as fields."""

from __future__ import annotations

from examples.crontab.api.v1beta1.crontab import CronTabV1Beta1
from examples.crontab.cron import DESCRIPTORS, cron_problem
from examples.crontab.schedule import CronSchedule, InvalidSchedule
from kubeop.webhook import Allowed, Denied, FieldError, defaulting, validating


# --8<-- [start:webhooks]
@validating(CronTabV1Beta1)
def validate(new: CronTabV1Beta1, old: CronTabV1Beta1 | None) -> Allowed | None:
    """Reject an invalid cron expression (naming spec.cronSpec) or time zone (spec.timeZone);
    warn when replicas grows past 5."""
    problem = cron_problem(new.spec.cron_spec)
    if problem is not None:
        raise Denied(fields=[FieldError("spec.cronSpec", problem)])
    try:
        CronSchedule(new.spec.cron_spec, new.spec.time_zone)
    except InvalidSchedule as exc:  # a day no month has (30 2), a time zone that does not exist
        field = "spec.timeZone" if "time zone" in str(exc) else "spec.cronSpec"
        raise Denied(fields=[FieldError(field, str(exc))]) from None
    if (new.spec.replicas or 1) > 5:
        return Allowed(warnings=[f"spec.replicas is {new.spec.replicas}: more than 5 runs at once"])
    return None


@defaulting(CronTabV1Beta1)
def default(obj: CronTabV1Beta1) -> CronTabV1Beta1:
    """replicas: 1 unless given; a valid schedule spelt as v1's five fields (``@hourly`` as
    ``0 * * * *``, runs of spaces as one), so the object converts to v1, the storage version.

    Both webhooks take v1beta1 (v1 writes reach them converted, matchPolicy Equivalent): the
    mutating webhook runs before anything validates, and a v1beta1 object with a malformed
    cronSpec cannot be converted to v1's structured schedule, so a v1 defaulter would turn the
    validator's clear denial into a conversion error.
    """
    if obj.spec.replicas is None:
        obj.spec.replicas = 1
    spec = obj.spec.cron_spec
    if cron_problem(spec) is None:  # an invalid one is left for the validator to name
        obj.spec.cron_spec = DESCRIPTORS.get(spec) or " ".join(spec.split())
    return obj


WEBHOOKS = [validate, default]
# --8<-- [end:webhooks]
