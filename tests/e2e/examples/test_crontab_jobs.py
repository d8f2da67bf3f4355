"""Seed 001's CronTab controller on a real (minimal) control plane, with a stepped clock.

The minimal plane has no Job controller: the test finishes Jobs by writing their status, as the
Job controller would. The operator's time is a SteppedClock (real time plus the steps the test
takes); the schedule is hourly, at a minute half an hour away from the real time, so the few
seconds the test really takes never reach a scheduled time by themselves.

- Jobs appear at the stepped scheduled times, named ``<crontab>-<unix minutes>``, owned by the
  CronTab; status has lastScheduleTime, active and lastSuccessfulTime; finished Jobs beyond the
  history limits are deleted.
- Operator stopped, clock stepped past two times, operator started: exactly one Job, the most
  recent time's. Stopped again and started past startingDeadlineSeconds: no Job, a
  MissedSchedule condition and Warning Event; the next time runs as usual.
- Two operator instances at once: one Job per scheduled time.
- More than 100 missed times (no deadline): the most recent runs, TooManyMissedTimes says so.
- An invalid schedule: a Scheduled=False InvalidSchedule condition naming the field, one Warning
  Event, no Job, and no hot loop (the object is not written again, the warning not repeated).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
from examples.crontab.api import VERSIONS
from examples.crontab.api.v1.crontab import CronTab
from examples.crontab.main import build_manager
from examples.crontab.schedule import CronSchedule, job_name
from examples.kube import JOBS

from kubeop.client import Client
from kubeop.core.patch import PatchType
from kubeop.crd import crd_manifest
from kubeop.manager import Serving
from kubeop.queue import SteppedClock
from kubeop.testing import ControlPlane
from tests.e2e.controller.conftest import client_for, eventually, running

pytestmark = pytest.mark.controlplane

NS = "crontab-jobs"
CRONTABS = CronTab.resource


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    with ControlPlane(full=False) as cp:
        cp.install_crds([crd_manifest(VERSIONS)])  # no webhooks: the controller judges schedules
        cp.create_namespace(NS)
        yield cp


@contextlib.asynccontextmanager
async def operator(
    kubeconfig: str, clock: SteppedClock, name: str = "crontab-operator"
) -> AsyncIterator[None]:
    async with client_for(kubeconfig) as client:
        manager = build_manager(
            client, clock=clock, serving=Serving(metrics_address=None, health_address=None), name=name
        )
        async with running(manager):
            yield


def crontab(name: str, schedule: str, **spec: Any) -> dict[str, Any]:
    minute, hour, dom, month, dow = schedule.split(" ")
    return {
        "apiVersion": CronTab.api_version,
        "kind": "CronTab",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "schedule": {"minute": minute, "hour": hour, "dayOfMonth": dom, "month": month, "dayOfWeek": dow},
            "image": "busybox:1.36",
            **spec,
        },
    }


async def create(client: Client, obj: dict[str, Any]) -> tuple[dict[str, Any], SteppedClock, CronSchedule]:
    """Create the CronTab with an hourly schedule half an hour away; a clock starting at its
    creation time."""
    created = await client.create(obj)
    at = dt.datetime.fromisoformat(created["metadata"]["creationTimestamp"].replace("Z", "+00:00"))
    minute = (at.minute + 30) % 60
    patch = {"spec": {"schedule": {"minute": str(minute)}}}
    await client.patch(CRONTABS, obj["metadata"]["name"], patch, namespace=NS, type=PatchType.MERGE)
    return created, SteppedClock(at), CronSchedule(f"{minute} * * * *")


def step_past(clock: SteppedClock, when: dt.datetime, seconds: float = 5) -> None:
    clock.advance((when - clock.utcnow()).total_seconds() + seconds)


async def jobs(client: Client, name: str) -> dict[str, dict[str, Any]]:
    listed = await client.list(JOBS, namespace=NS, label_selector=f"app.kubernetes.io/instance={name}")
    return {j["metadata"]["name"]: j for j in listed.items}


async def status(client: Client, name: str) -> dict[str, Any]:
    obj = await client.get(CRONTABS, name, namespace=NS)
    out: dict[str, Any] = obj.get("status") or {}
    return out


def scheduled(status: dict[str, Any]) -> tuple[str, str]:
    (cond,) = [c for c in status.get("conditions", []) if c["type"] == "Scheduled"]
    return cond["status"], cond["reason"]


async def wait_job(client: Client, name: str, job: str) -> dict[str, Any]:
    async def there() -> Any:
        return (await jobs(client, name)).get(job)

    found: dict[str, Any] = await eventually(there, 10, f"Job {job}")
    return found


async def finish(client: Client, job: dict[str, Any], ok: bool, when: dt.datetime) -> None:
    """Write the status the Job controller would write for a finished Job."""
    t = when.strftime("%Y-%m-%dT%H:%M:%SZ")
    if ok:
        conditions = [
            {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": t},
            {"type": "Complete", "status": "True", "lastTransitionTime": t},
        ]
        body = {"startTime": t, "completionTime": t, "succeeded": 1, "conditions": conditions}
    else:
        conditions = [
            {"type": "FailureTarget", "status": "True", "lastTransitionTime": t},
            {"type": "Failed", "status": "True", "lastTransitionTime": t},
        ]
        body = {"startTime": t, "failed": 1, "conditions": conditions}
    await client.patch(
        JOBS,
        job["metadata"]["name"],
        {"status": body},
        namespace=NS,
        subresource="status",
        type=PatchType.MERGE,
    )


async def test_jobs_at_the_stepped_times_history_restart_and_deadline(plane: ControlPlane) -> None:
    async with client_for(plane.kubeconfig_path) as client:
        ct, clock, schedule = await create(
            client,
            crontab(
                "backup",
                "0 * * * *",
                successfulJobsHistoryLimit=2,
                failedJobsHistoryLimit=1,
                startingDeadlineSeconds=300,
            ),
        )
        uid = ct["metadata"]["uid"]
        async with operator(plane.kubeconfig_path, clock):
            first = await eventually(lambda: status(client, "backup"), 10, "the first status")
            assert scheduled(first) == ("True", "OnSchedule") and not await jobs(client, "backup")

            times: list[dt.datetime] = []
            outcomes = [True, False, True, False, True]
            for ok in outcomes:
                when = schedule.next_after(clock.utcnow())
                times.append(when)
                step_past(clock, when)
                job = await wait_job(client, "backup", job_name("backup", when))
                (owner,) = job["metadata"]["ownerReferences"]
                assert owner["uid"] == uid and owner["controller"] is True
                st = await eventually(
                    functools.partial(_active, client, "backup", job["metadata"]["name"]),
                    10,
                    "the Job in status.active",
                )
                assert st is not None
                assert st["lastScheduleTime"] == when.strftime("%Y-%m-%dT%H:%M:%SZ")
                await finish(client, job, ok, when + dt.timedelta(seconds=3))

            # history: the 2 newest successful and the newest failed are kept
            kept = {job_name("backup", t) for t, ok in zip(times, outcomes, strict=True)} - {
                job_name("backup", times[0]),
                job_name("backup", times[1]),
            }

            async def trimmed() -> Any:
                return set(await jobs(client, "backup")) == kept

            await eventually(trimmed, 10, f"history trimmed to {sorted(kept)}")
            done = (times[-1] + dt.timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%SZ")

            async def observed() -> bool:
                st = await status(client, "backup")
                return st["active"] == [] and st.get("lastSuccessfulTime") == done

            await eventually(observed, 10, f"no active Job and lastSuccessfulTime {done}")

        # down for two scheduled times: one Job, the most recent
        before = set(await jobs(client, "backup"))
        missed = [schedule.next_after(clock.utcnow())]
        missed.append(schedule.next_after(missed[0]))
        step_past(clock, missed[1])
        async with operator(plane.kubeconfig_path, clock):
            await wait_job(client, "backup", job_name("backup", missed[1]))
            await eventually(
                _last_schedule_is(client, "backup", missed[1]), 10, "lastScheduleTime after the restart"
            )
        assert set(await jobs(client, "backup")) - before == {job_name("backup", missed[1])}

        # down past the starting deadline: no Job, the miss reported; the next time runs
        before = set(await jobs(client, "backup"))
        late = schedule.next_after(clock.utcnow())
        step_past(clock, late, seconds=600)
        async with operator(plane.kubeconfig_path, clock):
            why = await eventually(lambda: _reason(client, "backup", "MissedSchedule"), 10, "MissedSchedule")
            assert why is not None and "startingDeadlineSeconds" in why and late.strftime("%H:%M:%S") in why
            await eventually(lambda: _event(client, "MissedSchedule"), 10, "a MissedSchedule Warning Event")
            assert set(await jobs(client, "backup")) == before
            following = schedule.next_after(clock.utcnow())
            step_past(clock, following)
            await wait_job(client, "backup", job_name("backup", following))
            await eventually(lambda: _reason(client, "backup", "OnSchedule"), 10, "back on schedule")


async def test_two_instances_create_one_job_per_time(
    plane: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kubeop.controller.crontab")
    async with client_for(plane.kubeconfig_path) as client:
        _, clock, schedule = await create(client, crontab("pair", "0 * * * *"))
        async with operator(plane.kubeconfig_path, clock), operator(plane.kubeconfig_path, clock, "second"):
            expected: set[str] = set()
            for _ in range(3):
                when = schedule.next_after(clock.utcnow())
                step_past(clock, when)
                expected.add(job_name("pair", when))
                await wait_job(client, "pair", job_name("pair", when))
                await eventually(_last_schedule_is(client, "pair", when), 10, "lastScheduleTime")
        found = await jobs(client, "pair")
        assert set(found) == expected
        assert (
            len({j["metadata"]["annotations"]["stable.example.com/scheduled-at"] for j in found.values()})
            == 3
        )


async def test_more_than_100_missed_times_run_the_most_recent_and_say_so(plane: ControlPlane) -> None:
    async with client_for(plane.kubeconfig_path) as client:
        _, clock, schedule = await create(client, crontab("many", "0 * * * *"))
        first = schedule.next_after(clock.utcnow())
        step_past(clock, first + dt.timedelta(hours=101))  # 102 hourly times since the creation
        recent = first + dt.timedelta(hours=101)
        async with operator(plane.kubeconfig_path, clock):
            why = await eventually(
                lambda: _reason(client, "many", "TooManyMissedTimes"), 10, "TooManyMissedTimes"
            )
            assert why is not None and "more than 100 scheduled times were missed" in why
            await eventually(lambda: _event(client, "TooManyMissedTimes"), 10, "a Warning Event")
            assert set(await jobs(client, "many")) == {job_name("many", recent)}


async def test_invalid_schedule_is_a_condition_and_one_event(
    plane: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kubeop.controller.crontab")
    async with client_for(plane.kubeconfig_path) as client:
        await client.create(crontab("broken", "61 * * * *"))
        clock = SteppedClock()
        async with operator(plane.kubeconfig_path, clock):
            why = await eventually(
                lambda: _reason(client, "broken", "InvalidSchedule"), 10, "InvalidSchedule"
            )
            assert why is not None and "spec.schedule: minute '61' is outside 0-59" in why
            event = await eventually(lambda: _event(client, "InvalidSchedule"), 10, "the Warning Event")
            assert event is not None and event["type"] == "Warning"
            rv = (await client.get(CRONTABS, "broken", namespace=NS))["metadata"]["resourceVersion"]
            clock.advance(3 * 3600)  # nothing waits for a time: no requeue to fire
            await asyncio.sleep(1.0)
            assert (await client.get(CRONTABS, "broken", namespace=NS))["metadata"]["resourceVersion"] == rv
            assert not await jobs(client, "broken")
            # fixed: scheduled again
            fix = {"spec": {"schedule": {"minute": "5"}}}
            await client.patch(CRONTABS, "broken", fix, namespace=NS, type=PatchType.MERGE)
            await eventually(lambda: _reason(client, "broken", "OnSchedule"), 10, "OnSchedule after the fix")
    warnings = [r for r in caplog.records if "InvalidSchedule" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]


async def _active(client: Client, name: str, job: str) -> dict[str, Any] | None:
    st = await status(client, name)
    return st if any(r["name"] == job for r in st.get("active", [])) else None


def _last_schedule_is(client: Client, name: str, when: dt.datetime) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return (await status(client, name)).get("lastScheduleTime") == when.strftime("%Y-%m-%dT%H:%M:%SZ")

    return check


async def _reason(client: Client, name: str, reason: str) -> str | None:
    for c in (await status(client, name)).get("conditions", []):
        if c["type"] == "Scheduled" and c["reason"] == reason:
            message: str = c["message"]
            return message
    return None


async def _event(client: Client, reason: str) -> dict[str, Any] | None:
    listed = await client.list("events.events.k8s.io", namespace=NS)
    return next((e for e in listed.items if e.get("reason") == reason), None)
