from __future__ import annotations

import datetime as dt
from typing import Any

import orjson
import pytest
from examples.crontab.api.v1.crontab import CronTab
from examples.crontab.api.v1beta1.crontab import CronTabV1Beta1
from examples.crontab.cron import FIELDS
from examples.crontab.webhooks.crontab_v1 import conversion
from hypothesis import given
from hypothesis import strategies as st

from kubeop.crd import CustomResource
from kubeop.webhook import Conversion
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
