from __future__ import annotations

import orjson
import pytest
from examples.crontab.main import webhooks
from examples.crontab.webhooks.crontab_v1 import conversion
from examples.crontab.webhooks.crontab_v1beta1 import default, validate

from kubeop.webhook import Webhooks
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
