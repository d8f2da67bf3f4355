"""What the examples share: typed views of the built-in kinds they read, the status Condition
model, and Kubernetes quantities.

kubeop ships no models for built-in kinds, so the examples declare the few fields they read
(pydantic models with ``api_version``/``kind``/``resource`` class attributes are typed models
for every client verb). Sub-models ignore fields they do not declare; metadata keeps them all.
Objects the operators *write* are built as plain dicts (the manifests read best that way).
"""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, ClassVar, Literal

from pydantic import Field

from kubeop import ApiResource, CamelModel, ObjectMeta, Request, set_condition

PODS = ApiResource("", "v1", "pods", kind="Pod")
SECRETS = ApiResource("", "v1", "secrets", kind="Secret")
SERVICES = ApiResource("", "v1", "services", kind="Service")
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
PVCS = ApiResource("", "v1", "persistentvolumeclaims", kind="PersistentVolumeClaim")
PVS = ApiResource("", "v1", "persistentvolumes", namespaced=False, kind="PersistentVolume")
STATEFULSETS = ApiResource("apps", "v1", "statefulsets", kind="StatefulSet")
JOBS = ApiResource("batch", "v1", "jobs", kind="Job")
STORAGECLASSES = ApiResource("storage.k8s.io", "v1", "storageclasses", namespaced=False, kind="StorageClass")


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def rfc3339(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


# -- conditions -------------------------------------------------------------------------------------
class Condition(CamelModel):
    """metav1.Condition."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str = ""
    last_transition_time: str
    observed_generation: int | None = None


def set_conditions(
    conditions: list[Condition],
    type_: str,
    status: bool,
    reason: str,
    message: str,
    generation: int | None,
) -> list[Condition]:
    """A new list with one condition set (lastTransitionTime moves only when the status does)."""
    raw = [c.model_dump(by_alias=True, exclude_none=True) for c in conditions]
    set_condition(raw, type_, status, reason, message, observed_generation=generation)
    return [Condition.model_validate(c) for c in raw]


def condition(conditions: list[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)


# -- quantities -------------------------------------------------------------------------------------
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([a-zA-Z]*|[eE][+-]?[0-9]+)$")
_SUFFIX: dict[str, Decimal | int] = {
    "": 1,
    "m": Decimal("0.001"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}


def parse_quantity(value: str) -> Decimal:
    """A Kubernetes quantity ("1Gi", "500M", "1e9") as a number; ValueError when it does not parse."""
    m = _QUANTITY.match(value.strip())
    if not m:
        raise ValueError(f"{value!r} is not a quantity (for example 1Gi, 500Mi, 10G)")
    number, suffix = m.groups()
    try:
        base = Decimal(number)
    except InvalidOperation:
        raise ValueError(f"{value!r} is not a quantity (for example 1Gi, 500Mi, 10G)") from None
    if suffix[:1] in ("e", "E") and suffix[1:].lstrip("+-").isdigit():
        return base * Decimal(10) ** int(suffix[1:])
    if suffix not in _SUFFIX:
        raise ValueError(f"{value!r} has an unknown unit {suffix!r} (use Ki, Mi, Gi, Ti, k, M, G, T)")
    return base * _SUFFIX[suffix]


# -- typed views of built-in kinds --------------------------------------------------------------------
class _Kind(CamelModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)


class PodCondition(CamelModel):
    type: str
    status: str


class PodSpec(CamelModel):
    node_name: str | None = None


class PodStatus(CamelModel):
    phase: str | None = None
    conditions: list[PodCondition] = Field(default_factory=list)


class Pod(_Kind):
    api_version: ClassVar[str] = "v1"
    kind: ClassVar[str] = "Pod"
    resource: ClassVar[ApiResource] = PODS

    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    @property
    def running(self) -> bool:
        """Running and not on its way out."""
        return self.status.phase == "Running" and self.metadata.deletion_timestamp is None

    @property
    def ready(self) -> bool:
        return self.running and any(c.type == "Ready" and c.status == "True" for c in self.status.conditions)

    @property
    def revision(self) -> str | None:
        return (self.metadata.labels or {}).get("controller-revision-hash")


class StatefulSetSpec(CamelModel):
    replicas: int | None = None


class StatefulSetStatus(CamelModel):
    observed_generation: int | None = None
    replicas: int = 0
    ready_replicas: int = 0
    current_replicas: int = 0
    updated_replicas: int = 0
    current_revision: str | None = None
    update_revision: str | None = None


class StatefulSet(_Kind):
    api_version: ClassVar[str] = "apps/v1"
    kind: ClassVar[str] = "StatefulSet"
    resource: ClassVar[ApiResource] = STATEFULSETS

    spec: StatefulSetSpec = Field(default_factory=StatefulSetSpec)
    status: StatefulSetStatus = Field(default_factory=StatefulSetStatus)


class JobCondition(CamelModel):
    type: str
    status: str


class JobSpec(CamelModel):
    parallelism: int | None = None
    completions: int | None = None
    suspend: bool | None = None


class JobStatus(CamelModel):
    start_time: str | None = None
    completion_time: str | None = None
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    conditions: list[JobCondition] = Field(default_factory=list)


class Job(_Kind):
    api_version: ClassVar[str] = "batch/v1"
    kind: ClassVar[str] = "Job"
    resource: ClassVar[ApiResource] = JOBS

    spec: JobSpec = Field(default_factory=JobSpec)
    status: JobStatus = Field(default_factory=JobStatus)

    def _condition(self, type_: str) -> bool:
        return any(c.type == type_ and c.status == "True" for c in self.status.conditions)

    @property
    def succeeded(self) -> bool:
        """Finished with success (condition Complete)."""
        return self._condition("Complete")

    @property
    def failed(self) -> bool:
        """Finished with a failure (condition Failed)."""
        return self._condition("Failed")

    @property
    def finished(self) -> bool:
        return self.succeeded or self.failed


class Secret(_Kind):
    api_version: ClassVar[str] = "v1"
    kind: ClassVar[str] = "Secret"
    resource: ClassVar[ApiResource] = SECRETS

    data: dict[str, str] = Field(default_factory=dict)


class ResourceRequests(CamelModel):
    requests: dict[str, str] = Field(default_factory=dict)


class PVCSpec(CamelModel):
    access_modes: list[str] = Field(default_factory=list)
    resources: ResourceRequests = Field(default_factory=ResourceRequests)
    storage_class_name: str | None = None
    volume_name: str | None = None
    volume_mode: str | None = None


class PVCStatus(CamelModel):
    phase: str | None = None


class PersistentVolumeClaim(_Kind):
    api_version: ClassVar[str] = "v1"
    kind: ClassVar[str] = "PersistentVolumeClaim"
    resource: ClassVar[ApiResource] = PVCS

    spec: PVCSpec = Field(default_factory=PVCSpec)
    status: PVCStatus = Field(default_factory=PVCStatus)


class HostPath(CamelModel):
    path: str


class PVSpec(CamelModel):
    host_path: HostPath | None = None
    persistent_volume_reclaim_policy: str | None = None
    storage_class_name: str | None = None


class PVStatus(CamelModel):
    phase: str | None = None


class PersistentVolume(_Kind):
    api_version: ClassVar[str] = "v1"
    kind: ClassVar[str] = "PersistentVolume"
    resource: ClassVar[ApiResource] = PVS

    spec: PVSpec = Field(default_factory=PVSpec)
    status: PVStatus = Field(default_factory=PVStatus)


class StorageClass(_Kind):
    api_version: ClassVar[str] = "storage.k8s.io/v1"
    kind: ClassVar[str] = "StorageClass"
    resource: ClassVar[ApiResource] = STORAGECLASSES

    provisioner: str
    parameters: dict[str, str] = Field(default_factory=dict)
    reclaim_policy: str | None = None


# -- what the examples ask of built-in objects (kubeop.kinds models) -------------------------------
def _true(conditions: Any, type_: str) -> bool:
    return any(c.type == type_ and c.status == "True" for c in conditions or ())


def pod_running(pod: Any) -> bool:
    """Running and not on its way out."""
    phase = pod.status.phase if pod.status is not None else None
    return phase == "Running" and pod.metadata.deletion_timestamp is None


def pod_ready(pod: Any) -> bool:
    return pod_running(pod) and _true(pod.status.conditions, "Ready")


def pod_revision(pod: Any) -> str | None:
    """The StatefulSet revision a pod runs (its ``controller-revision-hash`` label)."""
    return (pod.metadata.labels or {}).get("controller-revision-hash")  # type: ignore[no-any-return]


def job_succeeded(job: Any) -> bool:
    """Finished with success (condition Complete)."""
    return job.status is not None and _true(job.status.conditions, "Complete")


def job_failed(job: Any) -> bool:
    """Finished with a failure (condition Failed)."""
    return job.status is not None and _true(job.status.conditions, "Failed")


def job_finished(job: Any) -> bool:
    return job_succeeded(job) or job_failed(job)


def owner_labels(app: str, instance: str, manager: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": app,
        "app.kubernetes.io/instance": instance,
        "app.kubernetes.io/managed-by": manager,
    }


def instance_owner(manager: str) -> Callable[[Mapping[str, Any]], list[Request]]:
    """A watch's map function: an object labelled by :func:`owner_labels` with ``manager`` wakes
    the instance it names (pods of a StatefulSet carry its labels, not an owner reference to the
    custom resource)."""

    def owner(obj: Mapping[str, Any]) -> list[Request]:
        md = obj.get("metadata") or {}
        labels = md.get("labels") or {}
        if (
            labels.get("app.kubernetes.io/managed-by") != manager
            or "app.kubernetes.io/instance" not in labels
        ):
            return []
        return [Request(md.get("namespace") or "", labels["app.kubernetes.io/instance"])]

    return owner


class References:
    """Which objects of a kind reference which others by name in their namespace (a Secret by
    ``spec.credentialsSecret``, say), so a watch on the referenced kind wakes the referrers.

    ``note(namespace, referrer, name)`` records what a reconcile read (``name=None``: nothing);
    :meth:`referrers` is the watch's map function.
    """

    def __init__(self) -> None:
        self._by_target: dict[tuple[str, str], set[str]] = defaultdict(set)

    def note(self, namespace: str, referrer: str, name: str | None) -> None:
        for users in self._by_target.values():
            users.discard(referrer)
        if name:
            self._by_target[(namespace, name)].add(referrer)

    def referrers(self, obj: Mapping[str, Any]) -> list[Request]:
        md = obj.get("metadata") or {}
        ns = md.get("namespace") or ""
        return [Request(ns, name) for name in self._by_target.get((ns, md.get("name") or ""), ())]


def status_dict(model: Any) -> dict[str, Any]:
    """A status model as the JSON a merge patch carries (None fields left out)."""
    out: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out
