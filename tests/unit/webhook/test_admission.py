from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import json
import os
import threading
import time
from typing import Any

import orjson
import pytest
from examples.crontab.api.v1beta1.crontab import CronTabV1Beta1
from examples.crontab.webhooks.crontab_v1beta1 import default, validate
from prometheus_client import CollectorRegistry

from kubeop.core.resource import ApiResource
from kubeop.webhook import (
    Allowed,
    Denied,
    FieldError,
    UserInfo,
    Webhooks,
    defaulting,
    jsonpatch,
    validating,
)
from kubeop.webhook.review import decode_admission

CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")


def request(obj: dict[str, Any] | None, old: dict[str, Any] | None = None, operation: str = "CREATE") -> Any:
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "operation": operation,
            "object": obj,
            "oldObject": old,
            "userInfo": {"username": "alice", "groups": ["dev"]},
        },
    }
    return decode_admission(orjson.dumps(body))


def crontab_v1beta1(cron: str, replicas: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"cronSpec": cron, "image": "busybox"}
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "stable.example.com/v1beta1",
        "kind": "CronTab",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": spec,
    }


def response(raw: bytes) -> dict[str, Any]:
    out: dict[str, Any] = orjson.loads(raw)
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    assert out["response"]["uid"] == "u1"
    return out["response"]  # type: ignore[no-any-return]


async def test_a_denial_names_each_field_as_a_cause() -> None:
    out = response(await validate.review(request(crontab_v1beta1("* * *"))))
    assert out["allowed"] is False
    assert out["status"]["code"] == 422 and out["status"]["reason"] == "Invalid"
    assert out["status"]["message"].startswith("spec.cronSpec: '* * *' has 3 space-separated fields")
    assert out["status"]["details"]["causes"] == [
        {"field": "spec.cronSpec", "message": out["status"]["message"][15:], "reason": "FieldValueInvalid"}
    ]


async def test_allowed_with_warnings() -> None:
    assert response(await validate.review(request(crontab_v1beta1("*/5 * * * *")))) == {
        "uid": "u1",
        "allowed": True,
    }
    out = response(await validate.review(request(crontab_v1beta1("0 0 * * 1-5", replicas=7))))
    assert out["allowed"] is True and out["warnings"] == ["spec.replicas is 7: more than 5 runs at once"]


async def test_an_object_the_model_rejects_is_denied_before_the_handler_runs() -> None:
    obj = crontab_v1beta1("* * * * *")
    obj["spec"]["replicas"] = "many"
    del obj["spec"]["image"]
    out = response(await validate.review(request(obj)))
    assert out["allowed"] is False
    fields = [c["field"] for c in out["status"]["details"]["causes"]]
    assert fields == ["spec.image", "spec.replicas"]


async def test_the_handler_gets_old_object_operation_and_user() -> None:
    seen: list[Any] = []

    @validating(CONFIGMAPS, name="vcm.test.kubeop.dev")
    def check(new: dict[str, Any], old: dict[str, Any], operation: str, user: UserInfo) -> None:
        seen.append((new, old, operation, user.username, user.groups))
        new["data"] = "mutated"  # the decoded request itself: harmless for a validator

    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    out = response(await check.review(request(cm, {**cm, "data": {"a": "b"}}, "UPDATE")))
    assert out["allowed"] is True
    assert seen[0][1:] == ({**cm, "data": {"a": "b"}}, "UPDATE", "alice", ("dev",))
    assert check.rules[0].to_dict() == {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "resources": ["configmaps"],
        "operations": ["CREATE", "UPDATE"],
        "scope": "Namespaced",
    }
    assert check.path == "/validate-vcm.test.kubeop.dev"


async def test_a_raising_handler_denies_with_its_message() -> None:
    @validating(CONFIGMAPS, name="vcm.test.kubeop.dev")
    async def check(new: dict[str, Any]) -> None:
        raise RuntimeError("the quota service is down")

    out = response(await check.review(request({"metadata": {}})))
    assert out["allowed"] is False
    assert out["status"] == {
        "status": "Failure",
        "code": 500,
        "reason": "InternalError",
        "message": "the quota service is down",
    }


async def test_a_slow_handler_is_denied_at_the_deadline() -> None:
    @validating(CONFIGMAPS, name="vcm.test.kubeop.dev", timeout_seconds=1)
    def slow_sync(new: dict[str, Any]) -> None:
        time.sleep(2)

    @validating(CONFIGMAPS, name="vcm2.test.kubeop.dev", timeout_seconds=5)
    async def slow_async(new: dict[str, Any]) -> None:
        await asyncio.sleep(10)

    t0 = time.monotonic()
    out = response(await slow_sync.review(request({})))
    assert out["allowed"] is False and "did not answer within 1 s" in out["status"]["message"]
    out = response(await slow_async.review(request({}), timeout=0.5))  # the API server's ?timeout=
    assert "did not answer within 0.5 s" in out["status"]["message"]
    assert time.monotonic() - t0 < 2


async def test_denied_returned_or_raised_and_field_errors() -> None:
    @validating(CONFIGMAPS, name="vcm.test.kubeop.dev")
    def check(new: dict[str, Any]) -> Denied | Allowed:
        return Denied("not today", fields=[FieldError("data.a", "too long"), FieldError("data.b", "empty")])

    status = response(await check.review(request({})))["status"]
    assert status["message"] == "not today; data.a: too long; data.b: empty"
    assert len(status["details"]["causes"]) == 2
    assert Denied("plain").status()["code"] == 403


def patch_of(out: dict[str, Any]) -> list[dict[str, Any]]:
    assert out["allowed"] is True
    if "patch" not in out:
        return []
    assert out["patchType"] == "JSONPatch"
    return orjson.loads(base64.b64decode(out["patch"]))  # type: ignore[no-any-return]


def crontab_obj(replicas: int | None = None, **extra: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"cronSpec": "*/5 * * * *", "image": "busybox", **extra}
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "stable.example.com/v1beta1",
        "kind": "CronTab",
        "metadata": {"name": "c", "namespace": "ns", "uid": "x", "managedFields": [{"m": 1}]},
        "spec": spec,
    }


async def test_defaulting_patches_only_what_the_handler_changed() -> None:
    # Fields the model does not declare (managedFields is kept by ObjectMeta's extra="allow";
    # spec.unknown is dropped by the model) are kept, and only the handler's change is patched.
    obj = crontab_obj(unknown={"keep": True})
    ops = patch_of(response(await default.review(request(obj))))
    assert ops == [{"op": "add", "path": "/spec/replicas", "value": 1}]
    assert jsonpatch.apply(obj, ops)["spec"]["unknown"] == {"keep": True}
    assert patch_of(response(await default.review(request(crontab_obj(replicas=3))))) == []


async def test_defaulting_with_dicts_in_place_or_returned() -> None:
    @defaulting(CONFIGMAPS, name="mcm.test.kubeop.dev")
    def label(obj: dict[str, Any]) -> None:
        obj.setdefault("metadata", {}).setdefault("labels", {})["app.kubernetes.io/managed-by"] = "kubeop"

    ops = patch_of(response(await label.review(request({"metadata": {"name": "x"}}))))
    assert ops == [
        {"op": "add", "path": "/metadata/labels", "value": {"app.kubernetes.io/managed-by": "kubeop"}}
    ]
    assert label.path == "/mutate-mcm.test.kubeop.dev" and label.mutating
    assert defaulting(CONFIGMAPS)(lambda obj: obj).path == "/mutate--v1-configmap"

    @defaulting(CONFIGMAPS, name="mcm2.test.kubeop.dev")
    def bad(obj: dict[str, Any]) -> int:
        return 3

    out = response(await bad.review(request({})))
    assert out["allowed"] is False and "return the changed object" in out["status"]["message"]


def test_declaration_errors() -> None:
    with pytest.raises(TypeError, match="1 to 4 positional"):
        validating(CONFIGMAPS, name="v.test.kubeop.dev")(lambda: None)
    with pytest.raises(ValueError, match="fully qualified"):
        validating(CONFIGMAPS, name="short")(lambda new: None)
    with pytest.raises(ValueError, match="timeout_seconds"):
        validating(CONFIGMAPS, name="v.test.kubeop.dev", timeout_seconds=31)(lambda new: None)
    with pytest.raises(TypeError, match="declared CustomResource"):
        validating(dict)(lambda new: None)  # type: ignore[arg-type]
    assert validate.name == "vcrontab.stable.example.com"
    assert validate.path == "/validate-stable-example-com-v1beta1-crontab"
    assert default.model is CronTabV1Beta1 and validate.model is CronTabV1Beta1


@pytest.mark.parametrize(
    ("cron", "zone", "field", "message"),
    [
        ("0 0 30 2 *", None, "spec.cronSpec", "no month in the schedule has"),
        ("0 0 * * *", "Nowhere/Town", "spec.timeZone", "not an IANA time zone"),
    ],
)
async def test_a_schedule_that_never_runs_or_a_bad_time_zone_is_denied(
    cron: str, zone: str | None, field: str, message: str
) -> None:
    obj = crontab_v1beta1(cron)
    if zone is not None:
        obj["spec"]["timeZone"] = zone
    out = response(await validate.review(request(obj)))
    assert out["allowed"] is False
    (cause,) = out["status"]["details"]["causes"]
    assert cause["field"] == field and message in cause["message"]


def limit(x: int) -> Any:
    @validating(CONFIGMAPS, name="vlimit.test.kubeop.dev")
    def small_enough(new: dict[str, Any]) -> Any:
        return x <= 5  # a mistake: a bool is not a verdict

    return small_enough


async def test_a_validator_returning_false_denies_naming_the_handler() -> None:
    out = response(await limit(7).review(request({})))
    assert out["allowed"] is False and out["status"]["code"] == 500
    message = out["status"]["message"]
    assert "validating handler tests.unit.webhook.test_admission.limit.<locals>.small_enough" in message
    assert "returned False, which is not a verdict" in message
    assert "return None or Allowed(...) to allow, raise Denied(...) to deny" in message
    # True is no verdict either: the mistake shows whatever the object
    assert "returned True" in response(await limit(3).review(request({})))["status"]["message"]


@pytest.mark.parametrize(
    ("returned", "shown"),
    [
        (0, "returned 0,"),
        (2.5, "returned 2.5,"),
        (10**5000, "returned a huge int,"),
        ("s3cr3t-value", "returned a str of 12 characters,"),
        (b"s3cr3t-value", "returned a bytes of 12 bytes,"),
        ({"allowed": True, "password": "s3cr3t-value"}, "returned a dict of 2 items,"),
        (["s3cr3t-value"], "returned a list of 1 items,"),
        (Allowed, "returned a type,"),
        (Allowed(warnings="s3cr3t-value"), "returned Allowed(warnings=...) with a str of 12 characters"),
        (Allowed(warnings=[1]), "returned Allowed(warnings=...) with a list of 1 items"),
    ],
    ids=lambda value: type(value).__name__,
)
async def test_anything_but_a_verdict_denies_showing_only_its_type(returned: Any, shown: str) -> None:
    @validating(CONFIGMAPS, name="vany.test.kubeop.dev")
    async def check(new: dict[str, Any]) -> Any:
        return returned

    out = response(await check.review(request({"data": {"password": "s3cr3t-value"}})))
    assert out["allowed"] is False
    assert shown in out["status"]["message"] and "s3cr3t" not in out["status"]["message"]


async def test_the_documented_verdicts_still_allow_and_deny() -> None:
    @validating(CONFIGMAPS, name="vok.test.kubeop.dev")
    def check(new: dict[str, Any]) -> Any:
        return {"none": None, "allowed": Allowed(warnings=("w",)), "denied": Denied("no")}[new["v"]]

    assert response(await check.review(request({"v": "none"}))) == {"uid": "u1", "allowed": True}
    assert response(await check.review(request({"v": "allowed"})))["warnings"] == ["w"]
    assert response(await check.review(request({"v": "denied"})))["status"]["message"] == "no"


@pytest.mark.parametrize(
    ("returned", "shown"),
    [
        (lambda obj: obj.spec, "returned a CronTabSpecV1Beta1: return the changed CronTabV1Beta1"),
        (lambda obj: obj.model_dump(), "returned a dict of"),
        (lambda obj: True, "returned True: return the changed CronTabV1Beta1"),
        (lambda obj: Allowed(), "returned an Allowed:"),
    ],
)
async def test_a_typed_defaulter_returning_another_type_denies(returned: Any, shown: str) -> None:
    @defaulting(CronTabV1Beta1, name="mct.test.kubeop.dev")
    def fill(obj: CronTabV1Beta1) -> Any:
        obj.spec.replicas = 2
        return returned(obj)

    out = response(await fill.review(request(crontab_obj())))
    assert out["allowed"] is False and "patch" not in out
    assert out["status"]["code"] == 500 and out["status"]["reason"] == "InternalError"
    assert "defaulting handler tests.unit.webhook.test_admission." in out["status"]["message"]
    assert shown in out["status"]["message"]


@pytest.mark.parametrize(
    ("returned", "shown"),
    [
        (lambda obj: obj["metadata"], "returned a dict whose apiVersion is None, not the object's"),
        (lambda obj: {**obj, "kind": "Secret"}, "returned a dict whose kind is a str of 6 characters"),
        (lambda obj: [obj], "returned a list of 1 items: return the changed object (a dict)"),
        (lambda obj: "ok", "returned a str of 2 characters"),
    ],
)
async def test_a_dict_defaulter_returning_something_else_than_the_object_denies(
    returned: Any, shown: str
) -> None:
    @defaulting(CONFIGMAPS, name="mcm3.test.kubeop.dev")
    def fill(obj: dict[str, Any]) -> Any:
        return returned(obj)

    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
    out = response(await fill.review(request(cm)))
    assert out["allowed"] is False and "patch" not in out
    assert shown in out["status"]["message"]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no")


async def test_what_a_handler_does_never_escapes_the_review() -> None:
    @validating(CONFIGMAPS, name="vodd.test.kubeop.dev")
    def odd(new: dict[str, Any]) -> Any:
        if new["how"] == "unprintable":
            raise Unprintable
        if new["how"] == "warnings":
            raise Denied("no", warnings=[object()])  # dropped: only strings are warnings
        raise Denied("no", fields=[FieldError("spec.x", object())])  # type: ignore[arg-type]

    out = response(await odd.review(request({"how": "unprintable"})))
    assert out["allowed"] is False and out["status"]["message"] == "Unprintable"
    out = response(await odd.review(request({"how": "warnings"})))
    assert out["allowed"] is False and out["status"]["message"] == "no" and "warnings" not in out
    out = response(await odd.review(request({"how": "causes"})))
    assert out["allowed"] is False and out["status"]["code"] == 500
    message = out["status"]["message"]
    assert (
        message
        == "webhook vodd.test.kubeop.dev failed to answer: TypeError: Type is not JSON serializable: object"
    )


async def test_a_cancelled_error_from_a_handler_denies_naming_it_unless_the_review_is_cancelled() -> None:
    """A CancelledError the handler raised (a future someone else cancelled, the result of a
    cancelled concurrent future) gave no verdict: the server closed the connection and the API
    server's failurePolicy decided (Ignore: the request went through)."""

    @validating(CONFIGMAPS, name="vasync.test.kubeop.dev")
    async def awaits_cancelled(new: dict[str, Any]) -> None:
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        await future

    @validating(CONFIGMAPS, name="vsync.test.kubeop.dev")
    def result_of_cancelled(new: dict[str, Any]) -> None:
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        future.cancel()
        future.result()

    for hook, name in [(awaits_cancelled, "awaits_cancelled"), (result_of_cancelled, "result_of_cancelled")]:
        status, raw = await Webhooks([hook]).handle(hook.path, orjson.dumps(_review_of({"a": 1})))
        out = response(raw)
        assert status == 200 and out["allowed"] is False and out["status"]["code"] == 500
        assert name in out["status"]["message"] and "CancelledError" in out["status"]["message"]
        assert hook.stuck_calls == 0

    # a review that is itself cancelled still is: cancellation is never turned into a verdict
    started = asyncio.Event()

    @validating(CONFIGMAPS, name="vwaits.test.kubeop.dev")
    async def waits(new: dict[str, Any]) -> None:
        started.set()
        await asyncio.sleep(5)

    task = asyncio.ensure_future(waits.review(request({"a": 1})))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def _review_of(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u1", "operation": "CREATE", "object": obj, "userInfo": {"username": "a"}},
    }


def deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = {"a": value}
    return value


async def test_a_300_deep_object_gets_a_verdict_from_every_kind_of_handler() -> None:
    @validating(CONFIGMAPS, name="vdeep.test.kubeop.dev")
    def check(new: dict[str, Any]) -> None:
        return None

    @defaulting(CONFIGMAPS, name="mdeep.test.kubeop.dev")
    def fill(obj: dict[str, Any]) -> dict[str, Any]:
        obj["data"] = deep(300)
        return obj

    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": deep(300)}
    typed = crontab_obj()
    typed["spec"]["extra"] = deep(300)
    hooks = Webhooks([check, fill, validate, default])
    for hook, obj, allowed in [
        (check, cm, True),
        (fill, cm, False),
        (validate, typed, True),
        (default, typed, True),
    ]:
        status, out = await hooks.handle(hook.path, _admission_body(_encode_deep(obj)))
        assert status == 200, out  # main: the defaulter's copy raised out of the review
        assert response(out)["allowed"] is allowed, hook.name


def _encode_deep(obj: Any) -> bytes:
    """orjson does not encode past 254 levels; json does (as the API server's Go encoder does)."""
    return json.dumps(obj, separators=(",", ":")).encode()


def _admission_body(obj: bytes) -> bytes:
    head = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":'
    return head + b'{"uid":"u1","operation":"CREATE","object":' + obj + b"}}"


async def test_stuck_sync_handlers_of_one_webhook_never_delay_another() -> None:
    """More stuck calls than the default thread pool has threads, all on webhook A: B's instant
    sync handler still answers at once, and A's next request is refused at once (main: both
    waited for the shared pool and were denied by timeout)."""
    release = threading.Event()

    @validating(CONFIGMAPS, name="vstuck.test.kubeop.dev", timeout_seconds=1)
    def stuck(new: dict[str, Any]) -> None:
        release.wait(20)

    @validating(CONFIGMAPS, name="vquick.test.kubeop.dev", timeout_seconds=1)
    def quick(new: dict[str, Any]) -> None:
        return None

    hooks = Webhooks([stuck, quick])
    body = orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u1", "operation": "CREATE", "object": {}},
        }
    )
    default_pool = min(32, (os.cpu_count() or 1) + 4)  # asyncio.to_thread's threads
    try:
        first = await asyncio.gather(*(hooks.handle(stuck.path, body, 0.5) for _ in range(default_pool)))
        assert all(not orjson.loads(out)["response"]["allowed"] for _, out in first)

        t0 = time.monotonic()
        status, out = await hooks.handle(quick.path, body, 1)
        assert status == 200 and response(out)["allowed"] is True  # main: denied by timeout
        status, out = await hooks.handle(stuck.path, body, 1)
        assert time.monotonic() - t0 < 0.5
        refused = response(out)
        assert refused["allowed"] is False and refused["status"]["code"] == 503
        assert refused["status"]["message"] == (
            "handler tests.unit.webhook.test_admission.test_stuck_sync_handlers_of_one_webhook_never_"
            "delay_another.<locals>.stuck has 4 calls still running past their deadline (all of "
            "webhook vstuck.test.kubeop.dev's 4 threads): denied at once"
        )
        metrics = CollectorRegistry()
        hooks.observe(metrics)
        assert stuck.stuck_calls == 4  # the others were dropped before they started
        assert metrics.get_sample_value("kubeop_webhook_stuck_calls", {"webhook": stuck.path}) == 4
        assert metrics.get_sample_value("kubeop_webhook_stuck_calls", {"webhook": quick.path}) == 0
    finally:
        release.set()
    for _ in range(500):  # each stuck call is counted out as it returns
        if stuck.stuck_calls == 0:
            break
        await asyncio.sleep(0.01)
    assert metrics.get_sample_value("kubeop_webhook_stuck_calls", {"webhook": stuck.path}) == 0
    status, out = await hooks.handle(stuck.path, body, 1)
    assert response(out)["allowed"] is True


def test_max_threads_is_checked() -> None:
    with pytest.raises(ValueError, match=r"max_threads must be 1\.\.64, not 0"):
        validating(CONFIGMAPS, name="v.test.kubeop.dev", max_threads=0)(lambda new: None)
