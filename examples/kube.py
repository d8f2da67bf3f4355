"""What the examples share: the built-in kinds they use (:mod:`kubeop.kinds` models) and what
they ask of them (``pod_ready``, ``job_finished``...), the status Condition model, label and
reference bookkeeping for watches, and Kubernetes quantities.

The built-in kinds are kubeop.kinds' generated models: read with ``ctx.client.get(Pod, ...)``,
built with attributes (``StatefulSet(metadata=ObjectMeta(...), spec=StatefulSetSpec(...))``) and
written as they are. ``PODS``, ``JOBS``... are their resource handles, for the tests' dict reads.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from kubeop import CamelModel, Request, set_condition
from kubeop.kinds import (
    ConfigMap,
    Job,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    Secret,
    Service,
    StatefulSet,
    StorageClass,
)

__all__ = [
    "CONFIGMAPS",
    "JOBS",
    "PODS",
    "PVCS",
    "PVS",
    "SECRETS",
    "SERVICES",
    "STATEFULSETS",
    "STORAGECLASSES",
    "Condition",
    "Job",
    "Pod",
    "References",
    "condition",
    "instance_owner",
    "job_failed",
    "job_finished",
    "job_succeeded",
    "now",
    "owner_labels",
    "parse_quantity",
    "parse_time",
    "pod_ready",
    "pod_running",
    "rfc3339",
    "set_conditions",
    "status_dict",
]

PODS = Pod.resource
SECRETS = Secret.resource
SERVICES = Service.resource
CONFIGMAPS = ConfigMap.resource
PVCS = PersistentVolumeClaim.resource
PVS = PersistentVolume.resource
STATEFULSETS = StatefulSet.resource
JOBS = Job.resource
STORAGECLASSES = StorageClass.resource


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


# -- what the examples ask of built-in objects (kubeop.kinds models) -------------------------------
def _true(conditions: Any, type_: str) -> bool:
    return any(c.type == type_ and c.status == "True" for c in conditions or ())


def pod_running(pod: Pod) -> bool:
    """Running and not on its way out."""
    phase = pod.status.phase if pod.status is not None else None
    return phase == "Running" and pod.metadata.deletion_timestamp is None


def pod_ready(pod: Pod) -> bool:
    return pod_running(pod) and pod.status is not None and _true(pod.status.conditions, "Ready")


def job_succeeded(job: Job) -> bool:
    """Finished with success (condition Complete)."""
    return job.status is not None and _true(job.status.conditions, "Complete")


def job_failed(job: Job) -> bool:
    """Finished with a failure (condition Failed)."""
    return job.status is not None and _true(job.status.conditions, "Failed")


def job_finished(job: Job) -> bool:
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
