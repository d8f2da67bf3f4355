from __future__ import annotations

import orjson
import pytest
from examples.crontab.main import webhooks
from examples.crontab.webhooks.crontab_v1 import conversion
from examples.crontab.webhooks.crontab_v1beta1 import default, validate

from kubeop.webhook import AdmissionRequest, AdmissionWebhook, Webhooks
from kubeop.webhook.registry import parse_timeout


def test_parse_timeout() -> None:
    assert parse_timeout("10s") == 10
    assert parse_timeout("1m30s") == 90
    assert parse_timeout("500ms") == 0.5
    assert parse_timeout("ten") is None and parse_timeout(None) is None and parse_timeout("") is None


async def test_handle_routes_by_path_and_answers_bad_reviews_with_400() -> None:
    status, body = await webhooks.handle("/nope", b"{}")
    assert status == 404
    status, body = await webhooks.handle(validate.path, b"{oops")
    assert status == 400 and "not JSON" in orjson.loads(body)["message"]
    status, body = await webhooks.handle(conversion.path, b'{"apiVersion": "v1", "kind": "ConversionReview"}')
    assert status == 400 and "apiVersion" in orjson.loads(body)["message"]
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "operation": "DELETE", "object": None},
    }
    status, body = await webhooks.handle(default.path, orjson.dumps(review))
    assert status == 200 and orjson.loads(body)["response"] == {"uid": "u", "allowed": True}


def test_paths_and_names_are_unique() -> None:
    assert len(webhooks) == 3 and webhooks.conversions == [conversion]
    with pytest.raises(ValueError, match="share the path"):
        Webhooks([validate, validate])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}',
            "uid",
        ),
        (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":[]}', "request object"),
        (
            b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":'
            + b"[" * 5000
            + b"]" * 5000
            + b"}",
            "not JSON",
        ),
    ],
)
async def test_a_body_that_is_no_review_is_a_400_on_every_path(body: bytes, message: str) -> None:
    for path in (validate.path, default.path):
        status, out = await webhooks.handle(path, body)
        assert status == 400 and message in orjson.loads(out)["message"]
    conversion_body = body.replace(b"admission.k8s.io/v1", b"apiextensions.k8s.io/v1").replace(
        b"AdmissionReview", b"ConversionReview"
    )
    status, out = await webhooks.handle(conversion.path, conversion_body)
    assert status == 400 and message in orjson.loads(out)["message"]


async def test_a_review_that_raises_still_denies_with_the_uid() -> None:
    class Broken(AdmissionWebhook):
        async def review(self, request: AdmissionRequest, timeout: float | None = None) -> bytes:
            raise RuntimeError("a bug")

    broken = Broken("vbroken.test.kubeop.dev", "/broken", lambda new: None, False, ())
    request = {"uid": "u9", "operation": "CREATE"}
    review = orjson.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    )
    status, out = await Webhooks([broken]).handle("/broken", review)
    response = orjson.loads(out)["response"]
    assert status == 200 and response["uid"] == "u9" and response["allowed"] is False
    assert response["status"]["message"] == "webhook vbroken.test.kubeop.dev failed to answer: RuntimeError"
