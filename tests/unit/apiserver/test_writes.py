"""The writes beyond create/update/merge: strategic merge patch (for kinds that declare list
types), server-side apply with managedFields and conflicts, dryRun=All, and finalizers."""

from __future__ import annotations

from typing import Annotated, Any

import pytest

from kubeop.crd import CustomResource, ListType
from kubeop.crd.resource import CamelModel
from tests.unit.apiserver.conftest import Env, Widget
from tests.unit.apiserver.test_http import call, widget

NS = "/apis/example.com/v1alpha1/namespaces/default/widgets"
GIZMOS = "/apis/example.com/v1alpha1/namespaces/default/gizmos"
APPLY = "application/apply-patch+yaml"
SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


class Port(CamelModel):
    name: str
    number: int = 80
    protocol: str | None = None


class GizmoSpec(CamelModel):
    ports: Annotated[list[Port], ListType("map", keys=("name",))] = []
    tags: Annotated[list[str], ListType("set")] = []
    args: list[str] = []
    size: int = 1
    color: str | None = None


class Gizmo(CustomResource, group="example.com", version="v1alpha1", subresources=["status"]):
    spec: GizmoSpec


@pytest.fixture
def kinds() -> list[type[CustomResource]]:
    return [Widget, Gizmo]


def gizmo(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1alpha1", "kind": "Gizmo", "metadata": {"name": name}, "spec": spec}


def managers(obj: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(e["manager"], e["operation"]): e["fieldsV1"] for e in obj["metadata"].get("managedFields", [])}


async def test_strategic_merge_follows_the_models_list_types(env: Env) -> None:
    async with env.as_user("alice") as s:
        body = gizmo("g", ports=[{"name": "http"}, {"name": "https", "number": 443}], tags=["a"], args=["x"])
        code, made = await call(s, "POST", env.base + GIZMOS, body)
        assert code == 201, made
        patch = {"spec": {"ports": [{"name": "http", "number": 8080}], "tags": ["b"], "args": ["y"]}}
        code, out = await call(s, "PATCH", env.base + GIZMOS + "/g", patch, SMP)
        assert code == 200, out
        assert out["spec"]["ports"] == [{"name": "http", "number": 8080}, {"name": "https", "number": 443}]
        assert out["spec"]["tags"] == ["a", "b"] and out["spec"]["args"] == [
            "y"
        ]  # a set merges, atomic replaces
        delete = {"spec": {"ports": [{"name": "https", "$patch": "delete"}]}}
        code, out = await call(s, "PATCH", env.base + GIZMOS + "/g", delete, SMP)
        assert [p["name"] for p in out["spec"]["ports"]] == ["http"]
        code, bad = await call(
            s, "PATCH", env.base + GIZMOS + "/g", {"spec": {"ports": [{"number": 1}]}}, SMP
        )
        assert code == 422 and "merge key 'name'" in bad["message"]
        code, refused = await call(s, "PATCH", env.base + NS + "/x", {}, SMP)
        assert code == 415 and "declares no list types" in refused["message"]


async def test_apply_creates_merges_removes_and_records_managed_fields(env: Env) -> None:
    url = env.base + GIZMOS + "/g"
    async with env.as_user("alice") as s:
        config = gizmo("g", ports=[{"name": "http", "number": 8080}], size=2)
        config["metadata"]["labels"] = {"app": "g"}
        code, made = await call(s, "PATCH", url + "?fieldManager=alice", config, APPLY)
        assert code == 201, made
        assert made["metadata"]["generation"] == 1 and made["metadata"]["uid"]
        fields = managers(made)[("alice", "Apply")]
        assert fields["f:spec"]["f:ports"]['k:{"name":"http"}']["f:number"] == {}
        assert fields["f:metadata"]["f:labels"]["f:app"] == {}
        code, again = await call(s, "PATCH", url + "?fieldManager=alice", config, APPLY)
        assert again["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]  # no-op
        # bob takes a field by update; alice's next apply without `size` leaves bob's field alone
        code, bobbed = await call(s, "PATCH", url + "?fieldManager=bob", {"spec": {"color": "red"}}, MERGE)
        assert ("bob", "Update") in managers(bobbed)
        smaller = gizmo("g", ports=[{"name": "http", "number": 8080}])
        code, out = await call(s, "PATCH", url + "?fieldManager=alice", smaller, APPLY)
        assert code == 200, out
        assert out["spec"]["color"] == "red" and out["spec"]["size"] == 1  # size removed, then defaulted
        assert "labels" not in out["metadata"]  # alice's label, no longer applied, is removed
        assert out["metadata"]["generation"] == 3
        # YAML is accepted as well as JSON
        yaml_config = (
            b"apiVersion: example.com/v1alpha1\nkind: Gizmo\nmetadata: {name: g}\nspec:\n  tags: [t]\n"
        )
        code, out = await call(s, "PATCH", url + "?fieldManager=carol", yaml_config, APPLY)
        assert code == 200 and out["spec"]["tags"] == ["t"] and out["spec"]["ports"][0]["number"] == 8080


async def test_an_apply_that_drops_every_label_it_applied_keeps_the_metadata(env: Env) -> None:
    url = env.base + GIZMOS + "/g"
    async with env.as_user("alice") as s:
        labelled = gizmo("g", size=2)
        labelled["metadata"]["labels"] = {"app": "g"}
        code, made = await call(s, "PATCH", url + "?fieldManager=alice", labelled, APPLY)
        assert code == 201, made
        code, out = await call(s, "PATCH", url + "?fieldManager=alice", gizmo("g", size=2), APPLY)
        assert code == 200, out
    assert "labels" not in out["metadata"] and out["metadata"]["name"] == "g"
    assert out["metadata"]["uid"] == made["metadata"]["uid"]
    assert "f:metadata" not in managers(out)[("alice", "Apply")]


async def test_apply_conflicts_are_409_naming_fields_and_managers_unless_forced(env: Env) -> None:
    url = env.base + GIZMOS + "/g"
    async with env.as_user("alice") as s:
        await call(s, "PATCH", url + "?fieldManager=alice", gizmo("g", size=2, color="blue"), APPLY)
        code, conflict = await call(s, "PATCH", url + "?fieldManager=bob", gizmo("g", size=3), APPLY)
        assert code == 409 and conflict["reason"] == "Conflict"
        assert conflict["details"]["causes"] == [
            {"reason": "FieldManagerConflict", "message": 'conflict with "alice"', "field": ".spec.size"}
        ]
        code, _ = await call(s, "PATCH", url + "?fieldManager=bob", gizmo("g", size=2), APPLY)
        assert code == 200  # the same value is no conflict: both own it
        code, forced = await call(s, "PATCH", url + "?fieldManager=bob&force=true", gizmo("g", size=4), APPLY)
        assert code == 200 and forced["spec"]["size"] == 4
        owned = managers(forced)
        assert (
            "f:size" not in owned[("alice", "Apply")]["f:spec"]
            and "f:size" in owned[("bob", "Apply")]["f:spec"]
        )
        code, missing = await call(s, "PATCH", url, gizmo("g"), APPLY)
        assert code == 400 and "fieldManager is required" in missing["message"]


async def test_dry_run_answers_as_if_and_stores_nothing(env: Env) -> None:
    async with env.as_user("root", "system:masters") as s:
        code, made = await call(s, "POST", env.base + NS + "?dryRun=All", widget("a"))
        assert code == 201 and made["metadata"]["uid"] and "resourceVersion" not in made["metadata"]
        code, _ = await call(s, "GET", env.base + NS + "/a")
        assert code == 404
        code, made = await call(s, "POST", env.base + NS, widget("a"))
        version = made["metadata"]["resourceVersion"]
        made["spec"]["size"] = 7
        code, updated = await call(s, "PUT", env.base + NS + "/a?dryRun=All", made)
        assert code == 200 and updated["spec"]["size"] == 7 and updated["metadata"]["generation"] == 2
        code, patched = await call(s, "PATCH", env.base + NS + "/a?dryRun=All", {"spec": {"size": 8}}, MERGE)
        assert patched["spec"]["size"] == 8
        code, applied = await call(
            s, "PATCH", env.base + NS + "/a?dryRun=All&fieldManager=m&force=true", widget("a", 9), APPLY
        )
        assert code == 200 and applied["spec"]["size"] == 9
        code, deleted = await call(s, "DELETE", env.base + NS + "/a?dryRun=All")
        assert code == 200 and deleted["metadata"]["name"] == "a"
        code, got = await call(s, "GET", env.base + NS + "/a")
        assert code == 200 and got["spec"]["size"] == 1 and got["metadata"]["resourceVersion"] == version
        code, bad = await call(s, "GET", env.base + NS + "?dryRun=All")
        assert code == 400
        code, bad = await call(s, "DELETE", env.base + NS + "/a?dryRun=Some")
        assert code == 400 and "the only value is All" in bad["message"]


async def test_finalizers_hold_a_deleted_object_until_the_last_is_removed(env: Env) -> None:
    async with env.as_user("root", "system:masters") as s:
        body = widget("a")
        body["metadata"]["finalizers"] = ["example.com/a", "example.com/b"]
        await call(s, "POST", env.base + NS, body)
        code, marked = await call(s, "DELETE", env.base + NS + "/a")
        assert (
            code == 200 and marked["metadata"]["deletionTimestamp"] and marked["metadata"]["generation"] == 2
        )
        code, again = await call(s, "DELETE", env.base + NS + "/a")
        assert again["metadata"]["resourceVersion"] == marked["metadata"]["resourceVersion"]
        code, refused = await call(
            s,
            "PATCH",
            env.base + NS + "/a",
            {"metadata": {"finalizers": ["example.com/a", "example.com/b", "example.com/c"]}},
            MERGE,
        )
        assert code == 422 and "no new finalizers" in refused["message"]
        ops = [{"op": "remove", "path": "/metadata/finalizers/0"}]
        code, one = await call(s, "PATCH", env.base + NS + "/a", ops, "application/json-patch+json")
        assert code == 200 and one["metadata"]["finalizers"] == ["example.com/b"]
        code, last = await call(s, "PATCH", env.base + NS + "/a", {"metadata": {"finalizers": None}}, MERGE)
        assert code == 200 and not last["metadata"].get("finalizers")
        code, _ = await call(s, "GET", env.base + NS + "/a")
        assert code == 404
