"""A scriptable fake API server on loopback (aiohttp.web) for transport and client tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from aiohttp.test_utils import TestServer

from kubeop.client.client import Client
from kubeop.client.config import ClientConfig
from kubeop.client.retry import RetryPolicy
from kubeop.client.transport import HttpTransport

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def status(code: int, reason: str, message: str, **details: Any) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }
    if details:
        body["details"] = details
    return web.Response(status=code, body=orjson.dumps(body), content_type="application/json")


def json(body: Any, code: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=code, body=orjson.dumps(body), content_type="application/json", headers=headers
    )


AGGREGATED_CORE = {
    "kind": "APIGroupDiscoveryList",
    "apiVersion": "apidiscovery.k8s.io/v2",
    "items": [
        {
            "metadata": {},
            "versions": [
                {
                    "version": "v1",
                    "resources": [
                        {
                            "resource": "configmaps",
                            "responseKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
                            "scope": "Namespaced",
                            "singularResource": "configmap",
                            "shortNames": ["cm"],
                            "verbs": ["get", "list"],
                        },
                        {
                            "resource": "nodes",
                            "responseKind": {"group": "", "version": "v1", "kind": "Node"},
                            "scope": "Cluster",
                            "singularResource": "node",
                            "shortNames": ["no"],
                            "subresources": [{"subresource": "status"}],
                        },
                    ],
                }
            ],
        }
    ],
}


def aggregated_groups(extra: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "items": [
            {
                "metadata": {"name": "apps"},
                "versions": [
                    {
                        "version": "v1",
                        "resources": [
                            {
                                "resource": "deployments",
                                "responseKind": {"group": "", "version": "", "kind": "Deployment"},
                                "scope": "Namespaced",
                                "singularResource": "deployment",
                                "shortNames": ["deploy"],
                                "subresources": [{"subresource": "scale"}, {"subresource": "status"}],
                            }
                        ],
                    }
                ],
            },
            *(extra or []),
        ],
    }


class FakeApi:
    """Routes are added per test: ``api.route("GET", "/api/v1/...", handler)``; requests are logged."""

    def __init__(self) -> None:
        self.app = web.Application()
        self.routes: dict[tuple[str, str], Handler] = {}
        self.log: list[web.Request] = []
        self.app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self.server = TestServer(self.app, host="127.0.0.1")

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.log.append(request)
        handler = self.routes.get((request.method, request.path))
        if handler is None:
            return status(
                404, "NotFound", f"the server could not find the requested resource ({request.path})"
            )
        return await handler(request)

    def route(self, method: str, path: str, handler: Handler) -> None:
        self.routes[(method, path)] = handler

    def reply(self, method: str, path: str, body: Any, code: int = 200) -> None:
        async def handler(_: web.Request) -> web.Response:
            return json(body, code)

        self.route(method, path, handler)

    def calls(self, method: str, path: str) -> list[web.Request]:
        return [r for r in self.log if r.method == method and r.path == path]

    @property
    def url(self) -> str:
        return str(self.server.make_url("")).rstrip("/")

    def client(self, **options: Any) -> Client:
        config = ClientConfig(server=self.url, qps=None, **options)
        retry = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.01)
        return Client(transport=HttpTransport(config, retry=retry))


async def start() -> AsyncIterator[FakeApi]:
    api = FakeApi()
    await api.server.start_server()
    try:
        yield api
    finally:
        await api.server.close()
