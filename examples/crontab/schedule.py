"""When a CronTab runs: the times its cron expression names, and after a gap (operator down,
clock stepped) which one of the missed times to run, with the CronJob controller's rules.

The calendar arithmetic is cronsim's (a small, maintained cron evaluator); what is decided
here is Kubernetes' reading of a schedule (robfig/cron, as kube-controller-manager parses it):

- day of month and day of week: a day matches when both match if either field is unrestricted
  (``*``, or ``*/1``), and when *either* matches otherwise (``0 0 13 * 5``: the 13th and every
  Friday). ``*/2`` counts as restricted, as in robfig/cron (cronsim alone would read it as ``*``).
- the macros ``@yearly`` (``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``),
  ``@hourly``; names in any case, ``?``, ``a/step``: an expression a CronJob accepts is read as
  robfig/cron reads it (:func:`examples.crontab.cron.normalized`) before cronsim evaluates it.
- times in UTC unless a time zone is named (an IANA name, as CronJob's ``timeZone``).

Missed times (pkg/controller/cronjob, utils.go ``mostRecentScheduleTime``): only the most
recent unmet time is run; with ``startingDeadlineSeconds`` only if it is no older than that
(older ones are skipped and reported as missed); more than 100 unmet times is reported (clock
skew or a long outage) and the most recent still runs. CronJob estimates the count from the
gap between two consecutive times, which under-counts uneven schedules and can miss the most
recent time of one (``0 9-17 * * 1-5`` after a night); here the unmet times are counted one by
one up to 101 and the most recent is found by searching back from now, which is exact.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import dataclass
from functools import cached_property

from cronsim import CronSim, CronSimError

from examples.crontab.cron import cron_problem, normalized

__all__ = ["MACROS", "TOO_MANY_MISSED", "CronSchedule", "InvalidSchedule", "Plan", "job_name", "plan"]

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
#: More unmet times than this is "too many" (the CronJob controller's number).
TOO_MANY_MISSED = 100
_DAY_RANGES = {2: "1-31", 4: "0-6"}  # what robfig/cron's "*" stands for in the two day fields


class InvalidSchedule(ValueError):
    """A schedule that cannot be evaluated; the message says why."""


@dataclass(frozen=True)
class CronSchedule:
    """A parsed cron expression (five fields or a macro) in a time zone."""

    expression: str
    time_zone: str | None = None

    def __post_init__(self) -> None:
        # Evaluate once: a bad field, a time zone that does not exist, or a day that never
        # comes (``0 0 30 2 *``) shows here, not in the middle of a reconcile.
        self.next_after(dt.datetime(2000, 1, 1, tzinfo=dt.UTC))

    @cached_property
    def _fields(self) -> str:
        if cron_problem(self.expression) is None:  # robfig/cron's reading, in cronsim's spelling
            return normalized(self.expression)
        expr = MACROS.get(self.expression.strip().lower(), self.expression)
        parts = expr.split()
        if len(parts) != 5:
            raise InvalidSchedule(
                f"{self.expression!r} has {len(parts)} fields: a cron expression has 5 "
                f"(minute hour day-of-month month day-of-week) or is one of {', '.join(MACROS)}"
            )
        for i, full in _DAY_RANGES.items():
            if parts[i].startswith("*/") and parts[i] != "*/1":
                parts[i] = full + parts[i][1:]
        return " ".join(parts)

    @property
    def _zone(self) -> dt.tzinfo:
        if not self.time_zone or self.time_zone == "UTC":
            return dt.UTC
        try:
            return zoneinfo.ZoneInfo(self.time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise InvalidSchedule(
                f"time zone {self.time_zone!r} is not an IANA time zone name (e.g. Europe/Berlin)"
            ) from None

    def _iter(self, start: dt.datetime, *, reverse: bool = False) -> CronSim:
        try:
            return CronSim(self._fields, start.astimezone(self._zone), reverse=reverse)
        except CronSimError as exc:
            raise InvalidSchedule(f"{self.expression!r}: {_explain(exc)}") from None

    def next_after(self, t: dt.datetime) -> dt.datetime:
        """The first scheduled time strictly after ``t`` (UTC)."""
        try:
            return next(self._iter(t)).astimezone(dt.UTC)
        except StopIteration:
            raise InvalidSchedule(f"{self.expression!r} names no time in the next 50 years") from None

    def latest_at_or_before(self, t: dt.datetime) -> dt.datetime | None:
        """The last scheduled time at or before ``t`` (UTC), or None within 50 years."""
        whole = t.replace(microsecond=0) + dt.timedelta(seconds=1)
        try:
            return next(self._iter(whole, reverse=True)).astimezone(dt.UTC)
        except StopIteration:
            return None


def _explain(exc: CronSimError) -> str:
    msg = str(exc)
    for cronsim_name, ours in (("day-of-month", "day of month"), ("day-of-week", "day of week")):
        msg = msg.replace(cronsim_name, ours)
    if msg == "Bad day of month":
        return "bad day of month (or a day that no month in the schedule has, like 30 2)"
    return msg[:1].lower() + msg[1:]


@dataclass(frozen=True)
class Plan:
    """What a reconcile at ``now`` should do."""

    run: dt.datetime | None
    """The scheduled time to start a Job for now, or None."""
    missed: dt.datetime | None
    """The most recent unmet time when it is too late for it (past startingDeadlineSeconds)."""
    unmet: int
    """Unmet times since the last run (or creation), counted up to ``TOO_MANY_MISSED + 1``."""
    next: dt.datetime
    """The next scheduled time after ``now``: when to look again."""

    @property
    def too_many_missed(self) -> bool:
        return self.unmet > TOO_MANY_MISSED


def plan(
    schedule: CronSchedule,
    *,
    last: dt.datetime | None,
    created: dt.datetime,
    now: dt.datetime,
    starting_deadline_seconds: int | None = None,
) -> Plan:
    """Which time to run at ``now``: the most recent unmet time after ``last`` (the last
    scheduled run, else ``created``), unless it is older than ``starting_deadline_seconds``.

    As the CronJob controller, unmet times are looked for only within the deadline (so a long
    outage with a deadline is not "too many missed"); a time before the deadline that was
    never run is reported as ``missed``.
    """
    earliest = last or created
    window = earliest
    if starting_deadline_seconds is not None:
        window = max(earliest, now - dt.timedelta(seconds=starting_deadline_seconds))
    unmet, recent = 0, None
    t = schedule.next_after(window)
    while t <= now and unmet <= TOO_MANY_MISSED:
        unmet, recent = unmet + 1, t
        t = schedule.next_after(t)
    if unmet > TOO_MANY_MISSED:
        recent = schedule.latest_at_or_before(now)
    following = schedule.next_after(now)
    if recent is not None:
        return Plan(recent, None, unmet, following)
    missed = schedule.latest_at_or_before(window) if window > earliest else None
    if missed is not None and missed <= earliest:
        missed = None
    return Plan(None, missed, 0, following)


def job_name(crontab: str, scheduled: dt.datetime) -> str:
    """``<crontab>-<minutes since the epoch>``: one name per scheduled time (as CronJob's), so a
    second create for the same time, by a restart or another replica, is AlreadyExists."""
    return f"{crontab}-{int(scheduled.timestamp()) // 60}"
