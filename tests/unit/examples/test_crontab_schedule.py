"""The CronTab controller's schedule math without a cluster: next times (Kubernetes' day rule,
macros, time zones), which missed time runs after a gap (startingDeadlineSeconds, more than
100 missed), history trimming, Job names and the Job itself."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from examples.crontab.api.v1.crontab import CronTab
from examples.crontab.controllers.crontab import SCHEDULED_AT, expired, job_manifest, schedule_of
from examples.crontab.schedule import TOO_MANY_MISSED, CronSchedule, InvalidSchedule, job_name, plan
from examples.kube import Job
from hypothesis import given
from hypothesis import strategies as st

from kubeop.core.model import to_dict

T0 = dt.datetime(2026, 1, 1, 0, 2, 30, tzinfo=dt.UTC)  # a Thursday
MIN = dt.timedelta(minutes=1)


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("*/5 * * * *", "2026-01-01T00:02:30", "2026-01-01T00:05:00"),
        ("*/5 * * * *", "2026-01-01T00:05:00", "2026-01-01T00:10:00"),  # strictly after
        ("0 * * * *", "2026-01-01T00:00:00", "2026-01-01T01:00:00"),
        ("30 6 * * 1-5", "2026-01-02T07:00:00", "2026-01-05T06:30:00"),  # Friday -> Monday
        ("0 0 29 2 *", "2026-01-01T00:00:00", "2028-02-29T00:00:00"),  # leap day
        # day of month OR day of week when both are restricted: the 13th, and every Friday
        ("0 0 13 * 5", "2026-01-01T00:00:00", "2026-01-02T00:00:00"),
        ("0 0 13 * 5", "2026-01-09T12:00:00", "2026-01-13T00:00:00"),
        # AND when one is *: Fridays only
        ("0 0 * * 5", "2026-01-01T00:00:00", "2026-01-02T00:00:00"),
        ("0 0 * 2 5", "2026-01-01T00:00:00", "2026-02-06T00:00:00"),
        # */2 is restricted in robfig/cron: odd days OR Mondays (cronsim alone would AND them)
        ("0 0 */2 * 1", "2026-01-01T12:00:00", "2026-01-03T00:00:00"),
        ("0 0 */2 * 1", "2026-01-03T12:00:00", "2026-01-05T00:00:00"),
        ("0 0 * * 7", "2026-01-01T00:00:00", "2026-01-04T00:00:00"),  # 7 is Sunday too
        ("@hourly", "2026-01-01T00:02:30", "2026-01-01T01:00:00"),
        ("@daily", "2026-01-01T00:02:30", "2026-01-02T00:00:00"),
        ("@weekly", "2026-01-01T00:02:30", "2026-01-04T00:00:00"),
        ("@monthly", "2026-01-01T00:02:30", "2026-02-01T00:00:00"),
        ("@yearly", "2026-01-01T00:02:30", "2027-01-01T00:00:00"),
    ],
)
def test_next_times(expression: str, after: str, expected: str) -> None:
    assert CronSchedule(expression).next_after(at(after)) == at(expected)


def test_time_zone_and_daylight_saving() -> None:
    berlin = CronSchedule("0 9 * * *", "Europe/Berlin")
    assert berlin.next_after(at("2026-01-01T00:00:00")) == at("2026-01-01T08:00:00")  # CET
    assert berlin.next_after(at("2026-07-01T00:00:00")) == at("2026-07-01T07:00:00")  # CEST
    # 02:30 does not exist on 2026-03-29 in Berlin: the run happens once, when the clock jumps
    night = CronSchedule("30 2 * * *", "Europe/Berlin")
    first = night.next_after(at("2026-03-28T12:00:00"))
    assert first.date() == dt.date(2026, 3, 29) and night.next_after(first).date() == dt.date(2026, 3, 30)


@pytest.mark.parametrize(
    ("expression", "zone", "message"),
    [
        ("* * *", None, "has 3 fields"),
        ("61 * * * *", None, "bad minute"),
        ("0 0 30 2 *", None, "no month in the schedule has"),
        ("@every 5m", None, "has 2 fields"),
        ("0 0 * * *", "Mars/Olympus", "not an IANA time zone"),
    ],
)
def test_invalid_schedules_say_why(expression: str, zone: str | None, message: str) -> None:
    with pytest.raises(InvalidSchedule, match=message):
        CronSchedule(expression, zone)


def crontab(cron: str = "*/5 * * * *", **spec: Any) -> CronTab:
    minute, hour, dom, month, dow = cron.split(" ")
    return CronTab.model_validate(
        {
            "metadata": {"name": "ct", "namespace": "ns", "uid": "u-1"},
            "spec": {
                "schedule": {
                    "minute": minute,
                    "hour": hour,
                    "dayOfMonth": dom,
                    "month": month,
                    "dayOfWeek": dow,
                },
                "image": "busybox",
                **spec,
            },
        }
    )


def test_schedule_of_names_the_field() -> None:
    assert schedule_of(crontab("0 0 13 * 5")).expression == "0 0 13 * 5"
    with pytest.raises(InvalidSchedule, match=r"^spec.schedule: minute '61' is outside 0-59"):
        schedule_of(crontab("61 * * * *"))
    with pytest.raises(InvalidSchedule, match=r"^spec.schedule: .*no month"):
        schedule_of(crontab("0 0 31 2 *"))
    with pytest.raises(InvalidSchedule, match=r"^spec.timeZone: "):
        schedule_of(crontab(timeZone="Nowhere/Town"))


# -- missed schedules --------------------------------------------------------------------------------
EVERY_5 = CronSchedule("*/5 * * * *")


def test_nothing_due_before_the_first_time() -> None:
    p = plan(EVERY_5, last=None, created=T0, now=T0 + MIN)
    assert p.run is None and p.missed is None and p.unmet == 0 and p.next == at("2026-01-01T00:05:00")


def test_the_time_that_just_came_runs() -> None:
    p = plan(EVERY_5, last=None, created=T0, now=at("2026-01-01T00:05:00.100"))
    assert p.run == at("2026-01-01T00:05:00") and p.unmet == 1 and p.next == at("2026-01-01T00:10:00")


def test_after_a_gap_only_the_most_recent_missed_time_runs() -> None:
    last = at("2026-01-01T00:05:00")
    p = plan(EVERY_5, last=last, created=T0, now=at("2026-01-01T00:17:00"))
    assert p.run == at("2026-01-01T00:15:00") and p.unmet == 2 and not p.too_many_missed
    # once it ran (lastScheduleTime moved), nothing more until the next time
    p = plan(EVERY_5, last=p.run, created=T0, now=at("2026-01-01T00:17:00"))
    assert p.run is None and p.missed is None and p.next == at("2026-01-01T00:20:00")


def test_starting_deadline_skips_a_time_that_is_too_old() -> None:
    last = at("2026-01-01T00:05:00")
    now = at("2026-01-01T00:17:00")
    within = plan(EVERY_5, last=last, created=T0, now=now, starting_deadline_seconds=150)
    assert within.run == at("2026-01-01T00:15:00") and within.missed is None
    late = plan(EVERY_5, last=last, created=T0, now=now, starting_deadline_seconds=60)
    assert (
        late.run is None
        and late.missed == at("2026-01-01T00:15:00")
        and late.next == at("2026-01-01T00:20:00")
    )
    # exactly at the deadline is too late, as in CronJob (the window is (now - deadline, now])
    edge = plan(EVERY_5, last=last, created=T0, now=now, starting_deadline_seconds=120)
    assert edge.run is None and edge.missed == at("2026-01-01T00:15:00")


def test_more_than_100_missed_is_reported_and_the_most_recent_runs() -> None:
    now = T0 + dt.timedelta(days=2, seconds=7)
    p = plan(EVERY_5, last=None, created=T0, now=now)
    assert p.too_many_missed and p.unmet == TOO_MANY_MISSED + 1
    assert p.run == at("2026-01-03T00:00:00")
    exactly = plan(EVERY_5, last=None, created=T0, now=at("2026-01-01T08:20:00"))
    assert exactly.unmet == 100 and not exactly.too_many_missed
    # with a deadline only the times inside it count (CronJob's advice for this case)
    bounded = plan(EVERY_5, last=None, created=T0, now=now, starting_deadline_seconds=600)
    assert bounded.run == at("2026-01-03T00:00:00") and not bounded.too_many_missed


def test_an_uneven_schedule_finds_its_most_recent_time() -> None:
    office = CronSchedule("0 9-17 * * 1-5")
    p = plan(office, last=at("2026-01-05T09:00:00"), created=T0, now=at("2026-01-06T08:00:00"))
    assert p.run == at("2026-01-05T17:00:00") and p.unmet == 8


@given(
    st.integers(0, 3000).map(lambda m: T0 + m * MIN),
    st.integers(0, 3000),
    st.none() | st.integers(0, 4000),
)
def test_plan_properties(last: dt.datetime, gap: int, deadline: int | None) -> None:
    now = last + gap * dt.timedelta(seconds=7)
    p = plan(EVERY_5, last=last, created=T0, now=now, starting_deadline_seconds=deadline)
    assert p.next > now and p.next - now <= dt.timedelta(minutes=5)
    assert p.run is None or p.missed is None
    if p.run is not None:
        assert last < p.run <= now and EVERY_5.next_after(p.run) > now  # the most recent one
        assert deadline is None or (now - p.run).total_seconds() <= deadline
    if p.missed is not None:
        # exactly at the deadline is too late (the window is (now - deadline, now])
        assert deadline is not None and (now - p.missed).total_seconds() >= deadline
    if p.run is None and p.missed is None:
        assert EVERY_5.next_after(last) > now  # nothing was due


# -- names, history, the Job -------------------------------------------------------------------------
def test_job_names_are_the_scheduled_minute() -> None:
    assert job_name("backup", at("2026-01-01T00:05:00")) == "backup-29453765"
    assert job_name("backup", at("2026-01-01T00:05:59")) == "backup-29453765"
    assert job_name("backup", at("2026-01-01T00:06:00")) == "backup-29453766"


def job(minute: int, state: str | None) -> Job:
    conditions = [{"type": state, "status": "True"}] if state else []
    when = (T0 + minute * MIN).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Job.model_validate(
        {
            "metadata": {"name": f"ct-{minute}", "annotations": {SCHEDULED_AT: when}},
            "status": {"conditions": conditions},
        }
    )


def test_history_keeps_the_newest_of_each_outcome() -> None:
    jobs = [job(m, s) for m, s in [(1, "Complete"), (5, "Failed"), (2, "Complete"), (9, None), (7, "Failed")]]
    jobs += [job(3, "Complete"), job(4, "Complete"), job(8, "Failed")]
    names = {j.metadata.name for j in expired(jobs, 3, 1)}
    assert names == {"ct-1", "ct-5", "ct-7"}  # the running one (9) is never touched
    assert {j.metadata.name for j in expired(jobs, 0, 0)} == {f"ct-{m}" for m in (1, 2, 3, 4, 5, 7, 8)}
    assert expired(jobs, 10, 10) == []


def test_the_job_is_owned_named_and_sized_from_the_crontab() -> None:
    when = at("2026-01-01T00:05:00")
    manifest = to_dict(job_manifest(crontab(replicas=3), when))  # the Job model as the client sends it
    assert manifest["metadata"]["name"] == "ct-29453765"
    assert manifest["metadata"]["annotations"][SCHEDULED_AT] == "2026-01-01T00:05:00Z"
    (owner,) = manifest["metadata"]["ownerReferences"]
    assert owner["uid"] == "u-1" and owner["controller"] is True and owner["kind"] == "CronTab"
    assert manifest["spec"]["parallelism"] == manifest["spec"]["completions"] == 3
    pod = manifest["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["containers"][0]["image"] == "busybox"
    assert to_dict(job_manifest(crontab(), when))["spec"]["completions"] == 1  # replicas unset: one pod


def test_the_cluster_role_covers_what_the_controller_does() -> None:
    from examples.crontab.main import rbac

    role = rbac()
    grants = {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    needed = {("batch", "jobs", v) for v in ("get", "list", "watch", "create", "delete")}
    needed |= {("stable.example.com", "crontabs", v) for v in ("get", "list", "watch")}
    needed |= {
        ("stable.example.com", "crontabs/status", "patch"),
        ("stable.example.com", "crontabs/finalizers", "update"),
    }
    needed |= {("events.k8s.io", "events", "create"), ("coordination.k8s.io", "leases", "update")}
    assert needed <= grants
    assert not any(r == "jobs" and v in ("update", "patch") for _, r, v in grants)  # no more than it uses


async def test_a_crontab_deleted_during_its_reconcile_is_not_a_failure() -> None:
    """The CronTab is deleted between the read and the status write: the write's NotFound is
    the end of the story, not an error to log and retry with backoff."""
    from types import SimpleNamespace

    from examples.crontab.api.v1.crontab import CronTabStatus
    from examples.crontab.controllers.crontab import CronTabController

    from kubeop.core.errors import NotFound

    class GoneClient:
        async def patch_status(self, obj: Any, status: Any) -> bool:
            raise NotFound('crontabs.stable.example.com "ct" not found', code=404)

    ctx: Any = SimpleNamespace(
        client=GoneClient(),
        recorder=SimpleNamespace(event=lambda *a: None),
        log=SimpleNamespace(warning=lambda *a: None, debug=lambda *a: None),
    )
    await CronTabController()._report(ctx, crontab(), CronTabStatus(), True, "OnSchedule", "next run")
