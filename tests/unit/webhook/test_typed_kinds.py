"""Webhooks of typed built-in kinds (kubeop.kinds), as every client verb takes them: the handler
receives the typed object, a defaulter's changes become the patch, and the series a webhook's
requests leave on a registry carry controller-runtime's names."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from prometheus_client import CollectorRegistry

from kubeop.kinds import ConfigMap, Deployment
from kubeop.webhook import Conversion, Denied, FieldError, Webhooks, defaulting, validating
from kubeop.webhook.review import decode_admission

SEEN: list[object] = []


@validating(ConfigMap)
def no_empty_values(new: ConfigMap, old: ConfigMap | None) -> None:
    SEEN.append(new)
    empty = [key for key, value in (new.data or {}).items() if not value]
    if empty:
        raise Denied(fields=[FieldError(f"data.{key}", "must not be empty") for key in empty])


@defaulting(Deployment)
def two_replicas(new: Deployment) -> Deployment:
    SEEN.append(new)
    assert new.spec is not None
    if new.spec.replicas is None:
        new.spec.replicas = 2
    return new


def review(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u1", "operation": "CREATE", "object": obj, "userInfo": {}},
        }
    )


def configmap(data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "ns"},
        "data": data,
    }


def deployment(replicas: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns"},
        "spec": spec,
    }


def test_a_typed_kind_names_its_rules_and_kubebuilders_path() -> None:
    assert no_empty_values.path == "/validate--v1-configmap"
    assert two_replicas.path == "/mutate-apps-v1-deployment"
    (rule,) = two_replicas.rules
    assert (rule.api_groups, rule.api_versions, rule.resources) == (("apps",), ("v1",), ("deployments",))


async def test_a_validator_of_configmap_receives_a_configmap() -> None:
    SEEN.clear()
    allowed = orjson.loads(await no_empty_values.review(decode_admission(review(configmap({"a": "1"})))))
    assert allowed["response"]["allowed"] is True
    assert isinstance(SEEN[0], ConfigMap) and SEEN[0].data == {"a": "1"}
    denied = orjson.loads(await no_empty_values.review(decode_admission(review(configmap({"b": ""})))))
    assert denied["response"]["allowed"] is False
    assert denied["response"]["status"]["details"]["causes"][0]["field"] == "data.b"


async def test_a_defaulter_of_deployment_patches_only_what_it_changed() -> None:
    SEEN.clear()
    out = orjson.loads(await two_replicas.review(decode_admission(review(deployment(None)))))
    assert isinstance(SEEN[0], Deployment)
    patch = orjson.loads(base64.b64decode(out["response"]["patch"]))
    assert patch == [{"op": "add", "path": "/spec/replicas", "value": 2}]
    kept = orjson.loads(await two_replicas.review(decode_admission(review(deployment(3)))))
    assert kept["response"]["allowed"] is True and "patch" not in kept["response"]


async def test_an_object_the_typed_kind_rejects_is_denied_before_the_handler() -> None:
    SEEN.clear()
    bad = deployment(None)
    bad["spec"]["replicas"] = "many"
    out = orjson.loads(await two_replicas.review(decode_admission(review(bad))))
    assert out["response"]["allowed"] is False and SEEN == []
    assert "spec.replicas" in out["response"]["status"]["message"]


def test_conversion_of_a_built_in_kind_is_refused_with_the_reason() -> None:
    with pytest.raises(TypeError, match=r"built-in kinds .* converted by the API server"):
        Conversion.of_models(Deployment)  # type: ignore[arg-type]


async def test_webhook_requests_leave_controller_runtimes_series() -> None:
    registry = CollectorRegistry()
    webhooks = Webhooks([no_empty_values, two_replicas])
    webhooks.observe(registry)
    path = no_empty_values.path
    assert registry.get_sample_value("controller_runtime_webhook_requests_in_flight", {"webhook": path}) == 0
    assert (await webhooks.handle(path, review(configmap({"a": "1"}))))[0] == 200
    assert (await webhooks.handle(path, b"not json"))[0] == 400
    assert (await webhooks.handle("/nowhere", b"{}"))[0] == 404  # no webhook: not counted
    value = registry.get_sample_value
    assert value("controller_runtime_webhook_requests_total", {"webhook": path, "code": "200"}) == 1
    assert value("controller_runtime_webhook_requests_total", {"webhook": path, "code": "400"}) == 1
    assert value("controller_runtime_webhook_requests_in_flight", {"webhook": path}) == 0
    assert value("controller_runtime_webhook_latency_seconds_count", {"webhook": path}) == 2
    assert value("controller_runtime_webhook_latency_seconds_bucket", {"webhook": path, "le": "10.0"}) == 2
    assert value("controller_runtime_webhook_latency_seconds_count", {"webhook": two_replicas.path}) == 0
    assert value("controller_runtime_webhook_requests_total", {"webhook": "/nowhere", "code": "404"}) is None
