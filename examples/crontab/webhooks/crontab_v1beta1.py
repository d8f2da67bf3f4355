"""The CronTab v1beta1 webhooks: validation of the cron expression, replicas defaulted to 1."""

from __future__ import annotations

from examples.crontab.api.v1beta1.crontab import CronTabV1Beta1
from examples.crontab.cron import cron_problem
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
    """replicas: 1 unless given.

    Both webhooks take v1beta1 (v1 writes reach them converted, matchPolicy Equivalent): the
    mutating webhook runs before anything validates, and a v1beta1 object with a malformed
    cronSpec cannot be converted to v1's structured schedule, so a v1 defaulter would turn the
    validator's clear denial into a conversion error.
    """
    if obj.spec.replicas is None:
        obj.spec.replicas = 1
    return obj


WEBHOOKS = [validate, default]
# --8<-- [end:webhooks]
