from __future__ import annotations

import asyncio
import datetime as dt
import gc
import threading
import time
from typing import Any

import orjson
import pytest
from examples.crontab.api.v1.crontab import CronTab
from examples.crontab.api.v1beta1.crontab import CronTabV1Beta1
from examples.crontab.cron import FIELDS
from examples.crontab.webhooks.crontab_v1 import conversion
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from kubeop.crd import CustomResource
from kubeop.webhook import Conversion, Webhooks
from kubeop.webhook.review import decode_conversion

V1, V1BETA1 = "stable.example.com/v1", "stable.example.com/v1beta1"


def cron_field(low: int, high: int) -> st.SearchStrategy[str]:
    number = st.integers(low, high).map(str)
    span = st.tuples(st.integers(low, high), st.integers(low, high)).map(lambda t: f"{min(t)}-{max(t)}")
    item = st.one_of(st.just("*"), number, span)
    stepped = st.tuples(item, st.none() | st.integers(1, 30)).map(
        lambda t: t[0] if t[1] is None else f"{t[0]}/{t[1]}"
    )
    return st.lists(stepped, min_size=1, max_size=3).map(",".join)


cron_specs = st.tuples(*(cron_field(low, high) for _, low, high in FIELDS)).map(" ".join)
names = st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True)
labels = st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.text(max_size=5), max_size=3)


times = st.datetimes(timezones=st.just(dt.UTC)).map(lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ"))
job_refs = st.builds(lambda n: {"apiVersion": "batch/v1", "kind": "Job", "name": n, "namespace": "ns"}, names)
conditions = st.builds(
    lambda s, r, t: {"type": "Scheduled", "status": s, "reason": r, "message": "m", "lastTransitionTime": t},
    st.sampled_from(["True", "False"]),
    st.sampled_from(["OnSchedule", "InvalidSchedule", "MissedSchedule"]),
    times,
)
# As the controller writes it: the lists always there (a model's empty list is not "left out").
statuses = st.fixed_dictionaries(
    {"active": st.lists(job_refs, max_size=2), "conditions": st.lists(conditions, max_size=1)},
    optional={"lastScheduleTime": times, "lastSuccessfulTime": times},
)


@st.composite
def v1beta1_objects(draw: st.DrawFn) -> dict[str, Any]:
    spec: dict[str, Any] = {"cronSpec": draw(cron_specs), "image": draw(st.text(min_size=1, max_size=10))}
    replicas = draw(st.none() | st.integers(0, 100))
    if replicas is not None:
        spec["replicas"] = replicas
    for field in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        value = draw(st.none() | st.integers(0, 1000))
        if value is not None:
            spec[field] = value
    if draw(st.booleans()):
        spec["timeZone"] = draw(st.sampled_from(["UTC", "Europe/Berlin", "America/New_York"]))
    metadata: dict[str, Any] = {"name": draw(names), "namespace": "ns", "uid": "u", "resourceVersion": "7"}
    if draw(st.booleans()):
        metadata["labels"] = draw(labels)
    obj = {"apiVersion": V1BETA1, "kind": "CronTab", "metadata": metadata, "spec": spec}
    if draw(st.booleans()):
        obj["status"] = draw(statuses)
    return obj


@given(v1beta1_objects())
def test_spoke_to_hub_to_spoke_loses_nothing(obj: dict[str, Any]) -> None:
    hub = conversion.convert(obj, V1)
    assert hub["apiVersion"] == V1 and hub["metadata"] is obj["metadata"]
    CronTab.model_validate(hub)
    assert conversion.convert(hub, V1BETA1) == obj


@given(v1beta1_objects())
def test_hub_to_spoke_to_hub_loses_nothing(obj: dict[str, Any]) -> None:
    hub = conversion.convert(obj, V1)
    assert conversion.convert(conversion.convert(hub, V1BETA1), V1) == hub


def test_the_structured_schedule() -> None:
    obj = {
        "apiVersion": V1BETA1,
        "kind": "CronTab",
        "metadata": {"name": "n"},
        "spec": {"cronSpec": "*/5 0 1 * 1-5", "image": "i"},
    }
    assert conversion.convert(obj, V1)["spec"] == {
        "schedule": {"minute": "*/5", "hour": "0", "dayOfMonth": "1", "month": "*", "dayOfWeek": "1-5"},
        "image": "i",
    }
    assert conversion.convert(obj, V1BETA1) is obj


def review(objects: list[dict[str, Any]], desired: str) -> Any:
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "c1", "desiredAPIVersion": desired, "objects": objects},
    }
    return decode_conversion(orjson.dumps(body))


def test_review_success_and_failure() -> None:
    good = {
        "apiVersion": V1BETA1,
        "kind": "CronTab",
        "metadata": {"name": "a"},
        "spec": {"cronSpec": "* * * * *", "image": "i"},
    }
    bad = {**good, "metadata": {"name": "b"}, "spec": {"cronSpec": "@daily", "image": "i"}}
    out = orjson.loads(conversion.review(review([good], V1)))["response"]
    assert out["uid"] == "c1" and out["result"] == {"status": "Success"}
    assert out["convertedObjects"][0]["apiVersion"] == V1
    out = orjson.loads(conversion.review(review([good, bad], V1)))["response"]
    assert out["result"]["status"] == "Failure" and out["convertedObjects"] == []
    assert "CronTab 'b'" in out["result"]["message"] and "five fields" in out["result"]["message"]
    out = orjson.loads(conversion.review(review([good], "stable.example.com/v2")))["response"]
    assert "version 'v2' is unknown; known: v1, v1beta1" in out["result"]["message"]
    out = orjson.loads(conversion.review(review([good], "other.example.com/v1")))["response"]
    assert "this converts stable.example.com" in out["result"]["message"]


def test_declaration_errors() -> None:
    assert conversion.path == "/convert/crontabs.stable.example.com"
    assert conversion.versions == ["v1", "v1beta1"]

    class NoMethods(CustomResource, group="stable.example.com", version="v2", kind="CronTab"):
        pass

    with pytest.raises(TypeError, match="define to_hub"):
        Conversion.of_models(CronTab, NoMethods)
    with pytest.raises(TypeError, match="declared twice"):
        Conversion.of_models(CronTab, CronTabV1Beta1, CronTabV1Beta1)
    with pytest.raises(ValueError, match="hub"):
        Conversion("g.io", "K", "v1", {"v1": (dict, dict)})


def test_dict_conversions() -> None:
    def up(obj: dict[str, Any]) -> dict[str, Any]:
        return {**obj, "spec": {"size": int(obj["spec"]["size"])}}

    def down(obj: dict[str, Any]) -> dict[str, Any]:
        return {**obj, "spec": {"size": str(obj["spec"]["size"])}}

    widgets = Conversion("example.com", "Widget", "v2", {"v1": (up, down)}, plural="widgets")
    v1 = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": "3"}}
    v2 = widgets.convert(v1, "example.com/v2")
    assert v2 == {
        "apiVersion": "example.com/v2",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 3},
    }
    assert widgets.convert(v2, "example.com/v1") == v1


def test_typed_functions_instead_of_methods() -> None:
    class CronTabV2(CustomResource, group="stable.example.com", version="v2", kind="CronTab"):
        spec: dict[str, Any]

    def up(old: CronTabV2) -> CronTab:
        return CronTab.model_validate({"metadata": old.metadata, "spec": old.spec})

    def down(hub: CronTab) -> CronTabV2:
        return CronTabV2(metadata=hub.metadata, spec=hub.spec.model_dump(by_alias=True, exclude_none=True))

    both = Conversion.of_models(CronTab, CronTabV1Beta1, functions={CronTabV2: (up, down)})
    assert both.versions == ["v1", "v1beta1", "v2"]
    v1beta1 = {
        "apiVersion": V1BETA1,
        "kind": "CronTab",
        "metadata": {"name": "n"},
        "spec": {"cronSpec": "1 2 3 4 5", "image": "i"},
    }
    v2 = both.convert(v1beta1, "stable.example.com/v2")
    assert v2["spec"]["schedule"]["dayOfWeek"] == "5"
    assert both.convert(v2, V1BETA1) == v1beta1


def widgets(
    busy: float = 0.0, block: threading.Event | None = None, **options: Any
) -> tuple[Conversion, Webhooks]:
    """Widget v1 <-> v2 over dicts; each object costs ``busy`` seconds of Python work (so a
    review's length does not depend on the machine's speed), or waits for ``block``."""

    def up(obj: dict[str, Any]) -> dict[str, Any]:
        if block is not None:
            block.wait(20)
        end = time.perf_counter() + busy
        while time.perf_counter() < end:
            pass
        return {**obj, "spec": {"size": int(obj["spec"]["size"])}}

    def down(obj: dict[str, Any]) -> dict[str, Any]:
        return {**obj, "spec": {"size": str(obj["spec"]["size"])}}

    conv = Conversion("example.com", "Widget", "v2", {"v1": (up, down)}, plural="widgets", **options)
    return conv, Webhooks([conv])


def widget_review(n: int, desired: str = "example.com/v2", uid: str = "c1") -> bytes:
    objects = [
        {
            "apiVersion": "example.com/v1",
            "kind": "Widget",
            "metadata": {"name": f"w{i}"},
            "spec": {"size": "3"},
        }
        for i in range(n)
    ]
    request = {"uid": uid, "desiredAPIVersion": desired, "objects": objects}
    return orjson.dumps(
        {"kind": "ConversionReview", "apiVersion": "apiextensions.k8s.io/v1", "request": request}
    )


async def converted(hooks: Webhooks, body: bytes, timeout: float | None = None) -> dict[str, Any]:
    status, out = await hooks.handle("/convert/widgets.example.com", body, timeout)
    assert status == 200, out
    response: dict[str, Any] = orjson.loads(out)["response"]
    assert response["uid"] == "c1"
    return response


async def test_a_long_conversion_does_not_stall_the_event_loop() -> None:
    """4,000 objects of 0.25 ms each: a second of converting, during which the loop keeps
    running (main: it stalled for the whole review)."""
    _, hooks = widgets(busy=0.00025)
    body = widget_review(4000)
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.002)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    # What is measured is the conversion's own stall, not a full collection of the test
    # session's heap (which any allocation may trigger): that heap is frozen for the while.
    gc.collect()
    gc.freeze()
    try:
        ticking = asyncio.create_task(ticker())
        await asyncio.sleep(0.01)
        t0 = time.perf_counter()
        out = await converted(hooks, body, 30)
        elapsed = time.perf_counter() - t0
        done.set()
        await ticking
    finally:
        gc.unfreeze()
    assert out["result"] == {"status": "Success"} and len(out["convertedObjects"]) == 4000
    assert out["convertedObjects"][3999] == {
        "apiVersion": "example.com/v2",
        "kind": "Widget",
        "metadata": {"name": "w3999"},
        "spec": {"size": 3},
    }
    assert elapsed > 1.0
    assert max(gaps) < 0.1, f"the loop stalled {max(gaps):.3f} s during a {elapsed:.2f} s conversion"


async def test_a_review_over_the_object_cap_fails_naming_the_limit() -> None:
    _, hooks = widgets(max_objects=100)
    assert len((await converted(hooks, widget_review(100)))["convertedObjects"]) == 100
    out = await converted(hooks, widget_review(101))
    assert out["convertedObjects"] == [] and out["result"] == {
        "status": "Failure",
        "message": "the review has 101 objects, more than the 100 this webhook converts at once "
        "(Conversion max_objects): list Widget in pages (limit=500)",
    }
    from kubeop.webhook.conversion import DEFAULT_MAX_OBJECTS

    assert DEFAULT_MAX_OBJECTS == Conversion("g.io", "K", "v1").max_objects == 10_000


async def test_a_conversion_past_the_review_timeout_fails_in_time() -> None:
    _, hooks = widgets(busy=0.01)
    t0 = time.monotonic()
    out = await converted(hooks, widget_review(1000), timeout=0.5)  # ?timeout=500ms: 10 s of work
    assert time.monotonic() - t0 < 0.6
    assert out["result"]["status"] == "Failure"
    assert out["result"]["message"].startswith(
        "converting 1000 Widget objects to example.com/v2 did not finish within the review's deadline ("
    )


async def test_stuck_conversions_are_refused_at_once_and_counted() -> None:
    release = threading.Event()
    conv, hooks = widgets(block=release, max_threads=1)
    metrics = CollectorRegistry()
    hooks.observe(metrics)
    try:
        out = await converted(hooks, widget_review(1), timeout=0.3)
        assert out["result"]["message"] == (
            "converting Widget.example.com: did not finish within 0.3 s "
            "(a conversion function is still running)"
        )
        assert metrics.get_sample_value("kubeop_webhook_stuck_calls", {"webhook": conv.path}) == 1
        t0 = time.monotonic()
        out = await converted(hooks, widget_review(1), timeout=10)
        assert time.monotonic() - t0 < 0.5
        assert out["result"]["message"] == (
            "converting Widget.example.com: 1 conversions are still running past their deadline "
            "(all of this conversion's 1 threads): refused at once"
        )
    finally:
        release.set()
    for _ in range(500):
        if conv.stuck_calls == 0:
            break
        await asyncio.sleep(0.01)
    assert conv.stuck_calls == 0
    assert (await converted(hooks, widget_review(1)))["result"] == {"status": "Success"}


def deep(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


async def test_a_deep_object_fails_the_review_and_a_too_deep_body_is_a_400() -> None:
    obj = '{"apiVersion":"example.com/v2","kind":"Widget","metadata":{"name":"d"},"spec":%s}'
    head = '{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":'
    request = '{"uid":"c1","desiredAPIVersion":"example.com/v2","objects":[%s]}}'
    _, hooks = widgets()
    out = await converted(hooks, (head + request % (obj % deep(300))).encode())  # main: TypeError
    assert out["result"] == {
        "status": "Failure",
        "message": "converting Widget 'd' to example.com/v2: Recursion limit reached",
    }
    status, body = await hooks.handle(conv_path(), (head + request % (obj % deep(5000))).encode())
    assert status == 400 and "nested too deeply" in orjson.loads(body)["message"]


def conv_path() -> str:
    return "/convert/widgets.example.com"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\xff{}", "not UTF-8"),
        (b"[]", "the body is a JSON list, not a ConversionReview object"),
        (b'{"kind": "ConversionReview"} {}', "extra data"),
        (b'{"kind": NaN}', "NaN is not JSON"),
        (b'{"kind": "ConversionReview",}', "expected a key"),
        (b'{"request": {}, "request": {}}', "the body has 'request' twice"),
        (
            b'{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","request":{"uid":"u",'
            b'"desiredAPIVersion":"example.com/v2","objects":[1]}}',
            "request.objects must be a list of objects",
        ),
        (
            b'{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","request":{"uid":"u",'
            b'"desiredAPIVersion":"example.com/v2","objects":{}}}',
            "request.objects must be a list of objects",
        ),
        (
            b'{"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","request":{"uid":"",'
            b'"desiredAPIVersion":"example.com/v2","objects":[]}}',
            "request.uid must be a non-empty string",
        ),
    ],
)
async def test_a_body_that_is_no_conversion_review_is_a_400(body: bytes, message: str) -> None:
    _, hooks = widgets()
    status, out = await hooks.handle(conv_path(), body)
    assert status == 400 and message in orjson.loads(out)["message"]


async def test_objects_before_the_desired_version_are_converted_too() -> None:
    _, hooks = widgets()
    objects = orjson.loads(widget_review(3))["request"]["objects"]
    body = orjson.dumps(
        {
            "request": {"objects": objects, "desiredAPIVersion": "example.com/v2", "uid": "c1"},
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
        }
    )
    out = await converted(hooks, body)
    assert [o["spec"] for o in out["convertedObjects"]] == [{"size": 3}] * 3
    assert decode_conversion(body).objects == objects


async def test_a_conversion_raising_cancelled_error_fails_the_review_rather_than_escaping() -> None:
    def up(obj: dict[str, Any]) -> dict[str, Any]:
        raise asyncio.CancelledError  # e.g. from an asyncio.run() in the function

    conv = Conversion("example.com", "Widget", "v2", {"v1": (up, up)}, plural="widgets")
    out = await converted(Webhooks([conv]), widget_review(1))
    assert out["result"]["status"] == "Failure" and "CancelledError" in out["result"]["message"]
