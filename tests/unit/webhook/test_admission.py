from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import orjson
import pytest
from examples.crontab.api.v1beta1.crontab import CronTabV1Beta1
from examples.crontab.webhooks.crontab_v1beta1 import default, validate

from kubeop.core.resource import ApiResource
from kubeop.webhook import Allowed, Denied, FieldError, UserInfo, defaulting, jsonpatch, validating
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
