"""Every verb on core, apps, cluster-scoped and custom kinds against the real API server."""

from __future__ import annotations

from typing import Any, ClassVar

import pydantic
import pytest

from kubeop.client import Client, SyncClient, load_kubeconfig
from kubeop.core import (
    AlreadyExists,
    ApiResource,
    Conflict,
    GroupVersionKind,
    Invalid,
    NotFound,
    PatchType,
    UnsupportedMediaType,
    meta,
)

pytestmark = pytest.mark.controlplane

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")


def configmap(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


class ConfigMapModel(pydantic.BaseModel):
    api_version: ClassVar[str] = "v1"
    kind: ClassVar[str] = "ConfigMap"
    metadata: dict[str, Any]
    data: dict[str, str] = {}


async def test_configmap_every_verb(client: Client, namespace: str) -> None:
    created = await client.create(configmap("a", k="1"))
    assert meta.namespace(created) == namespace and meta.uid(created)
    with pytest.raises(AlreadyExists, match='configmaps "a" already exists'):
        await client.create(configmap("a"))
    got = await client.get("configmaps", "a")
    assert got["data"] == {"k": "1"}

    got["data"]["k"] = "2"
    updated = await client.update(got)
    assert int(meta.resource_version(updated)) > int(meta.resource_version(created))

    merged = await client.patch(CM, "a", {"data": {"m": "x"}})
    assert merged["data"] == {"k": "2", "m": "x"}
    jsonp = await client.patch(
        CM,
        "a",
        [{"op": "test", "path": "/data/m", "value": "x"}, {"op": "remove", "path": "/data/m"}],
        type=PatchType.JSON,
    )
    assert jsonp["data"] == {"k": "2"}
    strategic = await client.patch(CM, "a", {"metadata": {"labels": {"s": "y"}}}, type=PatchType.STRATEGIC)
    assert meta.labels(strategic) == {"s": "y"}

    listed = await client.list(CM, field_selector={"metadata.name": "a"})
    assert [meta.name(i) for i in listed.items] == ["a"] and listed.resource_version
    assert listed.items[0]["kind"] == "ConfigMap"

    deleted = await client.delete(CM, "a")
    assert deleted["kind"] in ("ConfigMap", "Status")
    with pytest.raises(NotFound, match='configmaps "a" not found'):
        await client.get(CM, "a")


async def test_stale_update_conflicts(client: Client) -> None:
    first = await client.create(configmap("c", v="0"))
    fresh = await client.patch(CM, "c", {"data": {"v": "1"}})
    first["data"]["v"] = "stale"
    with pytest.raises(Conflict, match="the object has been modified"):
        await client.update(first)
    fresh["data"]["v"] = "2"
    assert (await client.update(fresh))["data"]["v"] == "2"


async def test_invalid_names_fields(client: Client) -> None:
    with pytest.raises(Invalid) as info:
        await client.create(configmap("Bad_Name"))
    assert any(c.field == "metadata.name" for c in info.value.causes)


async def test_dry_run_create_leaves_nothing(client: Client) -> None:
    result = await client.create(configmap("dry", k="v"), dry_run=True)
    assert meta.name(result) == "dry"
    assert await client.get_or_none(CM, "dry") is None
    real = await client.create(configmap("wet"))
    await client.patch(CM, "wet", {"data": {"x": "1"}}, dry_run=True)
    await client.delete(CM, "wet", dry_run=True)
    still = await client.get(CM, "wet")
    assert "x" not in (still.get("data") or {})
    assert meta.uid(still) == meta.uid(real)


async def test_delete_preconditions(client: Client) -> None:
    obj = await client.create(configmap("p"))
    with pytest.raises(Conflict, match="the UID in the precondition"):
        await client.delete(CM, "p", precondition_uid="00000000-0000-0000-0000-000000000000")
    await client.patch(CM, "p", {"data": {"changed": "1"}})
    with pytest.raises(Conflict):
        await client.delete(CM, "p", precondition_resource_version=meta.resource_version(obj))
    await client.delete(CM, "p", precondition_uid=meta.uid(obj), propagation_policy="Background")
    assert await client.get_or_none(CM, "p") is None


async def test_delete_collection_by_label(client: Client) -> None:
    for i in range(3):
        await client.create(
            {**configmap(f"del-{i}"), "metadata": {"name": f"del-{i}", "labels": {"batch": "x"}}}
        )
    await client.create(configmap("keep"))
    await client.delete_collection(CM, label_selector={"batch": "x"})
    left = await client.list(CM)
    assert [meta.name(i) for i in left.items if not meta.name(i).startswith("kube-root-ca")] == ["keep"]


async def test_cluster_scoped_kind(client: Client, namespace: str) -> None:
    name = f"{namespace}-reader"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "namespace": "ignored-for-cluster-scope"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
    }
    created = await client.create(role)
    assert "namespace" not in created["metadata"]
    res = await client.resource(GroupVersionKind("rbac.authorization.k8s.io", "v1", "ClusterRole"))
    assert not res.namespaced
    patched = await client.patch(res, name, {"metadata": {"labels": {"a": "b"}}}, type=PatchType.STRATEGIC)
    assert meta.labels(patched) == {"a": "b"}
    listed = await client.list(res, label_selector="a=b")
    assert [meta.name(i) for i in listed.items] == [name]
    patched["rules"][0]["verbs"] = ["get", "list"]
    assert (await client.update(patched))["rules"][0]["verbs"] == ["get", "list"]
    await client.delete(res, name)
    assert await client.get_or_none(res, name) is None


async def test_custom_resource_every_verb_and_status(client: Client, widget_crd: str) -> None:
    widget = {
        "apiVersion": "e2e.kubeop.dev/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 1},
    }
    created = await client.create(widget)
    assert created["spec"] == {"size": 1}
    res = await client.resource("wdg")
    assert res.kind == "Widget" and "status" in res.subresources

    # The main resource ignores status; the status subresource ignores everything else.
    created["status"] = {"phase": "Ready"}
    created["spec"]["size"] = 2
    after_update = await client.update(created)
    assert "status" not in after_update and after_update["spec"]["size"] == 2
    after_update["status"] = {"phase": "Ready"}
    after_update["spec"]["size"] = 99
    status_written = await client.update_status(after_update)
    assert status_written["status"] == {"phase": "Ready"} and status_written["spec"]["size"] == 2
    patched = await client.patch(res, "w", {"status": {"phase": "Done"}}, subresource="status")
    assert patched["status"]["phase"] == "Done"

    with pytest.raises(UnsupportedMediaType):
        await client.patch(res, "w", {"spec": {"size": 3}}, type=PatchType.STRATEGIC)
    with pytest.raises(Invalid, match=r"spec\.size"):
        await client.patch(res, "w", {"spec": {"size": -1}})
    jsonp = await client.patch(
        res, "w", [{"op": "replace", "path": "/spec/size", "value": 4}], type=PatchType.JSON
    )
    assert jsonp["spec"]["size"] == 4

    await client.patch(res, "w", {"spec": {"replicas": 1}})
    scale = await client.get_scale(res, "w")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 1
    await client.scale(res, "w", 3)
    assert (await client.get(res, "w"))["spec"]["replicas"] == 3

    assert [meta.name(i) for i in (await client.list(res)).items] == ["w"]
    await client.delete(res, "w")
    assert await client.get_or_none(res, "w") is None


async def test_typed_model_roundtrip(client: Client) -> None:
    created = await client.create(ConfigMapModel(metadata={"name": "typed"}, data={"a": "1"}))
    assert isinstance(created, ConfigMapModel) and created.metadata["uid"]
    got = await client.get(ConfigMapModel, "typed")
    assert got.data == {"a": "1"}
    listed = await client.list(ConfigMapModel, field_selector={"metadata.name": "typed"})
    assert [m.metadata["name"] for m in listed.items] == ["typed"]


def test_sync_client(kubeconfig_path: str, namespace: str) -> None:
    with SyncClient(load_kubeconfig(kubeconfig_path, namespace=namespace)) as k:
        k.create(configmap("sync", a="b"))
        assert k.get("cm", "sync")["data"] == {"a": "b"}
        k.delete("cm", "sync")
        assert k.get_or_none("cm", "sync") is None
