"""The manager's HTTP endpoints: ``/healthz``, ``/readyz`` and ``/metrics`` (Prometheus text).

Each check is a named callable returning True/raising; ``/readyz?verbose`` lists them, like the
Kubernetes components do.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["Check", "ProbeServer", "parse_address"]

Check = Callable[[], bool | Awaitable[bool]]


def parse_address(address: str) -> tuple[str, int]:
    """``"127.0.0.1:8080"`` / ``":8080"`` (loopback) -> (host, port); a clear error otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(
            f"bind address {address!r} must look like HOST:PORT, e.g. 127.0.0.1:8080 (port 0: any)"
        )
    return host or "127.0.0.1", int(port)


class ProbeServer:
    """One aiohttp server for any of the three endpoints."""

    def __init__(self, address: str, *, registry: CollectorRegistry | None = None) -> None:
        self.host, self.port = parse_address(address)
        self.registry = registry
        self.health: dict[str, Check] = {"ping": lambda: True}
        self.ready: dict[str, Check] = {"ping": lambda: True}
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._health)
        app.router.add_get("/livez", self._health)
        app.router.add_get("/readyz", self._ready)
        if self.registry is not None:
            app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        server = site._server
        if server is not None and self.port == 0:
            sockets = getattr(server, "sockets", None) or []
            if sockets:
                self.port = sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @staticmethod
    async def _run(checks: dict[str, Check], request: web.Request) -> web.Response:
        lines = []
        ok = True
        for name, check in checks.items():
            try:
                result = check()
                if inspect.isawaitable(result):
                    result = await result
                passed = bool(result)
                reason = ""
            except Exception as exc:
                passed, reason = False, f": {exc}"
            ok = ok and passed
            lines.append(f"[{'+' if passed else '-'}]{name} {'ok' if passed else 'failed' + reason}")
        verbose = "verbose" in request.query
        text = "\n".join(lines) + "\n" if (verbose or not ok) else "ok"
        return web.Response(text=text, status=200 if ok else 500)

    async def _health(self, request: web.Request) -> web.Response:
        return await self._run(self.health, request)

    async def _ready(self, request: web.Request) -> web.Response:
        return await self._run(self.ready, request)

    async def _metrics(self, request: web.Request) -> web.Response:
        assert self.registry is not None
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
