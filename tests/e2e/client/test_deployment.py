"""apps/v1 Deployments: strategic merge on containers, the scale subresource, delete propagation."""

from __future__ import annotations

from typing import Any

import pytest

from kubeop.client import Client
from kubeop.core import ApiResource, Conflict, PatchType, meta

pytestmark = pytest.mark.controlplane

DEPLOY = ApiResource("apps", "v1", "deployments", kind="Deployment")
RS = ApiResource("apps", "v1", "replicasets", kind="ReplicaSet")


def deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [{"name": "main", "image": "busybox"}, {"name": "side", "image": "busybox"}]
                },
            },
        },
    }


async def test_strategic_merge_and_scale(client: Client) -> None:
    await client.create(deployment("web"))
    # Strategic merge knows containers are keyed by name: one container changes, the other stays.
    patched = await client.patch(
        DEPLOY,
        "web",
        {"spec": {"template": {"spec": {"containers": [{"name": "side", "image": "alpine"}]}}}},
        type=PatchType.STRATEGIC,
    )
    images = {c["name"]: c["image"] for c in patched["spec"]["template"]["spec"]["containers"]}
    assert images == {"main": "busybox", "side": "alpine"}

    scale = await client.get_scale("deployments.apps", "web")
    assert (scale["apiVersion"], scale["kind"], scale["spec"]["replicas"]) == ("autoscaling/v1", "Scale", 1)
    await client.scale(DEPLOY, "web", 4)
    assert (await client.get(DEPLOY, "web"))["spec"]["replicas"] == 4
    while True:  # with a controller manager running, status writes race with ours: retry on 409
        scale = await client.get_scale(DEPLOY, "web")
        scale["spec"]["replicas"] = 2
        try:
            await client.update(scale, subresource="scale", resource=DEPLOY)
        except Conflict:
            continue
        break
    assert (await client.get(DEPLOY, "web"))["spec"]["replicas"] == 2


@pytest.mark.full
async def test_delete_propagation(client: Client, eventually: Any) -> None:
    for name in ("orphaned", "cascaded"):
        await client.create(deployment(name, replicas=0))

    async def replicaset_of(name: str) -> dict[str, Any] | None:
        items = (await client.list(RS, label_selector={"app": name})).items
        return items[0] if items else None

    for name in ("orphaned", "cascaded"):
        await eventually(lambda n=name: replicaset_of(n), what=f"the ReplicaSet of {name}")

    await client.delete(DEPLOY, "orphaned", propagation_policy="Orphan")
    await client.delete(DEPLOY, "cascaded", propagation_policy="Foreground")

    async def cascaded_gone() -> bool:
        return (
            await replicaset_of("cascaded") is None and await client.get_or_none(DEPLOY, "cascaded") is None
        )

    await eventually(
        cascaded_gone, within=60, what="foreground deletion of the Deployment and its ReplicaSet"
    )

    async def orphan_released() -> bool:
        rs = await replicaset_of("orphaned")
        return rs is not None and meta.controller_of(rs) is None

    await eventually(orphan_released, what="the orphaned ReplicaSet to lose its owner reference")
