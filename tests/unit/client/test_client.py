"""Client and transport against a fake API server on loopback: verbs, errors, retries, auth refresh."""

from __future__ import annotations

import asyncio
import socket
from typing import Any, ClassVar

import orjson
import pydantic
import pytest
from aiohttp import web

from kubeop.client.auth import Credentials
from kubeop.client.client import Client
from kubeop.client.config import ClientConfig
from kubeop.client.transport import ApiConnectionError, HttpTransport
from kubeop.core.errors import Conflict, Expired, Gone, Invalid, NotFound, ServiceUnavailable, TooManyRequests
from kubeop.core.patch import PatchType
from kubeop.core.resource import ApiResource
from kubeop.core.selectors import Selectors

from .fakeapi import FakeApi, json, status

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
CM_PATH = "/api/v1/namespaces/default/configmaps"


class ConfigMap(pydantic.BaseModel):
    api_version: ClassVar[str] = "v1"
    kind: ClassVar[str] = "ConfigMap"
    resource: ClassVar[ApiResource] = CM
    metadata: dict[str, Any]
    data: dict[str, str] = {}


def cm(name: str, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"},
        "data": data,
    }


async def test_get_and_not_found(api: FakeApi) -> None:
    api.reply("GET", f"{CM_PATH}/a", cm("a", k="v"))
    async with api.client() as client:
        assert await client.get(CM, "a") == cm("a", k="v")
        with pytest.raises(NotFound) as info:
            await client.get(CM, "missing")
        assert f"GET {CM_PATH}/missing" in str(info.value)
        assert await client.get_or_none(CM, "missing") is None
        typed = await client.get(ConfigMap, "a")
        assert isinstance(typed, ConfigMap) and typed.data == {"k": "v"}


async def test_list_fills_kind_and_pages(api: FakeApi) -> None:
    async def handler(request: web.Request) -> web.Response:
        token = request.query.get("continue")
        assert request.query["limit"] == "2"
        if not token:
            return json(
                {
                    "kind": "ConfigMapList",
                    "metadata": {"resourceVersion": "10", "continue": "p2", "remainingItemCount": 1},
                    "items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}],
                }
            )
        return json(
            {
                "kind": "ConfigMapList",
                "metadata": {"resourceVersion": "10"},
                "items": [{"metadata": {"name": "c"}}],
            }
        )

    api.route("GET", CM_PATH, handler)
    async with api.client() as client:
        page = await client.list(CM, limit=2)
        assert (page.resource_version, page.continue_, page.remaining_item_count) == ("10", "p2", 1)
        assert page.items[0] == {"metadata": {"name": "a"}, "apiVersion": "v1", "kind": "ConfigMap"}
        everything = await client.list_all(CM, page_size=2)
        assert [i["metadata"]["name"] for i in everything] == ["a", "b", "c"]
        assert everything.resource_version == "10"
        typed = await client.list(ConfigMap, limit=2)
        assert isinstance(typed.items[0], ConfigMap)


async def test_collection_calls_take_selectors_beside_the_two_keywords(api: FakeApi) -> None:
    seen: list[str] = []
    events = b"".join(orjson.dumps(e) + b"\n" for e in [{"type": "ADDED", "object": cm("a")}])

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.append(request.query_string)
        if request.method == "DELETE":
            return json({"kind": "Status", "status": "Success"})
        if request.query.get("watch") != "true":
            return json({"kind": "ConfigMapList", "metadata": {"resourceVersion": "1"}, "items": [cm("a")]})
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(events)
        await resp.write_eof()
        return resp

    api.route("GET", CM_PATH, handler)
    api.route("DELETE", CM_PATH, handler)
    both = Selectors.of({"app": "web"}, "metadata.name=a")
    async with api.client() as client:
        for selection in (
            {"label_selector": {"app": "web"}, "field_selector": "metadata.name=a"},
            {"selectors": both},
            {"selectors": Selectors(labels="app=web"), "field_selector": {"metadata.name": "a"}},
        ):
            await client.list(CM, **selection)  # type: ignore[arg-type]
            await client.list_all(CM, **selection)  # type: ignore[arg-type]
            _ = [p async for p in client.list_stream(CM, **selection)]  # type: ignore[arg-type]
            _ = [e async for e in client.watch(CM, **selection)]  # type: ignore[arg-type]
            await client.delete_collection(CM, **selection)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"Client\.list\(\) got an unexpected keyword argument 'labels'"):
            await client.list(CM, labels="app=web")  # type: ignore[call-overload]
    selected = "labelSelector=app%3Dweb&fieldSelector=metadata.name%3Da"
    assert len(seen) == 15 and all(selected in q for q in seen), seen


async def test_list_shares_repeated_metadata_strings(api: FakeApi) -> None:
    def item(name: str) -> dict[str, Any]:
        managed = {"manager": "m", "operation": "Update", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z"}
        return {
            "metadata": {
                "name": name,
                "namespace": "team-a",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "managedFields": [{**managed, "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}],
            },
            "data": {"k": "same value"},
        }

    api.reply("GET", CM_PATH, {"kind": "ConfigMapList", "metadata": {}, "items": [item("a"), item("b")]})
    async with api.client() as client:
        a, b = (await client.list(CM)).items
    assert a == {**item("a"), "apiVersion": "v1", "kind": "ConfigMap"}
    for key in ("namespace", "creationTimestamp"):
        assert a["metadata"][key] is b["metadata"][key]
    ma, mb = a["metadata"]["managedFields"][0], b["metadata"]["managedFields"][0]
    for key in ("manager", "operation", "apiVersion", "time", "fieldsType"):
        assert ma[key] is mb[key]
    assert ma["time"] is a["metadata"]["creationTimestamp"]
    assert ma["fieldsV1"] is not mb["fieldsV1"]  # containers stay separate: callers mutate them
    assert a["data"]["k"] is not b["data"]["k"]  # object data is left as decoded


async def test_writes_send_the_right_requests(api: FakeApi) -> None:
    seen: list[tuple[str, str, str, dict[str, Any] | list[Any]]] = []

    async def echo(request: web.Request) -> web.Response:
        body = orjson.loads(await request.read())
        seen.append((request.method, request.path_qs, request.content_type, body))
        return json(body if request.method != "DELETE" else {"kind": "Status", "status": "Success"})

    for method, path in [
        ("POST", CM_PATH),
        ("PUT", f"{CM_PATH}/a"),
        ("PUT", f"{CM_PATH}/a/status"),
        ("PATCH", f"{CM_PATH}/a"),
        ("DELETE", f"{CM_PATH}/a"),
        ("DELETE", CM_PATH),
    ]:
        api.route(method, path, echo)
    async with api.client() as client:
        created = await client.create(cm("a"), resource=CM, dry_run=True)
        assert created == cm("a")
        model = await client.create(ConfigMap(metadata={"name": "a"}))
        assert isinstance(model, ConfigMap)
        await client.update(cm("a"), resource=CM)
        await client.update_status(cm("a"), resource=CM)
        await client.patch(CM, "a", [{"op": "add", "path": "/data/x", "value": "1"}], type=PatchType.JSON)
        await client.apply(cm("a"), field_manager="me", force=True, resource=CM)
        await client.delete(CM, "a", propagation_policy="Foreground", precondition_resource_version="5")
        await client.delete_collection(CM, label_selector={"app": "x"})
    assert [(m, p, t) for m, p, t, _ in seen] == [
        ("POST", f"{CM_PATH}?dryRun=All", "application/json"),
        ("POST", CM_PATH, "application/json"),
        ("PUT", f"{CM_PATH}/a", "application/json"),
        ("PUT", f"{CM_PATH}/a/status", "application/json"),
        ("PATCH", f"{CM_PATH}/a", "application/json-patch+json"),
        ("PATCH", f"{CM_PATH}/a?fieldManager=me&force=true", "application/apply-patch+yaml"),
        ("DELETE", f"{CM_PATH}/a", "application/json"),
        ("DELETE", f"{CM_PATH}?labelSelector=app%3Dx", "application/json"),
    ]
    assert seen[1][3] == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {}}
    assert seen[6][3]["preconditions"] == {"resourceVersion": "5"}  # type: ignore[call-overload]


async def test_conflict_and_invalid_are_typed(api: FakeApi) -> None:
    api.route(
        "PUT",
        f"{CM_PATH}/a",
        lambda _: _async(
            status(
                409,
                "Conflict",
                'Operation cannot be fulfilled on configmaps "a": the object has been modified',
            )
        ),
    )
    api.route(
        "POST",
        CM_PATH,
        lambda _: _async(
            status(
                422,
                "Invalid",
                'ConfigMap "a" is invalid',
                causes=[{"field": "data", "reason": "FieldValueInvalid", "message": "bad"}],
            )
        ),
    )
    async with api.client() as client:
        with pytest.raises(Conflict, match='configmaps "a": the object has been modified'):
            await client.update(cm("a"), resource=CM)
        with pytest.raises(Invalid) as info:
            await client.create(cm("a"), resource=CM)
        assert info.value.causes[0].field == "data"


async def _async(value: web.Response) -> web.Response:
    return value


async def test_retries_429_for_any_method_but_5xx_only_for_reads(api: FakeApi) -> None:
    attempts = {"n": 0}

    async def busy_then_ok(request: web.Request) -> web.Response:
        attempts["n"] += 1
        if attempts["n"] < 3:
            return json(
                {"kind": "Status", "code": 429, "reason": "TooManyRequests", "message": "slow down"},
                429,
                {"Retry-After": "0"},
            )
        return json(cm("a"))

    api.route("POST", CM_PATH, busy_then_ok)
    api.route("GET", f"{CM_PATH}/flaky", lambda _: _async(status(503, "ServiceUnavailable", "try later")))
    api.route("PUT", f"{CM_PATH}/flaky", lambda _: _async(status(503, "ServiceUnavailable", "try later")))
    api.route(
        "GET",
        f"{CM_PATH}/busy",
        lambda _: _async(
            json(
                {
                    "kind": "Status",
                    "code": 429,
                    "reason": "TooManyRequests",
                    "details": {"retryAfterSeconds": 0},
                },
                429,
                {"Retry-After": "0"},
            )
        ),
    )
    async with api.client() as client:
        assert await client.create(cm("a"), resource=CM) == cm("a")
        assert attempts["n"] == 3
        with pytest.raises(ServiceUnavailable):
            await client.get(CM, "flaky")
        assert len(api.calls("GET", f"{CM_PATH}/flaky")) == 3  # bounded: max_attempts
        with pytest.raises(ServiceUnavailable):
            await client.update(cm("flaky"), resource=CM)
        assert len(api.calls("PUT", f"{CM_PATH}/flaky")) == 1  # a write is never replayed on 5xx
        with pytest.raises(TooManyRequests) as info:
            await client.get(CM, "busy")
        assert info.value.retry_after == 0


class RotatingAuth:
    def __init__(self) -> None:
        self.token = "old"
        self.refreshes = 0

    async def credentials(self) -> Credentials:
        return Credentials({"Authorization": f"Bearer {self.token}"})

    async def refresh(self) -> bool:
        self.refreshes += 1
        self.token = "new"
        return True


async def test_refreshes_credentials_once_on_401(api: FakeApi) -> None:
    async def needs_new_token(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != "Bearer new":
            return status(401, "Unauthorized", "Unauthorized")
        return json(cm("a"))

    api.route("GET", f"{CM_PATH}/a", needs_new_token)
    auth = RotatingAuth()
    transport = HttpTransport(ClientConfig(server=api.url, qps=None), auth=auth)
    async with Client(transport=transport) as client:
        assert await client.get(CM, "a") == cm("a")
        assert auth.refreshes == 1


async def test_unreachable_server_is_one_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = ClientConfig(
        server=f"http://127.0.0.1:{port}", qps=None, max_retries=0, source="kubeconfig /x (context 'c')"
    )
    async with Client(config) as client:
        with pytest.raises(ApiConnectionError) as info:
            await client.get(CM, "a")
    text = str(info.value)
    assert f"cannot connect to API server http://127.0.0.1:{port} (kubeconfig /x (context 'c'))" in text
    assert "GET /api/v1/namespaces/default/configmaps/a" in text


async def test_watch_parses_split_and_long_lines(api: FakeApi) -> None:
    big = "x" * 3_000_000
    events = [
        {"type": "ADDED", "object": cm("a", v=big)},
        {"type": "MODIFIED", "object": cm("a", v="2")},
        {"type": "BOOKMARK", "object": {"kind": "ConfigMap", "metadata": {"resourceVersion": "12"}}},
        {"type": "DELETED", "object": cm("a")},
    ]
    payload = b"".join(orjson.dumps(e) + b"\n" for e in events)

    async def stream(request: web.Request) -> web.StreamResponse:
        assert request.query["watch"] == "true" and request.query["allowWatchBookmarks"] == "true"
        resp = web.StreamResponse()
        await resp.prepare(request)
        for i in range(0, len(payload), 7777):  # chunks that cut lines anywhere
            await resp.write(payload[i : i + 7777])
        await resp.write_eof()
        return resp

    api.route("GET", CM_PATH, stream)
    async with api.client() as client:
        got = [e async for e in client.watch(CM, resource_version="10", timeout_seconds=5)]
    assert [e.type for e in got] == ["ADDED", "MODIFIED", "BOOKMARK", "DELETED"]
    assert got[0].object["data"]["v"] == big
    assert got[2].resource_version == "12"


async def test_watch_error_event_raises_gone(api: FakeApi) -> None:
    async def stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(orjson.dumps({"type": "ADDED", "object": cm("a")}) + b"\n")
        error = {
            "kind": "Status",
            "status": "Failure",
            "code": 410,
            "reason": "Expired",
            "message": "too old resource version: 1 (50)",
        }
        await resp.write(orjson.dumps({"type": "ERROR", "object": error}) + b"\n")
        await resp.write_eof()
        return resp

    api.route("GET", CM_PATH, stream)
    async with api.client() as client:
        seen = []
        with pytest.raises(Expired, match="too old resource version"):
            async for event in client.watch(CM, resource_version="1"):
                seen.append(event.type)
        assert seen == ["ADDED"]
        api.route("GET", CM_PATH, lambda _: _async(status(410, "Gone", "gone")))
        with pytest.raises(Gone):
            async for _ in client.watch(CM, resource_version="1"):
                pass


async def test_watch_break_closes_the_stream(api: FakeApi) -> None:
    closed = asyncio.Event()

    async def endless(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        try:
            while True:
                await resp.write(orjson.dumps({"type": "ADDED", "object": cm("a")}) + b"\n")
                await asyncio.sleep(0.01)
        except (ConnectionError, asyncio.CancelledError):
            closed.set()
            raise

    api.route("GET", CM_PATH, endless)
    async with api.client() as client:
        async for _ in client.watch(CM):
            break
        await asyncio.wait_for(closed.wait(), 5)


async def test_typed_watch(api: FakeApi) -> None:
    async def stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        await resp.write(orjson.dumps({"type": "ADDED", "object": cm("a", k="v")}) + b"\n")
        await resp.write(
            orjson.dumps({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "3"}}}) + b"\n"
        )
        await resp.write_eof()
        return resp

    api.route("GET", CM_PATH, stream)
    async with api.client() as client:
        got = [e async for e in client.watch(ConfigMap)]
    assert isinstance(got[0].object, ConfigMap) and got[0].object.data == {"k": "v"}
    assert got[1].type == "BOOKMARK" and got[1].resource_version == "3"


async def test_requests_go_through_the_rate_limiter(api: FakeApi) -> None:
    api.reply("GET", f"{CM_PATH}/a", cm("a"))

    class CountingLimiter:
        def __init__(self) -> None:
            self.acquired = 0

        async def acquire(self) -> float:
            self.acquired += 1
            return 0.0

    limiter = CountingLimiter()
    transport = HttpTransport(ClientConfig(server=api.url), limiter=limiter)  # type: ignore[arg-type]
    async with Client(transport=transport) as client:
        await asyncio.gather(*(client.get(CM, "a") for _ in range(5)))
    assert limiter.acquired == 5
    assert HttpTransport(ClientConfig(server=api.url, qps=None)).limiter is None
    assert HttpTransport(ClientConfig(server=api.url, qps=5, burst=7)).limiter.burst == 7  # type: ignore[union-attr]


async def test_closed_client_refuses_requests(api: FakeApi) -> None:
    client = api.client()
    await client.close()
    with pytest.raises(RuntimeError, match="closed"):
        await client.get(CM, "a")


async def test_new_client_certificate_replaces_the_pool(api: FakeApi) -> None:
    api.reply("GET", f"{CM_PATH}/a", cm("a"))

    class CertRotatingAuth:
        def __init__(self) -> None:
            self.cert = (b"cert-1", b"key-1")

        async def credentials(self) -> Credentials:
            return Credentials({}, self.cert)

        async def refresh(self) -> bool:
            return False

    auth = CertRotatingAuth()
    transport = HttpTransport(ClientConfig(server=api.url, qps=None), auth=auth)
    async with Client(transport=transport) as client:
        await client.get(CM, "a")
        first = transport._session
        await client.get(CM, "a")
        assert transport._session is first  # same identity: same pool
        auth.cert = (b"cert-2", b"key-2")
        await client.get(CM, "a")
        assert transport._session is not first and first in transport._retired
    assert first is not None and first.closed and not transport._retiring


@pytest.mark.parametrize("gzip", [False, True])
async def test_list_stream_yields_items_while_the_body_arrives(api: FakeApi, gzip: bool) -> None:
    import zlib

    items = [
        {"metadata": {"name": f"cm{i}", "namespace": "default"}, "data": {"v": "x" * 50}} for i in range(200)
    ]
    body = orjson.dumps(
        {"kind": "ConfigMapList", "metadata": {"resourceVersion": "9", "continue": "c2"}, "items": items}
    )
    sent_all = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        assert request.query["limit"] == "500" and request.query["resourceVersion"] == "0"
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        data = body
        if gzip:
            resp.headers["Content-Encoding"] = "gzip"
            comp = zlib.compressobj(wbits=31)
            data = comp.compress(body) + comp.flush()
        await resp.prepare(request)
        half = len(data) // 2
        await resp.write(data[:half])
        await asyncio.wait_for(sent_all.wait(), 5)  # the client has items before the rest is sent
        await resp.write(data[half:])
        await resp.write_eof()
        return resp

    api.route("GET", CM_PATH, handler)
    async with api.client() as client:
        got: list[Any] = []
        async for part in client.list_stream(CM, limit=500, resource_version="0"):
            assert (part.resource_version, part.continue_) == ("9", "c2")
            got += part.items
            sent_all.set()
        assert got == [dict(i, apiVersion="v1", kind="ConfigMap") for i in items]


async def test_list_stream_of_a_malformed_body_is_an_api_error(api: FakeApi) -> None:
    from kubeop.core.errors import ApiError

    async def handler(request: web.Request) -> web.Response:
        return web.Response(
            body=b'{"kind":"ConfigMapList","items":[{"metadata":{}},', content_type="application/json"
        )

    api.route("GET", CM_PATH, handler)
    async with api.client() as client:
        with pytest.raises(ApiError, match="malformed list response"):
            async for _ in client.list_stream(CM):
                pass


async def test_list_stream_over_a_transport_without_it_lists_in_one_piece() -> None:
    from kubeop.client.discovery import Discovery

    class OldTransport:
        config = ClientConfig(server="https://fake", namespace="default")

        async def request(self, req: Any) -> Any:
            return {
                "kind": "ConfigMapList",
                "metadata": {"resourceVersion": "3"},
                "items": [{"metadata": {"name": "a"}}],
            }

    transport = OldTransport()
    client = Client(transport=transport, discovery=Discovery(transport))  # type: ignore[arg-type]
    parts = [p async for p in client.list_stream(CM)]
    assert [(p.resource_version, p.items) for p in parts] == [
        ("3", [{"metadata": {"name": "a"}, "apiVersion": "v1", "kind": "ConfigMap"}])
    ]
