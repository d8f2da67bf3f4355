from __future__ import annotations

import base64

import pytest
from examples.crontab.api.v1.crontab import CronTab
from examples.crontab.api.v1beta1.crontab import CronTabV1Beta1
from examples.crontab.main import webhooks
from examples.crontab.webhooks.crontab_v1 import conversion

from kubeop.crd import crd_manifest
from kubeop.webhook import Conversion, Endpoint, webhook_configurations, with_conversion


def test_configurations_for_a_local_url() -> None:
    endpoint = Endpoint.url("https://127.0.0.1:9443/", ca_bundle=b"PEM")
    validating, mutating = webhook_configurations(webhooks, "crontab", endpoint)
    assert validating["kind"] == "ValidatingWebhookConfiguration"
    assert validating["metadata"] == {"name": "crontab-validating"}
    assert validating["webhooks"] == [
        {
            "name": "vcrontab.stable.example.com",
            "admissionReviewVersions": ["v1"],
            "clientConfig": {
                "url": "https://127.0.0.1:9443/validate-stable-example-com-v1beta1-crontab",
                "caBundle": base64.b64encode(b"PEM").decode(),
            },
            "rules": [
                {
                    "apiGroups": ["stable.example.com"],
                    "apiVersions": ["v1beta1"],
                    "resources": ["crontabs"],
                    "operations": ["CREATE", "UPDATE"],
                    "scope": "Namespaced",
                }
            ],
            "failurePolicy": "Fail",
            "matchPolicy": "Equivalent",
            "sideEffects": "None",
            "timeoutSeconds": 10,
        }
    ]
    assert mutating["kind"] == "MutatingWebhookConfiguration"
    assert mutating["webhooks"][0]["reinvocationPolicy"] == "Never"
    assert mutating["webhooks"][0]["clientConfig"]["url"].endswith(
        "/mutate-stable-example-com-v1beta1-crontab"
    )


def test_service_endpoint_with_cert_manager() -> None:
    endpoint = Endpoint.service("op-webhook", "op-system", cert_manager="op-system/serving-cert")
    (validating, _) = webhook_configurations(webhooks, "op", endpoint)
    assert validating["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": "op-system/serving-cert"
    }
    assert validating["webhooks"][0]["clientConfig"] == {
        "service": {
            "name": "op-webhook",
            "namespace": "op-system",
            "path": "/validate-stable-example-com-v1beta1-crontab",
            "port": 443,
        }
    }
    crd = with_conversion(crd_manifest([CronTabV1Beta1, CronTab]), conversion, endpoint)
    assert crd["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": "op-system/serving-cert"}
    with pytest.raises(ValueError, match="https"):
        Endpoint.url("http://127.0.0.1:9443")


def test_the_crd_conversion_stanza() -> None:
    crd = crd_manifest([CronTabV1Beta1, CronTab])
    converted = with_conversion(crd, conversion, Endpoint.url("https://127.0.0.1:9443", ca_bundle=b"CA"))
    assert crd["spec"]["conversion"] == {"strategy": "None"}  # the input is not changed
    assert converted["spec"]["conversion"] == {
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {
                "url": "https://127.0.0.1:9443/convert/crontabs.stable.example.com",
                "caBundle": base64.b64encode(b"CA").decode(),
            },
            "conversionReviewVersions": ["v1"],
        },
    }
    versions = {
        v["name"]: (v["served"], v["storage"], v.get("deprecated", False)) for v in crd["spec"]["versions"]
    }
    assert versions == {"v1": (True, True, False), "v1beta1": (True, False, True)}


def test_conversion_must_cover_the_crd() -> None:
    crd = crd_manifest([CronTabV1Beta1, CronTab])
    with pytest.raises(ValueError, match="v1beta1 are in the CRD but not in the conversion"):
        with_conversion(crd, Conversion("stable.example.com", "CronTab", "v1"), Endpoint.url("https://h"))
    with pytest.raises(ValueError, match="the conversion for Widget"):
        with_conversion(crd, Conversion("stable.example.com", "Widget", "v1"), Endpoint.url("https://h"))
