"""Role, ClusterRole and binding manifests, including kubebuilder's standard ones.

The operator's own permissions go in a ClusterRole (:func:`cluster_role`) or, for an operator
that watches one namespace, a Role (:func:`role`). Like kubebuilder's ``config/rbac`` we also
generate:

- :func:`leader_election_role`: a namespaced Role for Leases (and events about them), kept out
  of the manager's ClusterRole so leader election needs no cluster-wide write access;
- :func:`metrics_reader_role`: lets a scraper ``GET /metrics``;
- :func:`metrics_auth_role`: lets the manager check scrapers' tokens (TokenReview,
  SubjectAccessReview) when its metrics endpoint is protected by authentication;
- :func:`editor_role` / :func:`viewer_role`: for the people who use a custom resource.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubeop.crd.rbac.permissions import LEASE_VERBS, READ_VERBS, WRITE_VERBS, KindLike, group_resource
from kubeop.crd.rbac.rules import PolicyRule, normalize_rules

__all__ = [
    "cluster_role",
    "cluster_role_binding",
    "editor_role",
    "leader_election_role",
    "metrics_auth_role",
    "metrics_reader_role",
    "role",
    "role_binding",
    "service_account",
    "viewer_role",
]

Obj = dict[str, Any]
RBAC_API = "rbac.authorization.k8s.io/v1"


def _meta(name: str, namespace: str | None, labels: Mapping[str, str] | None) -> Obj:
    meta: Obj = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = dict(labels)
    return meta


def _rules(rules: Iterable[PolicyRule]) -> list[Obj]:
    return [r.to_dict() for r in normalize_rules(rules)]


def cluster_role(name: str, rules: Iterable[PolicyRule], *, labels: Mapping[str, str] | None = None) -> Obj:
    """A ClusterRole granting ``rules`` (merged and sorted)."""
    return {
        "apiVersion": RBAC_API,
        "kind": "ClusterRole",
        "metadata": _meta(name, None, labels),
        "rules": _rules(rules),
    }


def role(
    name: str,
    rules: Iterable[PolicyRule],
    *,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Obj:
    """A namespaced Role granting ``rules``; without ``namespace`` it lands where it is applied."""
    return {
        "apiVersion": RBAC_API,
        "kind": "Role",
        "metadata": _meta(name, namespace, labels),
        "rules": _rules(rules),
    }


def service_account(name: str, namespace: str) -> Obj:
    """The subject entry for a ServiceAccount, for the bindings below."""
    return {"kind": "ServiceAccount", "name": name, "namespace": namespace}


def cluster_role_binding(
    name: str,
    cluster_role_name: str,
    subjects: Iterable[Mapping[str, str]],
    *,
    labels: Mapping[str, str] | None = None,
) -> Obj:
    """Bind a ClusterRole to subjects everywhere."""
    return {
        "apiVersion": RBAC_API,
        "kind": "ClusterRoleBinding",
        "metadata": _meta(name, None, labels),
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": cluster_role_name,
        },
        "subjects": [dict(s) for s in subjects],
    }


def role_binding(
    name: str,
    role_name: str,
    subjects: Iterable[Mapping[str, str]],
    *,
    namespace: str | None = None,
    cluster_role: bool = False,
    labels: Mapping[str, str] | None = None,
) -> Obj:
    """Bind a Role (or, with ``cluster_role=True``, a ClusterRole) to subjects in one namespace."""
    return {
        "apiVersion": RBAC_API,
        "kind": "RoleBinding",
        "metadata": _meta(name, namespace, labels),
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole" if cluster_role else "Role",
            "name": role_name,
        },
        "subjects": [dict(s) for s in subjects],
    }


def leader_election_role(
    name: str = "leader-election-role",
    *,
    namespace: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Obj:
    """The Role leader election needs in the manager's namespace: Leases, and events about them.

    Unlike kubebuilder's we grant no ConfigMaps: kubeop elects leaders with Leases only.
    """
    rules = [
        PolicyRule(("coordination.k8s.io",), ("leases",), LEASE_VERBS),
        PolicyRule(("",), ("events",), ("create", "patch")),
    ]
    return role(name, rules, namespace=namespace, labels=labels)


def metrics_reader_role(name: str = "metrics-reader", *, labels: Mapping[str, str] | None = None) -> Obj:
    """A ClusterRole allowing ``GET /metrics`` (bind it to the Prometheus service account)."""
    return cluster_role(name, [PolicyRule(verbs=("get",), non_resource_urls=("/metrics",))], labels=labels)


def metrics_auth_role(name: str = "metrics-auth-role", *, labels: Mapping[str, str] | None = None) -> Obj:
    """A ClusterRole letting the manager authenticate and authorize metrics scrapers."""
    rules = [
        PolicyRule(("authentication.k8s.io",), ("tokenreviews",), ("create",)),
        PolicyRule(("authorization.k8s.io",), ("subjectaccessreviews",), ("create",)),
    ]
    return cluster_role(name, rules, labels=labels)


def _kind_role(
    kind: KindLike, suffix: str, verbs: tuple[str, ...], name: str | None, aggregate: str | None
) -> Obj:
    group, plural = group_resource(kind)
    singular = plural[:-1] if plural.endswith("s") else plural
    role_name = name or f"{singular}-{suffix}-role"
    labels = {f"rbac.authorization.k8s.io/aggregate-to-{aggregate}": "true"} if aggregate else None
    rules = [PolicyRule((group,), (plural,), verbs), PolicyRule((group,), (f"{plural}/status",), ("get",))]
    return cluster_role(role_name, rules, labels=labels)


def editor_role(kind: KindLike, *, name: str | None = None, aggregate: bool = False) -> Obj:
    """A ClusterRole for people who manage objects of ``kind`` (all verbs, status read-only).

    ``aggregate=True`` adds the label that folds it into the built-in ``edit`` role.
    """
    return _kind_role(kind, "editor", (*READ_VERBS, *WRITE_VERBS), name, "edit" if aggregate else None)


def viewer_role(kind: KindLike, *, name: str | None = None, aggregate: bool = False) -> Obj:
    """A ClusterRole for people who only read objects of ``kind``.

    ``aggregate=True`` adds the label that folds it into the built-in ``view`` role.
    """
    return _kind_role(kind, "viewer", READ_VERBS, name, "view" if aggregate else None)
