"""Manifests: parsing, equality by content (not formatting), diffs."""

from __future__ import annotations

import pytest

from kubeop.helm.manifest import (
    ManifestError,
    ObjectKey,
    diff_manifests,
    manifest_kinds,
    manifests_equal,
    object_key,
    parse_manifest,
)

A = """---
# Source: chart/templates/service.yaml
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  ports:
    - port: 80
---
# Source: chart/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
"""


def test_parse_skips_empty_documents_and_expands_lists() -> None:
    text = (
        A
        + "---\n# empty\n---\napiVersion: v1\nkind: List\nitems:\n"
        + "- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n"
    )
    objs = parse_manifest(text)
    assert [o["kind"] for o in objs] == ["Service", "Deployment", "ConfigMap"]
    assert parse_manifest("") == ()


def test_parse_is_memoised() -> None:
    assert parse_manifest(A) is parse_manifest(A)


def test_invalid_manifests() -> None:
    with pytest.raises(ManifestError, match="not valid YAML"):
        parse_manifest("a: [1\n")
    with pytest.raises(ManifestError, match="not an object"):
        parse_manifest("- a\n- b\n")


def test_equal_ignores_comments_whitespace_key_and_document_order() -> None:
    reordered = """apiVersion: apps/v1
kind: Deployment
spec: {replicas: 1}
metadata: {name: web}
---
kind: Service
apiVersion: v1
metadata:
    name: web
spec:
    ports: [{port: 80}]
"""
    assert manifests_equal(A, reordered)
    assert manifests_equal(A, A)


def test_content_differences_count() -> None:
    assert not manifests_equal(A, A.replace("replicas: 1", "replicas: 2"))
    assert not manifests_equal(A, A.replace("port: 80", 'port: "80"'))  # type matters
    assert not manifests_equal(A, A.split("---\n# Source: chart/templates/deployment.yaml")[0])


def test_diff() -> None:
    new = A.replace("replicas: 1", "replicas: 2").replace("kind: Service", "kind: ConfigMap")
    diff = diff_manifests(A, new)
    assert diff.added == (ObjectKey("v1", "ConfigMap", "", "web"),)
    assert diff.removed == (ObjectKey("v1", "Service", "", "web"),)
    assert diff.changed == (ObjectKey("apps/v1", "Deployment", "", "web"),)
    assert diff.summary() == "added: ConfigMap web; changed: Deployment web; removed: Service web"
    assert not diff_manifests(A, A)
    assert diff_manifests(A, A).summary() == "no object changes"
    assert diff_manifests("", A).added == tuple(sorted(object_key(o) for o in parse_manifest(A)))


def test_kinds_and_keys() -> None:
    objs = parse_manifest(A + "---\napiVersion: v1\nkind: Service\nmetadata: {name: other, namespace: x}\n")
    assert manifest_kinds(objs) == [("v1", "Service"), ("apps/v1", "Deployment")]
    assert str(object_key(objs[-1])) == "Service x/other"
