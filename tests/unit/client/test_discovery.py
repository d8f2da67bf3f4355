"""Discovery (aggregated and legacy), the REST mapper, and refresh on a miss."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from kubeop.client.discovery import UnknownResource
from kubeop.client.restmapper import RESTMapper
from kubeop.core.gvk import GroupVersionKind
from kubeop.core.resource import ApiResource

from .fakeapi import AGGREGATED_CORE, FakeApi, aggregated_groups, json

WIDGETS = {
    "metadata": {"name": "example.com"},
    "versions": [
        {
            "version": "v2",
            "resources": [
                {
                    "resource": "widgets",
                    "responseKind": {"kind": "Widget"},
                    "scope": "Namespaced",
                    "singularResource": "widget",
                    "shortNames": ["wd"],
                }
            ],
        },
        {
            "version": "v1",
            "resources": [
                {
                    "resource": "widgets",
                    "responseKind": {"kind": "Widget"},
                    "scope": "Namespaced",
                    "singularResource": "widget",
                }
            ],
        },
    ],
}


def serve_aggregated(api: FakeApi, groups: dict[str, Any]) -> None:
    async def core(request: web.Request) -> web.Response:
        assert "as=APIGroupDiscoveryList" in request.headers["Accept"]
        return json(AGGREGATED_CORE)

    async def apis(request: web.Request) -> web.Response:
        return json(groups)

    api.route("GET", "/api", core)
    api.route("GET", "/apis", apis)


async def test_aggregated_discovery_and_lookups(api: FakeApi) -> None:
    serve_aggregated(api, aggregated_groups([WIDGETS]))
    async with api.client() as client:
        deploy = await client.resource(GroupVersionKind("apps", "v1", "Deployment"))
        assert deploy == ApiResource(
            "apps",
            "v1",
            "deployments",
            kind="Deployment",
            namespaced=True,
            singular="deployment",
            short_names=("deploy",),
            subresources=("scale", "status"),
        )
        node = await client.resource("no")
        assert node.plural == "nodes" and not node.namespaced
        assert (await client.resource("cm")).kind == "ConfigMap"
        # Without a version, the group's preferred version (first listed) is used.
        assert (await client.resource(GroupVersionKind("example.com", "", "Widget"))).version == "v2"
        assert (await client.resource("widgets.v1.example.com")).version == "v1"
        assert (await client.resource("widget.example.com")).version == "v2"
        assert (await client.resource("Deployment")).group == "apps"
        assert client.discovery.refreshes == 1


async def test_refresh_on_miss_finds_new_crds(api: FakeApi) -> None:
    groups = aggregated_groups()
    serve_aggregated(api, groups)
    async with api.client() as client:
        await client.resource("deployments")
        groups["items"].append(WIDGETS)  # a CRD appears after the client started
        widget = await client.resource(GroupVersionKind("example.com", "v1", "Widget"))
        assert widget.plural == "widgets"
        assert client.discovery.refreshes == 2
        with pytest.raises(
            UnknownResource,
            match=r"unknown kind 'Gadget' in apiVersion 'example.com/v1'.*in group 'example.com': Widget",
        ):
            await client.resource(GroupVersionKind("example.com", "v1", "Gadget"))
        with pytest.raises(UnknownResource, match="doesn't have a resource type 'nope'"):
            await client.resource("nope")
        # Misses refresh at most 5 times in a burst: a loop over a missing kind stays cheap.
        for _ in range(10):
            with pytest.raises(UnknownResource):
                await client.resource("nope")
        assert client.discovery.refreshes <= 2 + 5


async def test_legacy_discovery(api: FakeApi) -> None:
    api.reply("GET", "/api", {"kind": "APIVersions", "versions": ["v1"]})
    api.reply(
        "GET",
        "/apis",
        {
            "kind": "APIGroupList",
            "groups": [
                {
                    "name": "apps",
                    "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
                    "preferredVersion": {"version": "v1"},
                },
                {
                    "name": "metrics.k8s.io",
                    "versions": [{"version": "v1beta1"}],
                    "preferredVersion": {"version": "v1beta1"},
                },
            ],
        },
    )
    api.reply(
        "GET",
        "/api/v1",
        {
            "resources": [
                {
                    "name": "pods",
                    "singularName": "pod",
                    "namespaced": True,
                    "kind": "Pod",
                    "shortNames": ["po"],
                },
                {"name": "pods/status", "namespaced": True, "kind": "Pod"},
            ]
        },
    )
    api.reply(
        "GET",
        "/apis/apps/v1",
        {
            "resources": [
                {"name": "deployments", "namespaced": True, "kind": "Deployment"},
                {"name": "deployments/scale", "namespaced": True, "kind": "Scale"},
            ]
        },
    )
    # /apis/metrics.k8s.io/v1beta1 is not served (404): discovery skips it instead of failing.
    async with api.client() as client:
        pods = await client.resource("po")
        assert (pods.plural, pods.subresources) == ("pods", ("status",))
        deploy = await client.resource(GroupVersionKind("apps", "v1", "Deployment"))
        assert deploy.subresources == ("scale",)


def test_mapper_prefers_core_group_for_ambiguous_names() -> None:
    mapper = RESTMapper(
        [
            ApiResource("events.k8s.io", "v1", "events", kind="Event", singular="event", short_names=("ev",)),
            ApiResource("", "v1", "events", kind="Event", singular="event", short_names=("ev",)),
        ],
        {"events.k8s.io": ["v1"], "": ["v1"]},
    )
    assert mapper.find("events").group == ""  # type: ignore[union-attr]
    assert mapper.find("events.events.k8s.io").group == "events.k8s.io"  # type: ignore[union-attr]
    assert mapper.find("nothing") is None
    assert mapper.for_kind("", "Event") is not None and mapper.for_kind("", "Event", "v2") is None
