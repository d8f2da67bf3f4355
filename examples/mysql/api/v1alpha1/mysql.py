"""MySQL: the db.example.com/v1alpha1 kind of the MySQL operator (seed 000).

The spec says what a user wants; the status what the operator observed, and what it has told
the people in ``spec.notify`` about: ``pods`` (the pods whose start was noticed) and ``outbox``
(starts and stops noticed but not yet mailed) live on the cluster, so a restarted operator or a
new leader neither mails twice nor forgets a mail it owes.

``replicas`` and ``storage`` are checked by the operator, not the schema, so a bad value is
reported as a condition and a Warning Event on the object (what issue 14 asks to demonstrate).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from examples.kube import Condition
from kubeop import CamelModel, CustomResource, PrinterColumn, crd_manifest


class SecretKeyRef(CamelModel):
    """A key of a Secret in the MySQL's namespace."""

    name: str = Field(min_length=1)
    key: str = Field(default="password", min_length=1)


class MySQLSpec(CamelModel):
    """The desired state of a MySQL."""

    version: str = Field(default="8.4", min_length=1, description="The mysql image tag.")
    replicas: int = Field(default=1, description="Pods of the StatefulSet (>= 0).")
    storage: str = Field(default="1Gi", description="The size of each pod's volume (a quantity).")
    root_password_secret: SecretKeyRef | None = Field(
        default=None,
        description="Where the root password is; left out, the operator generates <name>-root-password.",
    )
    notify: list[str] = Field(
        default_factory=list, description="E-mail addresses told about every pod start and stop."
    )


class TrackedPod(CamelModel):
    """A pod whose start has been noticed (and queued for mail)."""

    name: str
    uid: str
    node: str | None = None
    since: str


class Notification(CamelModel):
    """A pod start or stop that is still to be mailed."""

    id: str = Field(description="<pod uid>/<event>: one mail per pod and transition.")
    event: Literal["Started", "Stopped"]
    pod: str
    node: str | None = None
    time: str
    attempts: int = 0
    next_attempt: str | None = None
    last_error: str | None = None


class MySQLStatus(CamelModel):
    """The observed state of a MySQL."""

    observed_generation: int | None = None
    phase: str | None = None
    ready_replicas: int = 0
    root_password_secret: str | None = None
    conditions: list[Condition] = Field(default_factory=list)
    pods: list[TrackedPod] = Field(default_factory=list)
    outbox: list[Notification] = Field(default_factory=list)
    mails_sent: int = 0


class MySQL(
    CustomResource,
    group="db.example.com",
    version="v1alpha1",
    kind="MySQL",
    plural="mysqls",
    singular="mysql",
    printer_columns=[
        PrinterColumn("Replicas", ".spec.replicas"),
        PrinterColumn("Ready", ".status.readyReplicas"),
        PrinterColumn("Phase", ".status.phase"),
        PrinterColumn("Mails", ".status.mailsSent"),
        PrinterColumn.age(),
    ],
    subresources=("status",),
):
    """A MySQL server: a StatefulSet with a volume per pod, two Services and a root password."""

    spec: MySQLSpec = Field(default_factory=MySQLSpec)
    status: MySQLStatus | None = None


CRD: dict[str, Any] = crd_manifest(MySQL)


def sample(
    name: str = "db", namespace: str = "default", *, replicas: int = 1, notify: list[str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": MySQL.api_version,
        "kind": "MySQL",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"version": "8.4", "replicas": replicas, "storage": "1Gi", "notify": notify or []},
    }
