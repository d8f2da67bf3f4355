"""What the project commands do to a cluster: apply in dependency order, delete in reverse, wait.

All writes are server-side apply with the field manager ``kubeop`` (forced: the project's files
are the truth for the fields they set), through kubeop.client; no kubectl needed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kubeop.cli.output import say
from kubeop.client import Client, UnknownResource, load_config
from kubeop.core.errors import NotFound
from kubeop.core.gvk import GroupVersionKind
from kubeop.core.resource import ApiResource

__all__ = [
    "CRDS",
    "FIELD_MANAGER",
    "apply_all",
    "connect",
    "delete_all",
    "in_apply_order",
    "wait_available",
    "wait_established",
    "wait_for",
]

FIELD_MANAGER = "kubeop"
CRDS = ApiResource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    kind="CustomResourceDefinition",
    namespaced=False,
)
DEPLOYMENTS = ApiResource("apps", "v1", "deployments", kind="Deployment")
_ORDER = (
    "Namespace",
    "CustomResourceDefinition",
    "ServiceAccount",
    "Secret",
    "ConfigMap",
    "ClusterRole",
    "Role",
    "ClusterRoleBinding",
    "RoleBinding",
    "Service",
    "Deployment",
)

Obj = dict[str, Any]


def connect(kubeconfig: Path | None, context: str | None) -> Client:
    """A client for the given kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)."""
    return Client(load_config(kubeconfig=str(kubeconfig) if kubeconfig else None, context=context))


def in_apply_order(objs: Iterable[Mapping[str, Any]]) -> list[Obj]:
    """Namespaces and CRDs first, then identities and RBAC, then workloads; others last, stable."""
    rank = {kind: i for i, kind in enumerate(_ORDER)}
    return sorted((dict(o) for o in objs), key=lambda o: rank.get(str(o.get("kind")), len(_ORDER)))


def _describe(obj: Mapping[str, Any]) -> str:
    md = obj.get("metadata") or {}
    where = f" in {md['namespace']}" if md.get("namespace") else ""
    return f"{obj.get('kind')} {md.get('name')}{where}"


async def wait_for(
    check: Callable[[], Awaitable[bool]], what: str, *, timeout: float, interval: float = 0.2
) -> float:
    """Poll ``check`` until true (returns the seconds it took); TimeoutError naming ``what``."""
    start = time.monotonic()
    while not await check():
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"{what} did not happen within {timeout:.0f} s")
        await asyncio.sleep(interval)
    return time.monotonic() - start


async def wait_established(client: Client, crd: Mapping[str, Any], *, timeout: float) -> float:
    """Wait until a CRD is Established, then until its kind answers a list (the API server may
    still say 429 for a moment after Established; the client retries that)."""
    name = crd["metadata"]["name"]
    spec = crd["spec"]

    async def established() -> bool:
        current = await client.get(CRDS, name)
        conditions = (current.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    took = await wait_for(established, f"CRD {name} to be Established", timeout=timeout)
    version = next(v["name"] for v in spec["versions"] if v.get("storage"))
    served = ApiResource(
        spec["group"],
        version,
        spec["names"]["plural"],
        kind=spec["names"]["kind"],
        namespaced=spec.get("scope") == "Namespaced",
    )
    await client.list(served, all_namespaces=served.namespaced, limit=1)
    return took


async def apply_all(client: Client, objs: Sequence[Mapping[str, Any]], *, timeout: float = 60.0) -> None:
    """Server-side apply every object in order; CRDs are waited for until Established before the
    objects after them (which may be of their kinds) are applied."""
    ordered = in_apply_order(objs)
    crds = [o for o in ordered if o.get("kind") == "CustomResourceDefinition"]
    for i, obj in enumerate(ordered):
        await client.apply(obj, field_manager=FIELD_MANAGER, force=True)
        say(f"applied {_describe(obj)}")
        next_kind = ordered[i + 1].get("kind") if i + 1 < len(ordered) else None
        if obj.get("kind") == "CustomResourceDefinition" and next_kind != "CustomResourceDefinition":
            for crd in crds:
                took = await wait_established(client, crd, timeout=timeout)
                say(f"  {crd['metadata']['name']} is Established ({took:.1f} s)")


async def delete_all(
    client: Client, objs: Sequence[Mapping[str, Any]], *, wait: bool, timeout: float = 120.0
) -> int:
    """Delete the objects in reverse apply order (missing ones are fine); returns how many were deleted."""
    deleted: list[tuple[ApiResource, Obj]] = []
    for obj in reversed(in_apply_order(objs)):
        md = obj.get("metadata") or {}
        try:
            res = await client.resource(GroupVersionKind.of(obj))
            await client.delete(
                res, md["name"], namespace=md.get("namespace"), propagation_policy="Background"
            )
        except (NotFound, UnknownResource):
            continue
        say(f"deleted {_describe(obj)}")
        deleted.append((res, obj))
    if wait:
        for res, obj in deleted:
            md = obj["metadata"]

            async def gone(res: ApiResource = res, md: Mapping[str, Any] = md) -> bool:
                try:
                    await client.get(res, md["name"], namespace=md.get("namespace"))
                except NotFound:
                    return True
                return False

            took = await wait_for(gone, f"{_describe(obj)} to be gone", timeout=timeout)
            if took > 1:
                say(f"  {_describe(obj)} is gone ({took:.1f} s)")
    return len(deleted)


async def wait_available(client: Client, name: str, namespace: str, *, timeout: float) -> float:
    """Wait until a Deployment's rollout is complete and it is Available."""

    async def available() -> bool:
        dep = await client.get(DEPLOYMENTS, name, namespace=namespace)
        status = dep.get("status") or {}
        want = (dep.get("spec") or {}).get("replicas", 1)
        conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
        return bool(
            status.get("observedGeneration", 0) >= dep["metadata"].get("generation", 0)
            and status.get("updatedReplicas", 0) >= want
            and status.get("availableReplicas", 0) >= want
            and conditions.get("Available") == "True"
        )

    return await wait_for(available, f"Deployment {namespace}/{name} to be available", timeout=timeout)
