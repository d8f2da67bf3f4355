"""The questions kubeop run asks the authorizer, derived from the generated rules."""

from __future__ import annotations

from kubeop.cli.permissions import Access, accesses
from kubeop.crd.rbac import PolicyRule


def test_one_question_per_verb_group_resource_and_name() -> None:
    rules = [
        PolicyRule(("webapp.example.com",), ("guestbooks", "guestbooks/status"), ("get", "patch")),
        PolicyRule(("",), ("secrets",), ("get",), ("key-a", "key-b")),
        PolicyRule(verbs=("get",), non_resource_urls=("/metrics",)),
    ]
    assert accesses(rules) == [
        Access("get", "webapp.example.com", "guestbooks"),
        Access("patch", "webapp.example.com", "guestbooks"),
        Access("get", "webapp.example.com", "guestbooks", "status"),
        Access("patch", "webapp.example.com", "guestbooks", "status"),
        Access("get", "", "secrets", name="key-a"),
        Access("get", "", "secrets", name="key-b"),
        Access("get", url="/metrics"),
    ]


def test_namespaced_questions_and_descriptions() -> None:
    (lease,) = accesses([PolicyRule(("coordination.k8s.io",), ("leases",), ("update",))], namespace="ops")
    assert lease.describe() == "update leases.coordination.k8s.io in namespace ops"
    assert Access("patch", "webapp.example.com", "guestbooks", "status").describe() == (
        "patch guestbooks/status.webapp.example.com (cluster-wide)"
    )
    assert Access("get", "", "secrets", name="key").describe() == "get secrets named key (cluster-wide)"


def test_the_review_bodies() -> None:
    assert Access("list", "", "pods", namespace="ops").review()["spec"] == {
        "resourceAttributes": {"verb": "list", "group": "", "resource": "pods", "namespace": "ops"}
    }
    assert Access("get", url="/metrics").review()["spec"] == {
        "nonResourceAttributes": {"verb": "get", "path": "/metrics"}
    }
