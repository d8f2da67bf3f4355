"""Server-side apply: field managers, conflicts, force, removal of fields a manager dropped."""

from __future__ import annotations

from typing import Any

import pytest

from kubeop.client import Client
from kubeop.core import ApiResource, Conflict, meta

pytestmark = pytest.mark.controlplane

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")


def intent(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def managers(obj: dict[str, Any]) -> set[str]:
    return {m["manager"] for m in obj["metadata"].get("managedFields", [])}


async def test_apply_creates_updates_and_prunes(client: Client) -> None:
    created = await client.apply(intent("ssa", a="1", b="2"), field_manager="alice")
    assert created["data"] == {"a": "1", "b": "2"} and managers(created) == {"alice"}
    again = await client.apply(intent("ssa", a="1"), field_manager="alice")
    assert again["data"] == {"a": "1"}  # alice no longer wants b: removed
    same = await client.apply(intent("ssa", a="1"), field_manager="alice")
    assert meta.resource_version(same) == meta.resource_version(again)  # no-op apply writes nothing


async def test_conflict_then_force(client: Client) -> None:
    await client.apply(intent("owned", key="alice"), field_manager="alice")
    with pytest.raises(Conflict, match='conflict with "alice"') as info:
        await client.apply(intent("owned", key="bob"), field_manager="bob")
    assert info.value.code == 409 and any(".data.key" in c.field for c in info.value.causes)
    forced = await client.apply(intent("owned", key="bob"), field_manager="bob", force=True)
    assert forced["data"] == {"key": "bob"}
    owners = {m["manager"]: m for m in forced["metadata"]["managedFields"]}
    assert "f:key" in str(owners["bob"]["fieldsV1"]) and "f:key" not in str(
        owners.get("alice", {}).get("fieldsV1", "")
    )


async def test_apply_dry_run_and_shared_ownership(client: Client) -> None:
    await client.apply(intent("shared", k="v"), field_manager="alice")
    await client.apply(intent("shared", k="v"), field_manager="bob")  # same value: co-owned, no conflict
    dry = await client.apply(intent("shared", k="changed"), field_manager="alice", dry_run=True, force=True)
    assert dry["data"]["k"] == "changed"
    assert (await client.get(CM, "shared"))["data"]["k"] == "v"


async def test_apply_status_on_crd(client: Client, widget_crd: str) -> None:
    widget = {
        "apiVersion": "e2e.kubeop.dev/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 1},
    }
    await client.apply(widget, field_manager="ctl")
    status = {
        "apiVersion": "e2e.kubeop.dev/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "status": {"phase": "Ready"},
    }
    out = await client.apply_status(status, field_manager="ctl-status")
    assert out["status"] == {"phase": "Ready"} and out["spec"] == {"size": 1}
