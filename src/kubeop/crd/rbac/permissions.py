"""Permissions: the RBAC rules an operator needs, derived from what it does.

::

    perms = (
        Permissions()
        .watches(CronTab)              # get, list, watch
        .status(CronTab)               # crontabs/status: get, update, patch
        .finalizers(CronTab)           # crontabs/finalizers: update
        .owns("deployments.apps")      # watches + writes
        .events()                      # create, patch events (core and events.k8s.io)
        .declared(controllers_module)  # whatever @rbac_rule declared there
    )
    cluster_role("manager-role", perms.rules())

Kinds are named by a CustomResource class (or any model class with ``resource`` or
apiVersion/kind), an :class:`~kubeop.core.resource.ApiResource`, or a string ``plural[.group]``
as kubectl prints it (``configmaps``, ``deployments.apps``, ``crontabs.stable.example.com``).
"""

from __future__ import annotations

from typing import Any, Self

from kubeop.core.model import model_gvk, model_resource
from kubeop.core.resource import ApiResource
from kubeop.crd.errors import DeclarationError
from kubeop.crd.names import guess_plural
from kubeop.crd.rbac.rules import PolicyRule, declared_rules, normalize_rules

__all__ = [
    "EVENT_VERBS",
    "LEASE_VERBS",
    "READ_VERBS",
    "STATUS_VERBS",
    "WRITE_VERBS",
    "Permissions",
    "group_resource",
]

KindLike = type | ApiResource | str

READ_VERBS = ("get", "list", "watch")
WRITE_VERBS = ("create", "update", "patch", "delete")
STATUS_VERBS = ("get", "update", "patch")
EVENT_VERBS = ("create", "patch")
LEASE_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")


def group_resource(kind: KindLike) -> tuple[str, str]:
    """The (API group, plural resource) a kind is authorized by."""
    if isinstance(kind, ApiResource):
        return kind.group, kind.plural
    if isinstance(kind, str):
        plural, _, group = kind.partition(".")
        if not plural or plural != plural.lower() or "/" in kind:
            raise DeclarationError(
                f"cannot name a resource with {kind!r}: use 'plural' or 'plural.group' "
                "(for example 'configmaps' or 'deployments.apps')"
            )
        return group, plural
    if isinstance(kind, type):
        resource = model_resource(kind)
        if resource is not None:
            return resource.group, resource.plural
        try:
            gvk = model_gvk(kind)
        except TypeError as e:
            raise DeclarationError(str(e)) from None
        return gvk.group, guess_plural(gvk.kind)
    raise DeclarationError(f"cannot name a resource with {kind!r}")


class Permissions:
    """A growing set of rules; each method adds rules and returns the same object."""

    def __init__(self, *rules: PolicyRule) -> None:
        self._rules: list[PolicyRule] = list(rules)

    def add(self, *rules: PolicyRule) -> Self:
        """Add rules; returns the Permissions, for chaining."""
        self._rules.extend(rules)
        return self

    def _on(self, kinds: tuple[KindLike, ...], verbs: tuple[str, ...], sub: str = "") -> Self:
        for kind in kinds:
            group, plural = group_resource(kind)
            self._rules.append(PolicyRule((group,), (f"{plural}/{sub}" if sub else plural,), verbs))
        return self

    def watches(self, *kinds: KindLike) -> Self:
        """Read and watch: what an informer (cache) needs (get, list, watch)."""
        return self._on(kinds, READ_VERBS)

    def writes(self, *kinds: KindLike) -> Self:
        """Create, update, patch and delete (server-side apply is a patch)."""
        return self._on(kinds, WRITE_VERBS)

    def owns(self, *kinds: KindLike) -> Self:
        """``watches(kind)`` + ``writes(kind)``: the kinds a controller creates and keeps in shape."""
        return self.watches(*kinds).writes(*kinds)

    def status(self, *kinds: KindLike) -> Self:
        """The status subresource: get, update, patch on ``<plural>/status``."""
        return self._on(kinds, STATUS_VERBS, "status")

    def finalizers(self, *kinds: KindLike) -> Self:
        """Update on ``<plural>/finalizers``.

        Needed to set ``blockOwnerDeletion`` in owner references to objects of these kinds
        when the OwnerReferencesPermissionEnforcement admission plugin is on (OpenShift, many
        hardened clusters), which is why kubebuilder grants it for every reconciled kind.
        """
        return self._on(kinds, ("update",), "finalizers")

    def events(self) -> Self:
        """Recording events: create and patch in the core and ``events.k8s.io`` groups."""
        self._rules.append(PolicyRule(("", "events.k8s.io"), ("events",), EVENT_VERBS))
        return self

    def leases(self) -> Self:
        """Leader election through ``coordination.k8s.io`` Leases (see also leader_election_role)."""
        self._rules.append(PolicyRule(("coordination.k8s.io",), ("leases",), LEASE_VERBS))
        return self

    def declared(self, *sources: Any) -> Self:
        """Add the rules declared with ``@rbac_rule`` on these functions, classes or modules."""
        self._rules.extend(declared_rules(*sources))
        return self

    def rules(self) -> list[PolicyRule]:
        """The accumulated rules, merged and sorted (see :func:`normalize_rules`)."""
        return normalize_rules(self._rules)
