"""ListWatch over a real Client against a loopback HTTP server: requests, headers, decoding."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from kubeop.cache import ListWatch
from kubeop.client import Client, ClientConfig
from kubeop.core import ApiResource

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")


class Api:
    def __init__(self) -> None:
        self.requests: list[web.Request] = []
        self.app = web.Application()
        self.app.router.add_get("/{tail:.*}", self.handle)
        self.server = TestServer(self.app, host="127.0.0.1")

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(request)
        metadata = "as=PartialObjectMetadata" in request.headers.get("Accept", "")
        item: dict[str, Any] = {"metadata": {"name": "a", "namespace": "x", "resourceVersion": "5"}}
        if metadata:
            item.update(kind="PartialObjectMetadata", apiVersion="meta.k8s.io/v1")
        else:
            item["data"] = {"k": "v"}
        if request.query.get("watch") != "true":
            body = {
                "kind": "ConfigMapList",
                "metadata": {"resourceVersion": "7", "continue": "tok"},
                "items": [item],
            }
            return web.Response(body=orjson.dumps(body), content_type="application/json")
        resp = web.StreamResponse()
        await resp.prepare(request)
        full = dict(item, kind="ConfigMap", apiVersion="v1", data={"full": "object, server ignored Accept"})
        for event in (
            {"type": "ADDED", "object": item if metadata else dict(item, kind="ConfigMap", apiVersion="v1")},
            {"type": "MODIFIED", "object": full},
            {
                "type": "BOOKMARK",
                "object": {"kind": "PartialObjectMetadata", "metadata": {"resourceVersion": "9"}},
            },
        ):
            await resp.write(orjson.dumps(event) + b"\n")
        return resp


@pytest.fixture
async def api() -> AsyncIterator[Api]:
    api = Api()
    await api.server.start_server()
    yield api
    await api.server.close()


@pytest.fixture
async def client(api: Api) -> AsyncIterator[Client]:
    async with Client(ClientConfig(server=str(api.server.make_url("")).rstrip("/"), qps=None)) as c:
        yield c


async def test_list_pages_fill_kind_and_use_selectors(api: Api, client: Client) -> None:
    lw = ListWatch(client, CM, namespace="x", label_selector={"app": "web"}, field_selector="metadata.name=a")
    page = await lw.list(limit=500, continue_=None, resource_version="0")
    assert page.resource_version == "7" and page.continue_ == "tok"
    assert page.items[0]["kind"] == "ConfigMap" and page.items[0]["apiVersion"] == "v1"
    req = api.requests[-1]
    assert req.path == "/api/v1/namespaces/x/configmaps"
    assert dict(req.query) == {
        "labelSelector": "app=web",
        "fieldSelector": "metadata.name=a",
        "limit": "500",
        "resourceVersion": "0",
    }
    assert req.headers["Accept"] == "application/json"
    assert lw.description == 'configmaps in namespace "x" with labels app=web with fields metadata.name=a'


async def test_no_namespace_means_all_namespaces(api: Api, client: Client) -> None:
    lw = ListWatch(client, CM)
    await lw.list(limit=None, continue_=None, resource_version=None)
    assert api.requests[-1].path == "/api/v1/configmaps"


async def test_watch_query(api: Api, client: Client) -> None:
    lw = ListWatch(client, CM, namespace="x")
    stream = await lw.watch(resource_version=None, timeout_seconds=321, send_initial_events=True)
    events = [e async for e in stream]
    assert [e.type for e in events] == ["ADDED", "MODIFIED", "BOOKMARK"]
    assert dict(api.requests[-1].query) == {
        "watch": "true",
        "resourceVersionMatch": "NotOlderThan",
        "allowWatchBookmarks": "true",
        "sendInitialEvents": "true",
        "timeoutSeconds": "321",
    }


async def test_metadata_only_negotiates_partial_objects_and_restores_the_kind(
    api: Api, client: Client
) -> None:
    lw = ListWatch(client, CM, metadata_only=True)
    page = await lw.list(limit=500, continue_=None, resource_version="0")
    assert (
        api.requests[-1]
        .headers["Accept"]
        .startswith("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
    )
    assert page.items == [
        {
            "metadata": {"name": "a", "namespace": "x", "resourceVersion": "5"},
            "kind": "ConfigMap",
            "apiVersion": "v1",
        }
    ]
    stream = await lw.watch(resource_version="7", timeout_seconds=300)
    events = [e async for e in stream]
    assert (
        api.requests[-1]
        .headers["Accept"]
        .startswith("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
    )
    added, modified, bookmark = events
    assert added.object["kind"] == "ConfigMap" and added.object["apiVersion"] == "v1"
    # A server that ignored the Accept header sent a full object: it is cut down to metadata.
    assert set(modified.object) == {"apiVersion", "kind", "metadata"}
    assert bookmark.object["kind"] == "PartialObjectMetadata"
    assert lw.description == "configmaps (metadata)"


async def test_resources_are_resolved_lazily(api: Api, client: Client) -> None:
    lw = ListWatch(client, "configmaps", namespace="x")  # discovery would happen on first use
    assert lw.description == 'configmaps in namespace "x"'
    assert api.requests == []


async def test_client_lists_and_watches_metadata_only(api: Api, client: Client) -> None:
    """The metadata-only mode lives in Client; ListWatch only passes it on."""
    page = await client.list(CM, namespace="x", metadata_only=True)
    assert api.requests[-1].headers["Accept"].startswith("application/json;as=PartialObjectMetadataList;")
    assert page.items == [
        {
            "metadata": {"name": "a", "namespace": "x", "resourceVersion": "5"},
            "kind": "ConfigMap",
            "apiVersion": "v1",
        }
    ]
    events = [e async for e in client.watch(CM, namespace="x", metadata_only=True)]
    assert api.requests[-1].headers["Accept"].startswith("application/json;as=PartialObjectMetadata;")
    assert [set(e.object) for e in events[:2]] == [{"apiVersion", "kind", "metadata"}] * 2
    full = await client.list(CM, namespace="x")
    assert api.requests[-1].headers["Accept"] == "application/json"
    assert full.items[0]["data"] == {"k": "v"}


async def test_metadata_only_refuses_a_model_class(client: Client) -> None:
    class ConfigMap:  # a model class: metadata-only objects could not be one
        api_version = "v1"
        kind = "ConfigMap"
        resource = CM

        @classmethod
        def model_validate(cls, data: Any) -> Any:
            return data

    with pytest.raises(TypeError, match=r"metadata_only=True gives .* not ConfigMap instances"):
        await client.list(ConfigMap, metadata_only=True)
    with pytest.raises(TypeError, match="not ConfigMap instances"):
        await anext(client.watch(ConfigMap, metadata_only=True))
