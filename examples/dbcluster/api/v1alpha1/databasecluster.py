"""DatabaseCluster: the db.example.com/v1alpha1 kind of the DatabaseCluster operator (seed 002).

``replicas`` members run in a StatefulSet (stable names ``<name>-0``, ``<name>-1``, ... and a
volume each); ``config`` is the cluster's configuration, kept in a ConfigMap and rolled through
the members one by one when it changes. ``replicas`` and ``storage`` are checked by the operator
(a bad value is a condition and a Warning Event, not an API error).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from examples.kube import Condition
from kubeop import CamelModel, CustomResource, PrinterColumn, crd_manifest


# --8<-- [start:spec]
class DatabaseClusterSpec(CamelModel):
    """The desired state of a DatabaseCluster."""

    replicas: int = Field(
        default=3, description="Members of the cluster (>= 0), added and removed one at a time."
    )
    image: str = Field(default="kwdb/kwdb:2.2", min_length=1, description="The database image.")
    storage: str = Field(default="1Gi", description="The size of each member's volume (a quantity).")
    config: dict[str, str] = Field(
        default_factory=dict, description="The cluster's configuration (rolled member by member on change)."
    )
    credentials_secret: str | None = Field(
        default=None, description="A Secret with the admin credentials, mounted into every member."
    )


# --8<-- [end:spec]


class Member(CamelModel):
    name: str
    ready: bool = False
    config_hash: str | None = None


# --8<-- [start:status]
class DatabaseClusterStatus(CamelModel):
    """The observed state of a DatabaseCluster."""

    observed_generation: int | None = None
    phase: str | None = Field(
        default=None,
        description="Creating, Running, ScalingUp, ScalingDown, RollingConfig, Degraded, "
        "Decommissioning or Invalid.",
    )
    members: int = Field(default=0, description="Members the StatefulSet runs now.")
    ready_members: int = 0
    updated_members: int = Field(default=0, description="Ready members running the current configuration.")
    config_hash: str | None = None
    member_status: list[Member] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)


# --8<-- [end:status]


# --8<-- [start:kind]
class DatabaseCluster(
    CustomResource,
    group="db.example.com",
    version="v1alpha1",
    kind="DatabaseCluster",
    short_names=["dbc"],
    printer_columns=[
        PrinterColumn("Replicas", ".spec.replicas"),
        PrinterColumn("Ready", ".status.readyMembers"),
        PrinterColumn("Updated", ".status.updatedMembers"),
        PrinterColumn("Phase", ".status.phase"),
        PrinterColumn.age(),
    ],
    subresources=("status",),
):
    """A database cluster: members in a StatefulSet, a configuration, a Service per role."""

    spec: DatabaseClusterSpec = Field(default_factory=DatabaseClusterSpec)
    status: DatabaseClusterStatus | None = None


# --8<-- [end:kind]


CRD: dict[str, Any] = crd_manifest(DatabaseCluster)


def sample(
    name: str = "kwdb", namespace: str = "default", *, replicas: int = 3, config: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": DatabaseCluster.api_version,
        "kind": "DatabaseCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": replicas, "storage": "1Gi", "config": config or {"max_connections": "100"}},
    }
