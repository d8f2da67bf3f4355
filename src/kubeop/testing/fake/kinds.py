"""The kinds a fake cluster serves: built-in ones, and custom ones from CRD manifests.

A :class:`Kind` says what the fake's API layer needs beyond a URL: scope, subresources, whether
the kind keeps a ``metadata.generation``, whether strategic merge patches work on it, whether an
update without ``metadata.resourceVersion`` is allowed, and which fields a field selector may
name. The values follow kube-apiserver's registry strategies for the kinds operators touch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeop.core.resource import ApiResource

__all__ = ["BUILTIN_KINDS", "Kind", "ScalePaths", "kind_from_crd"]

_COMMON_FIELDS = frozenset({"metadata.name", "metadata.namespace"})


@dataclass(frozen=True, slots=True)
class ScalePaths:
    """Where a kind keeps what its ``scale`` subresource shows (JSON paths as in a CRD)."""

    spec_replicas: str = ".spec.replicas"
    status_replicas: str = ".status.replicas"
    label_selector: str | None = None


@dataclass(frozen=True, slots=True)
class Kind:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    status: bool = False
    scale: ScalePaths | None = None
    generation: bool = False
    strategic: bool = True
    """Strategic merge patch: built-in kinds yes, custom resources no (415)."""
    unconditional_update: bool = True
    """A PUT without ``metadata.resourceVersion``: allowed for built-ins, 422 for custom resources."""
    fields: frozenset[str] = _COMMON_FIELDS
    custom: bool = False
    categories: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> ApiResource:
        subresources = (("status",) if self.status else ()) + (("scale",) if self.scale else ())
        return ApiResource(
            self.group,
            self.version,
            self.plural,
            kind=self.kind,
            namespaced=self.namespaced,
            singular=self.singular or self.kind.lower(),
            short_names=self.short_names,
            subresources=subresources,
            categories=self.categories,
        )


def _k(
    api_version: str, plural: str, kind: str, *short: str, namespaced: bool = True, **options: Any
) -> Kind:
    group, _, version = api_version.rpartition("/")
    return Kind(group, version, plural, kind, namespaced, kind.lower(), tuple(short), **options)


_REPLICAS = ScalePaths(label_selector=".spec.selector")
_POD_FIELDS = _COMMON_FIELDS | {"spec.nodeName", "spec.serviceAccountName", "status.phase", "status.podIP"}
_EVENT_FIELDS = _COMMON_FIELDS | {
    "involvedObject.kind",
    "involvedObject.name",
    "involvedObject.namespace",
    "involvedObject.uid",
    "reason",
    "type",
    "regarding.kind",
    "regarding.name",
    "regarding.namespace",
    "regarding.uid",
}

BUILTIN_KINDS: tuple[Kind, ...] = (
    _k(
        "v1",
        "namespaces",
        "Namespace",
        "ns",
        namespaced=False,
        status=True,
        fields=_COMMON_FIELDS | {"status.phase"},
    ),
    _k("v1", "configmaps", "ConfigMap", "cm"),
    _k("v1", "secrets", "Secret", fields=_COMMON_FIELDS | {"type"}),
    _k("v1", "services", "Service", "svc", status=True),
    _k("v1", "endpoints", "Endpoints", "ep"),
    _k("v1", "pods", "Pod", "po", status=True, fields=_POD_FIELDS),
    _k("v1", "events", "Event", "ev", fields=_EVENT_FIELDS),
    _k("v1", "serviceaccounts", "ServiceAccount", "sa"),
    _k("v1", "persistentvolumeclaims", "PersistentVolumeClaim", "pvc", status=True),
    _k("v1", "persistentvolumes", "PersistentVolume", "pv", namespaced=False, status=True),
    _k("v1", "nodes", "Node", "no", namespaced=False, status=True),
    _k(
        "admissionregistration.k8s.io/v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        namespaced=False,
    ),
    _k(
        "admissionregistration.k8s.io/v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        namespaced=False,
    ),
    _k("apiregistration.k8s.io/v1", "apiservices", "APIService", namespaced=False, status=True),
    _k("apps/v1", "deployments", "Deployment", "deploy", status=True, scale=_REPLICAS, generation=True),
    _k("apps/v1", "statefulsets", "StatefulSet", "sts", status=True, scale=_REPLICAS, generation=True),
    _k("apps/v1", "replicasets", "ReplicaSet", "rs", status=True, scale=_REPLICAS, generation=True),
    _k("apps/v1", "daemonsets", "DaemonSet", "ds", status=True, generation=True),
    _k("batch/v1", "jobs", "Job", status=True, generation=True),
    _k("batch/v1", "cronjobs", "CronJob", "cj", status=True, generation=True),
    _k("coordination.k8s.io/v1", "leases", "Lease"),
    _k("events.k8s.io/v1", "events", "Event", "ev", fields=_EVENT_FIELDS),
    _k("networking.k8s.io/v1", "ingresses", "Ingress", "ing", status=True, generation=True),
    _k("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", "pdb", status=True, generation=True),
    _k("rbac.authorization.k8s.io/v1", "roles", "Role"),
    _k("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding"),
    _k("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", namespaced=False),
    _k("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
    _k(
        "apiextensions.k8s.io/v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        "crd",
        "crds",
        namespaced=False,
        status=True,
        generation=True,
    ),
)


def kind_from_crd(crd: Mapping[str, Any]) -> list[Kind]:
    """The kinds (one per served version) a CustomResourceDefinition manifest declares.

    Raises ``ValueError`` naming the field when the manifest lacks what the fake needs.
    """
    spec = crd.get("spec")
    if not isinstance(spec, Mapping):
        raise ValueError(
            "CustomResourceDefinition: spec is missing (a CRD manifest has spec.group, spec.names...)"
        )
    names = spec.get("names") or {}
    group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
    for what, value in (("spec.group", group), ("spec.names.plural", plural), ("spec.names.kind", kind)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"CustomResourceDefinition: {what} must be a non-empty string, got {value!r}")
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    kinds = []
    for version in spec.get("versions") or ():
        if not version.get("served", True):
            continue
        subs = version.get("subresources") or {}
        scale = subs.get("scale")
        selectable = {
            str(f.get("jsonPath", "")).lstrip(".")
            for f in version.get("selectableFields") or ()
            if f.get("jsonPath")
        }
        kinds.append(
            Kind(
                group=str(group),
                version=str(version["name"]),
                plural=str(plural),
                kind=str(kind),
                namespaced=namespaced,
                singular=str(names.get("singular") or str(kind).lower()),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status="status" in subs,
                scale=ScalePaths(
                    scale.get("specReplicasPath", ".spec.replicas"),
                    scale.get("statusReplicasPath", ".status.replicas"),
                    scale.get("labelSelectorPath"),
                )
                if isinstance(scale, Mapping)
                else None,
                generation=True,
                strategic=False,
                unconditional_update=False,
                fields=_COMMON_FIELDS | frozenset(selectable),
                custom=True,
            )
        )
    if not kinds:
        raise ValueError(f"CustomResourceDefinition {plural}.{group}: spec.versions has no served version")
    return kinds


@dataclass(slots=True)
class KindTable:
    """Kinds by (group, version, plural) and the order groups and versions are listed in."""

    by_path: dict[tuple[str, str, str], Kind] = field(default_factory=dict)

    def add(self, kind: Kind) -> None:
        self.by_path[(kind.group, kind.version, kind.plural)] = kind

    def remove_group_resource(self, group: str, plural: str) -> None:
        for key in [k for k in self.by_path if k[0] == group and k[2] == plural]:
            del self.by_path[key]

    def get(self, group: str, version: str, plural: str) -> Kind | None:
        return self.by_path.get((group, version, plural))

    def for_kind(self, api_version: str, kind: str) -> Kind | None:
        for k in self.by_path.values():
            if k.api_version == api_version and k.kind == kind:
                return k
        return None

    def __iter__(self) -> Any:
        return iter(self.by_path.values())
