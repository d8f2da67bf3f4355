"""Transport.probe: one GET, its status, no retries and no rate limit (health checks)."""

from __future__ import annotations

import pytest
from aiohttp import web

from kubeop.client.transport import ApiConnectionError

from .fakeapi import FakeApi


async def test_probe_returns_the_status_without_retrying(api: FakeApi) -> None:
    async def readyz(_: web.Request) -> web.Response:
        return web.Response(status=500, text="[-]etcd failed\nreadyz check failed")

    api.route("GET", "/readyz", readyz)
    async with api.client() as client:
        assert await client.transport.probe("/readyz") == 500
        assert len(api.calls("GET", "/readyz")) == 1  # a 5xx GET would be retried by request()

        api.route("GET", "/readyz", lambda _: _ok())
        assert await client.transport.probe() == 200


async def _ok() -> web.Response:
    return web.Response(text="ok")


async def test_probe_of_a_closed_port_raises_connection_error(api: FakeApi) -> None:
    client = api.client()
    await api.server.close()
    try:
        with pytest.raises(ApiConnectionError, match="cannot connect"):
            await client.transport.probe("/readyz", time_limit=1.0)
    finally:
        await client.close()
