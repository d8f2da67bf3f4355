from __future__ import annotations

import base64

import orjson
import pytest

from kubeop.webhook.review import (
    BadReview,
    admission_response,
    conversion_response,
    decode_admission,
    decode_conversion,
)


def review(**request: object) -> bytes:
    body = {"uid": "u1", "operation": "CREATE", "object": {"a": 1}, **request}
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body})


def test_decodes_a_request() -> None:
    req = decode_admission(
        review(userInfo={"username": "alice", "groups": ["dev"]}, namespace="ns", oldObject=None)
    )
    assert (req.uid, req.operation, req.namespace, req.object, req.old_object) == (
        "u1",
        "CREATE",
        "ns",
        {"a": 1},
        None,
    )
    assert req.user_info.username == "alice" and req.user_info.groups == ("dev",)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "not JSON"),
        (b"[1]", "JSON list"),
        (orjson.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}), "apiVersion"),
        (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "ConversionReview"}), "kind"),
        (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}), "request"),
        (review(uid=""), "uid"),
        (review(operation="PATCH"), "operation"),
        (review(object=[1]), "request.object"),
        (review(userInfo={"groups": "dev"}), "groups"),
    ],
)
def test_rejects_what_the_api_server_would_not_send(body: bytes, message: str) -> None:
    with pytest.raises(BadReview, match=message):
        decode_admission(body)


def test_conversion_review() -> None:
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "c1", "desiredAPIVersion": "g/v1", "objects": [{"x": 1}]},
    }
    req = decode_conversion(orjson.dumps(body))
    assert (req.uid, req.desired_api_version, req.objects) == ("c1", "g/v1", [{"x": 1}])
    with pytest.raises(BadReview, match="desiredAPIVersion"):
        decode_conversion(orjson.dumps({**body, "request": {"uid": "c1", "objects": []}}))
    with pytest.raises(BadReview, match="objects"):
        decode_conversion(orjson.dumps({**body, "request": {"uid": "c1", "desiredAPIVersion": "g/v1"}}))


def test_responses() -> None:
    out = orjson.loads(admission_response("u", allowed=True, patch=[{"op": "remove", "path": "/a"}]))
    assert out["response"]["patchType"] == "JSONPatch"
    assert orjson.loads(base64.b64decode(out["response"]["patch"])) == [{"op": "remove", "path": "/a"}]
    assert "patch" not in orjson.loads(admission_response("u", allowed=True, patch=[]))["response"]
    failed = orjson.loads(conversion_response("c", failure="boom"))["response"]
    assert failed["result"] == {"status": "Failure", "message": "boom"}
