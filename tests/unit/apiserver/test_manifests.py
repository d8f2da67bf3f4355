"""apiserver_manifests: the Service, the APIService of the group version and the RBAC bindings."""

from __future__ import annotations

import base64

import pytest

from kubeop.apiserver import apiserver_manifests
from kubeop.crd import CustomResource
from tests.unit.apiserver.conftest import Widget


def test_service_apiservice_and_rbac() -> None:
    service, apiservice, delegator, reader = apiserver_manifests(
        [Widget], name="widgets-api", namespace="widgets", service_account="sa", ca_bundle=b"PEM"
    )
    assert service["spec"]["selector"] == {"app": "widgets-api"}
    assert service["spec"]["ports"][0]["targetPort"] == 8443
    assert apiservice["metadata"]["name"] == "v1alpha1.example.com"
    assert apiservice["spec"]["service"] == {"name": "widgets-api", "namespace": "widgets", "port": 443}
    assert base64.b64decode(apiservice["spec"]["caBundle"]) == b"PEM"
    assert delegator["roleRef"]["name"] == "system:auth-delegator"
    assert reader["metadata"]["namespace"] == "kube-system"
    assert reader["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    assert reader["subjects"] == [{"kind": "ServiceAccount", "name": "sa", "namespace": "widgets"}]


def test_one_group_version_only() -> None:
    class Other(CustomResource, group="example.com", version="v2"):
        pass

    with pytest.raises(ValueError, match="one APIService per group version"):
        apiserver_manifests([Widget, Other], name="x", namespace="y", service_account="z")


def test_the_certificate_rotators_rbac_with_cert_secret() -> None:
    objs = apiserver_manifests(
        [Widget], name="widgets-api", namespace="widgets", service_account="sa", cert_secret="widgets-cert"
    )
    role, binding, cluster_role, cluster_binding = objs[4:]
    assert role["metadata"]["namespace"] == "widgets"
    assert {
        "apiGroups": [""],
        "resources": ["secrets"],
        "verbs": ["get", "update"],
        "resourceNames": ["widgets-cert"],
    } in role["rules"]
    assert cluster_role["rules"][0]["resourceNames"] == ["v1alpha1.example.com"]
    assert cluster_role["rules"][0]["verbs"] == ["get", "patch"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert cluster_binding["roleRef"]["name"] == cluster_role["metadata"]["name"]
    assert cluster_binding["subjects"] == [{"kind": "ServiceAccount", "name": "sa", "namespace": "widgets"}]
