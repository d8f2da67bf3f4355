"""The Memcached operator of docs/tutorials/memcached-dependents.md: a kind and two dependents."""

from __future__ import annotations

# --8<-- [start:operator]
from typing import Any

from pydantic import Field

from kubeop import CamelModel, Controller, CustomResource, Dependent
from kubeop.kinds import Deployment, Service


class MemcachedSpec(CamelModel):
    size: int = Field(default=1, ge=1, le=5, description="How many memcached Pods to run.")


class Memcached(CustomResource, group="cache.example.com", version="v1", subresources=["status"]):
    spec: MemcachedSpec = Field(default_factory=MemcachedSpec)
    status: dict[str, Any] | None = None  # the workflow writes the conditions


def deployment(memcached: Memcached, ctx: Any) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "memcached", "app.kubernetes.io/instance": memcached.metadata.name}
    container = {"name": "memcached", "image": "memcached:1.6-alpine", "ports": [{"containerPort": 11211}]}
    return {
        "metadata": {"name": memcached.metadata.name, "labels": labels},
        "spec": {
            "replicas": memcached.spec.size,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def available(d: Deployment) -> bool:
    status = d.status
    return status is not None and (status.available_replicas or 0) >= ((d.spec and d.spec.replicas) or 1)


def service(memcached: Memcached, ctx: Any) -> dict[str, Any]:
    spec = {"selector": {"app.kubernetes.io/instance": memcached.metadata.name}, "ports": [{"port": 11211}]}
    return {"metadata": {"name": memcached.metadata.name}, "spec": spec}


controller = Controller.for_(Memcached).dependents(
    Dependent(Deployment, desired=deployment, ready=available),
    Dependent(Service, desired=service, depends_on="deployment"),
)
# --8<-- [end:operator]
