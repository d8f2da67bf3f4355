"""Dependent objects: which events matter, whom they concern, what must exist."""

from __future__ import annotations

from typing import Any

from kubeop.controller import Request
from kubeop.helm.dependents import dependent_changed, desired_object, owner_requests


def obj(**md: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", **md},
    }


def test_only_content_changes_count() -> None:
    old = {**obj(resourceVersion="1", generation=1), "spec": {"replicas": 1}, "status": {"ready": 0}}
    assert not dependent_changed(old, {**old, "status": {"ready": 1}})
    assert not dependent_changed(
        old, {**old, "metadata": {**old["metadata"], "resourceVersion": "2", "managedFields": []}}
    )
    assert dependent_changed(old, {**old, "spec": {"replicas": 2}})
    assert dependent_changed(old, {**old, "metadata": {**old["metadata"], "labels": {"a": "b"}}})


def test_owner_requests() -> None:
    ours = {
        "apiVersion": "web.example.com/v1",
        "kind": "PhpDeployment",
        "name": "web",
        "uid": "u",
        "controller": True,
    }
    assert owner_requests(obj(ownerReferences=[ours]), "web.example.com", "PhpDeployment") == [
        Request("ns", "web")
    ]
    # Controlled by something else: not ours, even with Helm's annotations.
    other = {**ours, "kind": "Other"}
    annotated = {"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": "ns"}
    assert (
        owner_requests(
            obj(ownerReferences=[other], annotations=annotated), "web.example.com", "PhpDeployment"
        )
        == []
    )
    # No controller (cluster-scoped, or created by a plain helm install): Helm's annotations.
    cluster_scoped = {"metadata": {"name": "role", "annotations": annotated}}
    assert owner_requests(cluster_scoped, "web.example.com", "PhpDeployment") == [Request("ns", "web")]
    assert owner_requests(obj(), "web.example.com", "PhpDeployment") == []
    non_controller = {**ours, "controller": False}
    assert owner_requests(obj(ownerReferences=[non_controller]), "web.example.com", "PhpDeployment") == []


def test_desired_object_has_helms_metadata() -> None:
    manifest_obj = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "labels": {"a": "b"}}}
    want = desired_object(manifest_obj, "web", "ns", namespaced=True)
    assert want["metadata"] == {
        "name": "web",
        "namespace": "ns",
        "labels": {"a": "b", "app.kubernetes.io/managed-by": "Helm"},
        "annotations": {"meta.helm.sh/release-name": "web", "meta.helm.sh/release-namespace": "ns"},
    }
    assert "namespace" not in manifest_obj["metadata"]  # a copy
    role = desired_object(
        {"kind": "ClusterRole", "metadata": {"name": "r", "namespace": "x"}}, "web", "ns", namespaced=False
    )
    assert "namespace" not in role["metadata"]
