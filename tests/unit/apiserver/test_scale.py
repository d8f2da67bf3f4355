"""The scale subresource of an aggregated kind: an ``autoscaling/v1`` Scale read from and written
to the declared replica paths, as kube-apiserver serves a custom resource's."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field

from kubeop.crd import CustomResource, Scale
from kubeop.crd.resource import CamelModel
from tests.unit.apiserver.conftest import Env, Widget
from tests.unit.apiserver.test_http import call

POOLS = "/apis/example.com/v1alpha1/namespaces/default/pools"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
SMP = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


class PoolSpec(CamelModel):
    replicas: int | None = Field(default=None, le=50)
    image: str = "busybox"


class PoolStatus(CamelModel):
    replicas: int = 0
    selector: str = ""


class Pool(
    CustomResource,
    group="example.com",
    version="v1alpha1",
    subresources=["status", Scale(label_selector_path=".status.selector")],
):
    spec: PoolSpec
    status: PoolStatus | None = None


@pytest.fixture
def kinds() -> list[type[CustomResource]]:
    return [Widget, Pool]


def pool(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1alpha1", "kind": "Pool", "metadata": {"name": name}, "spec": spec}


async def _made(env: Env, name: str = "p", **spec: Any) -> dict[str, Any]:
    async with env.as_user("alice") as s:
        code, made = await call(s, "POST", env.base + POOLS, pool(name, **spec))
        assert code == 201, made
        code, out = await call(
            s,
            "PUT",
            env.base + POOLS + f"/{name}/status",
            {**made, "status": {"replicas": 2, "selector": "app=p"}},
        )
        assert code == 200, out
        return dict(out)


async def test_discovery_names_the_scale_subresource_and_its_kind(env: Env) -> None:
    async with env.as_user("alice") as s:
        code, listed = await call(s, "GET", env.base + "/apis/example.com/v1alpha1")
        assert code == 200
        scale = next(r for r in listed["resources"] if r["name"] == "pools/scale")
        assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
        assert scale["verbs"] == ["get", "patch", "update"] and scale["namespaced"] is True
        assert "widgets/scale" not in {r["name"] for r in listed["resources"]}
        accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        code, aggregated = await call(s, "GET", env.base + "/apis", headers={"Accept": accept})
        resources = aggregated["items"][0]["versions"][0]["resources"]
        pools = next(r for r in resources if r["resource"] == "pools")
        assert [(x["subresource"], x["responseKind"]["kind"]) for x in pools["subresources"]] == [
            ("status", "Pool"),
            ("scale", "Scale"),
        ]


async def test_get_reads_the_declared_paths(env: Env) -> None:
    made = await _made(env)
    async with env.as_user("alice") as s:
        code, scale = await call(s, "GET", env.base + POOLS + "/p/scale")
    assert code == 200, scale
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"] == {"replicas": 0}  # not set in the object: 0, as for a custom resource
    assert scale["status"] == {"replicas": 2, "selector": "app=p"}
    meta = made["metadata"]
    assert scale["metadata"] == {
        k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
    }


async def test_put_sets_only_the_desired_count(env: Env) -> None:
    made = await _made(env, replicas=1)
    async with env.as_user("alice") as s:
        code, scale = await call(s, "GET", env.base + POOLS + "/p/scale")
        scale["spec"]["replicas"] = 4
        scale["status"]["replicas"] = 99  # the status of a Scale is read-only
        code, out = await call(s, "PUT", env.base + POOLS + "/p/scale", scale)
        assert code == 200, out
        assert out["spec"]["replicas"] == 4 and out["status"]["replicas"] == 2
        code, obj = await call(s, "GET", env.base + POOLS + "/p")
    assert obj["spec"] == {"replicas": 4, "image": "busybox"} and obj["status"]["replicas"] == 2
    assert obj["metadata"]["generation"] == made["metadata"]["generation"] + 1
    assert out["metadata"]["resourceVersion"] == obj["metadata"]["resourceVersion"]
    entries = {(e["manager"], e.get("subresource", "")) for e in obj["metadata"]["managedFields"]}
    assert any(sub == "scale" for _, sub in entries), entries


async def test_patches_of_every_kind_scale(env: Env) -> None:
    await _made(env, replicas=1)
    url = env.base + POOLS + "/p/scale"
    async with env.as_user("alice") as s:
        code, out = await call(s, "PATCH", url, {"spec": {"replicas": 3}}, MERGE)
        assert code == 200 and out["spec"]["replicas"] == 3, out
        code, out = await call(
            s, "PATCH", url, [{"op": "replace", "path": "/spec/replicas", "value": 5}], JSON_PATCH
        )
        assert code == 200 and out["spec"]["replicas"] == 5, out
        code, out = await call(s, "PATCH", url, {"spec": {"replicas": 6}}, SMP)
        assert code == 200 and out["spec"]["replicas"] == 6, out
        code, out = await call(s, "PATCH", url, b"spec: {replicas: 7}", APPLY)
        assert code == 415 and "not a patch of a Scale" in out["message"], out
        code, obj = await call(s, "GET", env.base + POOLS + "/p")
    assert obj["spec"]["replicas"] == 6


async def test_a_scale_that_changes_nothing_writes_nothing(env: Env) -> None:
    await _made(env, replicas=2)
    async with env.as_user("alice") as s:
        _, before = await call(s, "GET", env.base + POOLS + "/p")
        code, out = await call(s, "PATCH", env.base + POOLS + "/p/scale", {"spec": {"replicas": 2}}, MERGE)
        assert out["spec"]["replicas"] == 2
        _, after = await call(s, "GET", env.base + POOLS + "/p")
    assert code == 200 and after == before  # no new resourceVersion, no managedFields entry


async def test_preconditions_and_dry_run(env: Env) -> None:
    await _made(env, replicas=1)
    url = env.base + POOLS + "/p/scale"
    async with env.as_user("alice") as s:
        code, scale = await call(s, "GET", url)
        stale = {**scale, "metadata": {**scale["metadata"], "resourceVersion": "1"}}
        code, out = await call(s, "PUT", url, {**stale, "spec": {"replicas": 9}})
        assert code == 409 and out["reason"] == "Conflict", out
        patch = {"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 9}}
        code, out = await call(s, "PATCH", url, patch, MERGE)
        assert code == 409, out
        code, out = await call(s, "PUT", url + "?dryRun=All", {**scale, "spec": {"replicas": 9}})
        assert code == 200 and out["spec"]["replicas"] == 9, out
        code, now = await call(s, "GET", url)
        assert now["spec"]["replicas"] == 1 and now["metadata"] == scale["metadata"]
        unconditional = {"apiVersion": "autoscaling/v1", "kind": "Scale", "spec": {"replicas": 2}}
        code, out = await call(s, "PUT", url, unconditional)
        assert code == 200 and out["spec"]["replicas"] == 2, out


async def test_a_put_scale_of_another_uid_is_a_conflict(env: Env) -> None:
    await _made(env, replicas=1)
    url = env.base + POOLS + "/p/scale"
    async with env.as_user("alice") as s:
        _, scale = await call(s, "GET", url)
        meta = {k: v for k, v in scale["metadata"].items() if k != "resourceVersion"}
        # a Scale read from an object since deleted and made again: its uid is a precondition
        code, out = await call(
            s, "PUT", url, {**scale, "metadata": {**meta, "uid": "gone"}, "spec": {"replicas": 3}}
        )
        assert code == 409 and out["reason"] == "Conflict" and "UID" in out["message"], out
        code, out = await call(s, "PUT", url, {**scale, "metadata": meta, "spec": {"replicas": 3}})
        assert code == 200 and out["spec"]["replicas"] == 3, out


async def test_a_scale_write_owns_the_replicas_alone_and_an_apply_of_them_conflicts(env: Env) -> None:
    async with env.as_user("alice") as s:
        labelled = pool("p", replicas=1)
        labelled["metadata"]["labels"] = {"app": "p"}
        code, made = await call(s, "PATCH", env.base + POOLS + "/p?fieldManager=carol", labelled, APPLY)
        assert code == 201, made
        url = env.base + POOLS + "/p/scale?fieldManager=hpa"
        code, out = await call(s, "PATCH", url, {"spec": {"replicas": 3}}, MERGE)
        assert code == 200, out
        _, obj = await call(s, "GET", env.base + POOLS + "/p")
        entries = {(e["manager"], e.get("subresource", "")): e for e in obj["metadata"]["managedFields"]}
        # as kube-apiserver records it: the replicas, not the maps above them
        assert entries[("hpa", "scale")]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
        assert "f:app" in entries[("carol", "")]["fieldsV1"]["f:metadata"]["f:labels"]
        code, out = await call(s, "PATCH", env.base + POOLS + "/p?fieldManager=carol", labelled, APPLY)
        assert code == 409 and 'conflict with "hpa"' in out["message"], out


async def test_a_patch_that_sets_no_count_of_an_object_without_one_is_refused(env: Env) -> None:
    await _made(env)  # no spec.replicas: the Scale reads 0, but 0 was never asked for
    url = env.base + POOLS + "/p/scale"
    async with env.as_user("alice") as s:
        _, before = await call(s, "GET", env.base + POOLS + "/p")
        code, out = await call(s, "PATCH", url, {"metadata": {"labels": {"a": "b"}}}, MERGE)
        assert code == 400 and "spec.replicas" in out["message"], out
        code, out = await call(
            s, "PATCH", url, [{"op": "add", "path": "/status/replicas", "value": 1}], JSON_PATCH
        )
        assert code == 400, out
        _, after = await call(s, "GET", env.base + POOLS + "/p")
        assert after == before  # as kube-apiserver: no spec.replicas: 0 written on its own
        code, out = await call(s, "PATCH", url, {"spec": {"replicas": 0}}, MERGE)
        assert code == 200 and out["spec"]["replicas"] == 0, out


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        ({"spec": {"replicas": -1}}, 422, "spec.replicas: -1: must be greater than or equal to 0"),
        ({"spec": {"replicas": True}}, 422, "spec.replicas: True: must be an integer"),
        ({"spec": {"replicas": "3"}}, 422, "spec.replicas: '3': must be an integer"),
        ({"spec": {"replicas": 2**31}}, 422, "must be at most 2147483647"),
        ({"spec": {"replicas": 51}}, 422, "spec.replicas"),  # the model's own bound (le=50)
        ({"spec": []}, 422, "spec: must be an object"),
        ({"kind": "Deployment", "spec": {"replicas": 1}}, 400, "send kind: Scale"),
        ({"apiVersion": "apps/v1", "spec": {"replicas": 1}}, 400, "send apiVersion: autoscaling/v1"),
        ({"metadata": {"name": "other"}, "spec": {"replicas": 1}}, 400, "not the name in the URL"),
        ({"metadata": {"namespace": "kube-system"}, "spec": {"replicas": 1}}, 400, "namespace in the URL"),
        ({"metadata": {"resourceVersion": 5}, "spec": {"replicas": 1}}, 400, "must be a string"),
        ([], 400, "must be a JSON object"),
    ],
)
async def test_bad_scales_are_refused_naming_the_field(env: Env, body: Any, code: int, says: str) -> None:
    await _made(env, replicas=1)
    async with env.as_user("alice") as s:
        got, out = await call(s, "PUT", env.base + POOLS + "/p/scale", body)
        assert (got, says in out["message"]) == (code, True), out
        _, obj = await call(s, "GET", env.base + POOLS + "/p")
    assert obj["spec"]["replicas"] == 1


async def test_other_verbs_and_kinds_without_a_scale_are_refused(env: Env) -> None:
    await _made(env)
    async with env.as_user("alice") as s:
        code, out = await call(s, "DELETE", env.base + POOLS + "/p/scale")
        assert code == 405 and "get, update (PUT) and patch" in out["message"], out
        code, out = await call(s, "DELETE", env.base + POOLS + "/p/status")
        assert code == 405, out
        code, _ = await call(s, "GET", env.base + POOLS + "/p")
        assert code == 200  # neither delete removed the object
        code, out = await call(
            s, "POST", env.base + "/apis/example.com/v1alpha1/namespaces/default/widgets", _widget("w")
        )
        assert code == 201, out
        code, out = await call(
            s, "GET", env.base + "/apis/example.com/v1alpha1/namespaces/default/widgets/w/scale"
        )
        assert code == 404, out
        code, out = await call(s, "GET", env.base + POOLS + "/p/scale?watch=true")
        assert code == 405, out


async def test_authorization_names_the_subresource(env: Env) -> None:
    await _made(env)
    async with env.as_user("dora") as s:  # dora may get and patch, not update
        code, _ = await call(s, "GET", env.base + POOLS + "/p/scale")
        assert code == 200
        code, out = await call(s, "PUT", env.base + POOLS + "/p/scale", {"spec": {"replicas": 3}})
        assert code == 403, out
        code, out = await call(s, "PATCH", env.base + POOLS + "/p/scale", {"spec": {"replicas": 3}}, MERGE)
        assert code == 200, out
    asked = [
        c["spec"]["resourceAttributes"]
        for c in env.reviews.calls
        if c["kind"] == "SubjectAccessReview" and c["spec"]["user"] == "dora"
    ]
    assert [(a["verb"], a.get("subresource")) for a in asked] == [
        ("get", "scale"),
        ("update", "scale"),
        ("patch", "scale"),
    ]


def _widget(name: str) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1alpha1", "kind": "Widget", "metadata": {"name": name}, "spec": {}}
