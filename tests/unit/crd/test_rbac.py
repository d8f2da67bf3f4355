"""RBAC declared in code: rules, declarations, derived permissions and the roles built from them."""

from __future__ import annotations

import types
from typing import Any, ClassVar

import pytest
from pydantic import BaseModel

from kubeop.core import ApiResource
from kubeop.crd import CustomResource, DeclarationError
from kubeop.crd.rbac import (
    Permissions,
    PolicyRule,
    cluster_role,
    cluster_role_binding,
    declared_rules,
    editor_role,
    group_resource,
    leader_election_role,
    metrics_auth_role,
    metrics_reader_role,
    normalize_rules,
    rbac_rule,
    role,
    role_binding,
    service_account,
    viewer_role,
)

GROUP = "rbac.unit.crd-tests.kubeop.dev"


class Backup(CustomResource, group=GROUP, version="v1"):
    spec: dict[str, Any] = {}


class Deployment(BaseModel):  # a typed model of a built-in kind: GVK only, plural guessed
    api_version: ClassVar[str] = "apps/v1"
    kind: ClassVar[str] = "Deployment"


def test_rbac_rule_spellings() -> None:
    assert rbac_rule(groups="apps", resources="deployments;statefulsets", verbs="get;list") == PolicyRule(
        ("apps",), ("deployments", "statefulsets"), ("get", "list")
    )
    assert rbac_rule(resources=["configmaps"], verbs=["get"]).api_groups == ("",)
    assert rbac_rule(groups="apps;batch", resources="jobs", verbs="get").api_groups == ("apps", "batch")
    assert rbac_rule(urls="/metrics;/healthz", verbs="get").to_dict() == {
        "nonResourceURLs": ["/metrics", "/healthz"],
        "verbs": ["get"],
    }
    assert PolicyRule(("",), ("secrets",), ("get",), resource_names=("tls",)).to_dict() == {
        "apiGroups": [""],
        "resources": ["secrets"],
        "resourceNames": ["tls"],
        "verbs": ["get"],
    }


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: PolicyRule(("",), ("pods",), ()), "needs verbs"),
        (lambda: PolicyRule(("",), ("pods",), ("read",)), r"unknown RBAC verbs \['read'\]"),
        (lambda: PolicyRule(("",), (), ("get",)), "needs resources"),
        (lambda: PolicyRule((), ("pods",), ("get",)), "needs api_groups"),
        (lambda: PolicyRule(("",), ("Pods",), ("get",)), "are not lower-case plural names"),
        (lambda: PolicyRule(("",), ("pods",), ("get",), non_resource_urls=("/x",)), "either resources or"),
        (lambda: PolicyRule(verbs=("get",), non_resource_urls=("metrics",)), "must start with '/'"),
    ],
)
def test_bad_rules(make: Any, message: str) -> None:
    with pytest.raises(DeclarationError, match=message):
        make()


@rbac_rule(groups="apps", resources="deployments", verbs="get;list;watch")
@rbac_rule(resources="events", verbs="create;patch")
async def reconcile(req: object) -> None:
    return None


class Reconciler:
    @rbac_rule(groups="batch", resources="jobs", verbs="create")
    async def reconcile(self, req: object) -> None:
        return None

    @classmethod
    @rbac_rule(resources="secrets", verbs="get")
    def setup(cls) -> None:
        return None


def test_declared_rules_from_functions_methods_classes_and_modules() -> None:
    assert [r.resources for r in declared_rules(reconcile)] == [("deployments",), ("events",)]
    assert [r.resources for r in declared_rules(Reconciler)] == [("jobs",), ("secrets",)]
    assert declared_rules(Reconciler().reconcile) == declared_rules(Reconciler.reconcile)
    module = types.ModuleType("controllers")
    module.reconcile = reconcile  # type: ignore[attr-defined]
    module.Reconciler = Reconciler  # type: ignore[attr-defined]
    assert len(declared_rules(module)) == 4
    assert len(declared_rules(module, reconcile)) == 4  # duplicates removed


def test_normalize_merges_verbs_and_groups_resources() -> None:
    rules = normalize_rules(
        [
            PolicyRule(("apps",), ("deployments",), ("get", "list")),
            PolicyRule(("apps",), ("deployments", "statefulsets"), ("watch",)),
            PolicyRule(("apps",), ("statefulsets",), ("list", "get")),
            PolicyRule(("",), ("configmaps",), ("*", "get")),
            PolicyRule(("",), ("secrets",), ("get",), resource_names=("a",)),
            PolicyRule(("",), ("secrets",), ("list",)),
            PolicyRule(verbs=("get",), non_resource_urls=("/metrics",)),
            PolicyRule(verbs=("get",), non_resource_urls=("/healthz",)),
        ]
    )
    assert [r.to_dict() for r in rules] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"], "verbs": ["get"]},
        {
            "apiGroups": ["apps"],
            "resources": ["deployments", "statefulsets"],
            "verbs": ["get", "list", "watch"],
        },
        {"nonResourceURLs": ["/healthz", "/metrics"], "verbs": ["get"]},
    ]


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        (Backup, (GROUP, "backups")),
        (Deployment, ("apps", "deployments")),
        (ApiResource("", "v1", "configmaps", kind="ConfigMap"), ("", "configmaps")),
        ("configmaps", ("", "configmaps")),
        ("deployments.apps", ("apps", "deployments")),
        (f"backups.{GROUP}", (GROUP, "backups")),
    ],
)
def test_group_resource(kind: Any, expected: tuple[str, str]) -> None:
    assert group_resource(kind) == expected


@pytest.mark.parametrize("kind", ["Deployments", "apps/deployments", ""])
def test_group_resource_rejects_other_spellings(kind: str) -> None:
    with pytest.raises(DeclarationError, match=r"use 'plural' or 'plural\.group'"):
        group_resource(kind)


def test_permissions_from_what_the_operator_does() -> None:
    perms = (
        Permissions()
        .watches(Backup)
        .status(Backup)
        .finalizers(Backup)
        .owns(Deployment, "configmaps")
        .watches("pods")
        .events()
        .leases()
        .declared(Reconciler)
    )
    assert [r.to_dict() for r in perms.rules()] == [
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        },
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
        {
            "apiGroups": ["apps"],
            "resources": ["deployments"],
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        },
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        },
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
        {"apiGroups": [GROUP], "resources": ["backups"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [GROUP], "resources": ["backups/finalizers"], "verbs": ["update"]},
        {"apiGroups": [GROUP], "resources": ["backups/status"], "verbs": ["get", "patch", "update"]},
    ]


def test_cluster_role_and_role() -> None:
    rules = Permissions().watches("pods").rules()
    assert cluster_role("manager-role", rules, labels={"app": "op"}) == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "manager-role", "labels": {"app": "op"}},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
    }
    r = role("manager-role", rules, namespace="ops")
    assert r["kind"] == "Role" and r["metadata"] == {"name": "manager-role", "namespace": "ops"}


def test_bindings() -> None:
    sa = service_account("op", "ops")
    assert cluster_role_binding("manager-rolebinding", "manager-role", [sa]) == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "manager-rolebinding"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "manager-role"},
        "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "ops"}],
    }
    rb = role_binding("leader-election-rolebinding", "leader-election-role", [sa], namespace="ops")
    assert rb["roleRef"]["kind"] == "Role" and rb["metadata"]["namespace"] == "ops"
    assert role_binding("x", "view", [sa], cluster_role=True)["roleRef"]["kind"] == "ClusterRole"


def test_standard_roles() -> None:
    assert leader_election_role(namespace="ops")["rules"] == [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        },
    ]
    assert metrics_reader_role()["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert metrics_reader_role()["metadata"]["name"] == "metrics-reader"
    assert metrics_auth_role()["rules"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    ]


def test_editor_and_viewer_roles() -> None:
    editor = editor_role(Backup, aggregate=True)
    assert editor["metadata"] == {
        "name": "backup-editor-role",
        "labels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"},
    }
    assert editor["rules"] == [
        {
            "apiGroups": [GROUP],
            "resources": ["backups"],
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        },
        {"apiGroups": [GROUP], "resources": ["backups/status"], "verbs": ["get"]},
    ]
    viewer = viewer_role(Backup, name="backup-viewer")
    assert viewer["metadata"] == {"name": "backup-viewer"}
    assert viewer["rules"][0]["verbs"] == ["get", "list", "watch"]
