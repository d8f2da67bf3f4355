"""RBAC declared in code: rules next to the controllers, Roles and ClusterRoles from them.

- :class:`PolicyRule` / :func:`rbac_rule`: one rule, usable as a decorator on the code that
  needs it; :func:`declared_rules` collects them; :func:`normalize_rules` merges them.
- :class:`Permissions`: rules derived from what an operator does (watches, writes, status,
  finalizers, events, leases).
- :func:`cluster_role`, :func:`role`, bindings, and kubebuilder's standard roles
  (:func:`leader_election_role`, :func:`metrics_reader_role`, :func:`metrics_auth_role`,
  :func:`editor_role`, :func:`viewer_role`).
"""

from kubeop.crd.rbac.permissions import (
    EVENT_VERBS,
    LEASE_VERBS,
    READ_VERBS,
    STATUS_VERBS,
    WRITE_VERBS,
    Permissions,
    group_resource,
)
from kubeop.crd.rbac.roles import (
    cluster_role,
    cluster_role_binding,
    editor_role,
    leader_election_role,
    metrics_auth_role,
    metrics_reader_role,
    role,
    role_binding,
    service_account,
    viewer_role,
)
from kubeop.crd.rbac.rules import PolicyRule, declared_rules, normalize_rules, rbac_rule

__all__ = [
    "EVENT_VERBS",
    "LEASE_VERBS",
    "READ_VERBS",
    "STATUS_VERBS",
    "WRITE_VERBS",
    "Permissions",
    "PolicyRule",
    "cluster_role",
    "cluster_role_binding",
    "declared_rules",
    "editor_role",
    "group_resource",
    "leader_election_role",
    "metrics_auth_role",
    "metrics_reader_role",
    "normalize_rules",
    "rbac_rule",
    "role",
    "role_binding",
    "service_account",
    "viewer_role",
]
