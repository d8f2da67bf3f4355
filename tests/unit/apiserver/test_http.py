"""The APIServer over HTTPS on loopback: discovery, OpenAPI, every verb, Status errors, Table
output, watch streams and the input limits (the caller is the front proxy, as alice, who may
do anything but delete)."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson

from tests.unit.apiserver.conftest import Env

NS = "/apis/example.com/v1alpha1/namespaces/default/widgets"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def widget(name: str, size: int = 1, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1alpha1",
        "kind": "Widget",
        "metadata": {"name": name, "labels": labels},
        "spec": {"size": size},
    }


async def call(
    s: aiohttp.ClientSession,
    method: str,
    url: str,
    body: Any = None,
    ctype: str = "application/json",
    **kw: Any,
) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else orjson.dumps(body) if body is not None else None
    headers = {"Content-Type": ctype} if data is not None else {}
    headers.update(kw.pop("headers", {}))
    async with s.request(method, url, data=data, headers=headers, **kw) as r:
        raw = await r.read()
        return r.status, orjson.loads(raw) if raw and r.content_type == "application/json" else raw


async def test_discovery_and_openapi(env: Env) -> None:
    async with env.as_user("alice") as s:
        code, groups = await call(s, "GET", env.base + "/apis")
        assert code == 200 and groups["groups"][0]["name"] == "example.com"
        code, group = await call(s, "GET", env.base + "/apis/example.com")
        assert group["preferredVersion"]["groupVersion"] == "example.com/v1alpha1"
        code, resources = await call(s, "GET", env.base + "/apis/example.com/v1alpha1")
        names = {r["name"]: r for r in resources["resources"]}
        assert set(names) == {"widgets", "widgets/status"}
        assert names["widgets"]["shortNames"] == ["wd"] and "watch" in names["widgets"]["verbs"]
        aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        async with s.get(env.base + "/apis", headers={"Accept": aggregated}) as resp:
            assert resp.headers["Content-Type"].endswith("as=APIGroupDiscoveryList")
            (item,) = orjson.loads(await resp.read())["items"]
        (served,) = item["versions"][0]["resources"]
        assert served["resource"] == "widgets" and served["scope"] == "Namespaced"
        assert served["subresources"][0]["subresource"] == "status"
        code, index = await call(s, "GET", env.base + "/openapi/v3")
        url = index["paths"]["apis/example.com/v1alpha1"]["serverRelativeURL"]
        code, doc = await call(s, "GET", env.base + url)
        schema = doc["components"]["schemas"]["com.example.v1alpha1.Widget"]
        assert schema["x-kubernetes-group-version-kind"][0]["kind"] == "Widget"
        assert "spec" in schema["properties"]


async def test_create_get_update_patch_delete(env: Env) -> None:
    async with env.as_user("alice") as s:
        code, made = await call(s, "POST", env.base + NS, widget("a", app="web"))
        assert code == 201, made
        meta = made["metadata"]
        assert meta["uid"] and meta["creationTimestamp"].endswith("Z") and meta["generation"] == 1
        assert meta["namespace"] == "default" and made["spec"] == {"size": 1, "color": "blue"}  # defaulted
        code, got = await call(s, "GET", env.base + NS + "/a")
        assert got == made
        got["spec"]["size"] = 2
        code, updated = await call(s, "PUT", env.base + NS + "/a", got)
        assert code == 200 and updated["metadata"]["generation"] == 2
        assert int(updated["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
        code, stale = await call(s, "PUT", env.base + NS + "/a", got)
        assert code == 409 and stale["kind"] == "Status" and stale["reason"] == "Conflict"
        code, merged = await call(
            s, "PATCH", env.base + NS + "/a", {"spec": {"size": 3}}, "application/merge-patch+json"
        )
        assert code == 200 and merged["spec"]["size"] == 3 and merged["metadata"]["generation"] == 3
        ops = [
            {"op": "test", "path": "/spec/size", "value": 3},
            {"op": "replace", "path": "/spec/size", "value": 4},
        ]
        code, patched = await call(s, "PATCH", env.base + NS + "/a", ops, "application/json-patch+json")
        assert code == 200 and patched["spec"]["size"] == 4
        code, failed = await call(s, "PATCH", env.base + NS + "/a", ops, "application/json-patch+json")
        assert code == 422 and "test failed" in failed["message"]
        code, same = await call(
            s, "PATCH", env.base + NS + "/a", {"spec": {"size": 4}}, "application/merge-patch+json"
        )
        assert (
            same["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
        )  # no-op: no write
        code, _ = await call(s, "PATCH", env.base + NS + "/a", {}, "application/strategic-merge-patch+json")
        assert code == 415
    async with env.as_user("root", "system:masters") as s:
        code, gone = await call(s, "DELETE", env.base + NS + "/a")
        assert code == 200 and gone["metadata"]["name"] == "a"
        code, missing = await call(s, "GET", env.base + NS + "/a")
        assert code == 404 and missing["reason"] == "NotFound" and missing["details"]["name"] == "a"


async def test_status_subresource(env: Env) -> None:
    async with env.as_user("alice") as s:
        made = widget("a")
        made["status"] = {"ready": True}
        code, created = await call(s, "POST", env.base + NS, made)
        assert "status" not in created  # the main resource ignores status
        code, st = await call(
            s,
            "PATCH",
            env.base + NS + "/a/status",
            {"status": {"ready": True}, "spec": {"size": 9}},
            "application/merge-patch+json",
        )
        assert code == 200 and st["status"] == {"ready": True} and st["spec"]["size"] == 1
        assert st["metadata"]["generation"] == 1
        st["spec"]["size"] = 5
        st["status"] = {"ready": False}
        code, main = await call(s, "PUT", env.base + NS + "/a", st)
        assert main["spec"]["size"] == 5 and main["status"] == {"ready": True}


async def test_invalid_objects_are_422_with_causes(env: Env) -> None:
    async with env.as_user("alice") as s:
        bad = widget("a")
        bad["spec"]["size"] = "big"
        code, status = await call(s, "POST", env.base + NS, bad)
        assert code == 422 and status["reason"] == "Invalid"
        assert status["details"]["causes"][0]["field"] == "spec.size"
        for name in ("..", "a..b", "UPPER", "a\r\nb", "-a"):
            code, status = await call(s, "POST", env.base + NS, widget(name))
            assert code == 422, name
            assert "\n" not in status["message"]
        code, status = await call(s, "GET", env.base + NS + "/..")
        assert code in (404, 422)
        code, status = await call(s, "POST", env.base + NS, {"kind": "Gadget", "metadata": {"name": "x"}})
        assert code == 400


async def test_list_selectors_paging_and_table(env: Env) -> None:
    async with env.as_user("alice") as s:
        for i, name in enumerate("abcde"):
            await call(s, "POST", env.base + NS, widget(name, i, app="web" if i % 2 else "db"))
        code, page = await call(s, "GET", env.base + NS, params={"limit": "2"})
        assert [i["metadata"]["name"] for i in page["items"]] == ["a", "b"]
        assert page["kind"] == "WidgetList" and page["metadata"]["remainingItemCount"] == 3
        code, rest = await call(s, "GET", env.base + NS, params={"continue": page["metadata"]["continue"]})
        assert [i["metadata"]["name"] for i in rest["items"]] == ["c", "d", "e"]
        code, web = await call(
            s, "GET", env.base + "/apis/example.com/v1alpha1/widgets", params={"labelSelector": "app=web"}
        )
        assert [i["metadata"]["name"] for i in web["items"]] == ["b", "d"]
        code, blue = await call(
            s, "GET", env.base + NS, params={"fieldSelector": "spec.color=blue,metadata.name!=a"}
        )
        assert len(blue["items"]) == 4
        code, bad = await call(s, "GET", env.base + NS, params={"fieldSelector": "spec.size=1"})
        assert code == 400 and "field label not supported" in bad["message"]
        code, table = await call(s, "GET", env.base + NS, headers={"Accept": TABLE})
        assert table["kind"] == "Table"
        assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Size", "Age"]
        assert table["rows"][1]["cells"][:2] == ["b", 1]
        assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
        code, _ = await call(s, "GET", env.base + NS, headers={"Accept": "application/yaml"})
        assert code == 406
    async with env.as_user("root", "system:masters") as s:
        code, deleted = await call(s, "DELETE", env.base + NS, params={"labelSelector": "app=db"})
        assert [i["metadata"]["name"] for i in deleted["items"]] == ["a", "c", "e"]


async def _events(resp: aiohttp.ClientResponse, n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    async with asyncio.timeout(5):
        while len(out) < n:
            line = await resp.content.readline()
            assert line, "the watch ended early"
            out.append(orjson.loads(line))
    return out


async def test_watch_streams_events_and_bookmarks(env: Env) -> None:
    async with env.as_user("alice") as s:
        _, a = await call(s, "POST", env.base + NS, widget("a"))
        params = {
            "watch": "true",
            "resourceVersion": a["metadata"]["resourceVersion"],
            "allowWatchBookmarks": "true",
        }
        async with s.get(env.base + NS, params=params) as resp:
            assert resp.status == 200 and resp.headers.get("Transfer-Encoding") == "chunked"
            await call(s, "POST", env.base + NS, widget("b"))
            (added,) = await _events(resp, 1)
            assert added["type"] == "ADDED" and added["object"]["metadata"]["name"] == "b"
            (bookmark,) = await _events(resp, 1)
            assert bookmark["type"] == "BOOKMARK" and bookmark["object"]["kind"] == "Widget"
        async with s.get(
            env.base + NS, params={"watch": "1", "timeoutSeconds": "1"}, headers={"Accept": TABLE}
        ) as resp:
            first, second = await _events(resp, 2)
            assert first["object"]["kind"] == "Table" and "columnDefinitions" in first["object"]
            assert "columnDefinitions" not in second["object"]
            async with asyncio.timeout(5):
                assert await resp.content.read() == b""  # ends after timeoutSeconds


async def test_watch_from_a_compacted_version_is_an_error_event(env: Env) -> None:
    async with env.as_user("alice") as s:
        await call(s, "POST", env.base + NS, widget("a"))
        await call(s, "POST", env.base + NS, widget("b"))
        env.storage.compact()
        async with s.get(env.base + NS, params={"watch": "true", "resourceVersion": "1"}) as resp:
            (error,) = await _events(resp, 1)
            assert error["type"] == "ERROR" and error["object"]["code"] == 410


async def test_a_closed_watch_releases_its_watcher(env: Env) -> None:
    async with env.as_user("alice") as s, s.get(env.base + NS, params={"watch": "true"}) as resp:
        assert resp.status == 200
        await asyncio.sleep(0.1)
        assert env.storage._watchers["example.com/widgets"]
    for _ in range(250):  # the server sees the connection go, and ends the storage's watch
        if not env.storage._watchers["example.com/widgets"]:
            break
        await asyncio.sleep(0.02)
    assert not env.storage._watchers["example.com/widgets"]


async def test_input_limits(env: Env) -> None:
    async with env.as_user("alice") as s:
        big = widget("a")
        big["spec"]["pad"] = "x" * (env.server.max_body + 1)
        code, status = await call(s, "POST", env.base + NS, big)
        assert code == 413 and status["kind"] == "Status"
        code, status = await call(s, "POST", env.base + NS, b"not json", ctype="application/json")
        assert code == 400
        code, status = await call(s, "POST", env.base + NS, widget("a"), ctype="text/plain")
        assert code == 415
        code, _ = await call(s, "GET", env.base + "/apis/example.com/v1alpha1/namespaces/BAD/widgets")
        assert code == 422
        code, _ = await call(s, "GET", env.base + "/apis/example.com/v1alpha1/gadgets")
        assert code == 404
        code, _ = await call(s, "GET", env.base + NS, params={"limit": "-1"})
        assert code == 400


def test_the_server_is_a_manager_runnable(env: Env) -> None:
    from kubeop.manager.runnable import Phase, Runnable

    assert isinstance(env.server, Runnable)
    assert env.server.phase is Phase.SERVERS and not env.server.needs_leader


async def test_a_server_without_a_core_group_answers_api_empty(env: Env) -> None:
    """A client talking to the server directly (not through kube-apiserver) discovers from /api."""
    async with env.as_user("alice") as s:
        code, legacy = await call(s, "GET", env.base + "/api")
        assert code == 200 and legacy["kind"] == "APIVersions" and legacy["versions"] == []
        aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
        async with s.get(env.base + "/api", headers={"Accept": aggregated}) as resp:
            assert resp.headers["Content-Type"].endswith("as=APIGroupDiscoveryList")
            assert orjson.loads(await resp.read())["items"] == []


async def test_an_update_needs_a_resource_version_and_a_fresh_storage_is_not_at_zero(env: Env) -> None:
    async with env.as_user("alice") as s:
        code, empty = await call(s, "GET", env.base + NS)
        assert code == 200 and empty["metadata"]["resourceVersion"] != "0"  # "0" means "any" to a watch
        code, made = await call(s, "POST", env.base + NS, widget("a"))
        del made["metadata"]["resourceVersion"]
        code, refused = await call(s, "PUT", env.base + NS + "/a", made)
        assert code == 422 and refused["reason"] == "Invalid"
        assert "metadata.resourceVersion" in refused["message"]
        assert refused["details"]["causes"][0]["field"] == "metadata.resourceVersion"


async def test_generate_name_is_checked_as_a_name_prefix(env: Env) -> None:
    async with env.as_user("alice") as s:
        body = widget("")
        body["metadata"] = {"generateName": "Bad_"}
        code, refused = await call(s, "POST", env.base + NS, body)
        assert code == 422 and "metadata.generateName: Invalid value 'Bad_'" in refused["message"]
        body["metadata"] = {"generateName": "web-"}
        code, made = await call(s, "POST", env.base + NS, body)
        assert code == 201 and made["metadata"]["name"].startswith("web-")
