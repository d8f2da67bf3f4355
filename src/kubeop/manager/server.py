"""The manager's HTTP endpoints: ``/healthz``, ``/livez``, ``/readyz`` and ``/metrics``.

Each check is a named callable returning True/raising; ``/readyz?verbose`` lists them, like the
Kubernetes components do. ``/metrics`` serves the Prometheus text format, without the
``*_created`` series prometheus_client adds to counters and histograms (Go's client exports none;
a dashboard made for controller-runtime queries none, and each doubles a counter's series).

The server is kubeop's small HTTP core (``kubeop.client.httpserver``, on llhttp, shared with the
webhook server) rather than a web framework: it answers GETs from kubelet probes and a Prometheus
scraper, and importing a framework for that cost an operator ~14 MB of RSS (aiohttp). GET and
HEAD only, no request bodies, keep-alive; at most ``max_connections`` connections (default 64:
over it the one idle the longest is closed for the new one), a request head within 5 s, an idle
connection closed after 60 s.
"""

from __future__ import annotations

import inspect
import ipaddress
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubeop.client.httpserver import Authorize, HttpServer, Request, Response

# The HTTP core (kubeop.client.httpserver, on llhttp) loads with the first ProbeServer: a manager
# that serves no probes and no metrics never imports it.

__all__ = ["Check", "ProbeServer", "Route", "is_loopback", "parse_address"]

log = logging.getLogger("kubeop.manager.server")

Check = Callable[[], bool | Awaitable[bool]]
Route = Callable[[], Awaitable[tuple[int, bytes, str]]]
"""An extra endpoint: answers (status, body, content type) to a GET of its path."""

DEFAULT_MAX_CONNECTIONS = 64
_IDLE_SECONDS = 60.0
_TEXT = "text/plain; charset=utf-8"
_LOOPBACK_NAMES = ("localhost", "localhost.")


def parse_address(address: str) -> tuple[str, int]:
    """``"127.0.0.1:8080"`` / ``":8080"`` (loopback) / ``"[::1]:8080"`` -> (host, port); ``"*:8080"``
    (all interfaces) -> ("*", 8080); a clear error otherwise."""
    from kubeop.client.httpserver import parse_address as _parse_address

    host, port = _parse_address(address)
    return ("*" if host is None else host), port


def is_loopback(host: str) -> bool:
    """Whether ``host`` (of :func:`parse_address`) is this machine only (or this pod)."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class ProbeServer:
    """One HTTP/1.1 server for any of the endpoints (keep-alive, GET and HEAD only)."""

    def __init__(
        self,
        address: str,
        *,
        registry: CollectorRegistry | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        tls: Callable[[], ssl.SSLContext] | None = None,
        authorize: Authorize | None = None,
    ) -> None:
        from kubeop.client.httpserver import Limits
        from kubeop.client.httpserver import Route as _Route
        from kubeop.client.httpserver import parse_address as _parse_address

        self.host, self.port = _parse_address(address)
        self.registry = registry
        self.health: dict[str, Check] = {"ping": lambda: True}
        self.ready: dict[str, Check] = {"ping": lambda: True}
        self.routes: dict[str, Route] = {}
        """Extra endpoints by path (they take precedence over the built-in ones)."""
        self._limits = Limits(
            max_connections=max_connections, max_bytes_in_flight=0, idle_timeout=_IDLE_SECONDS
        )
        self._route = _Route(self._answer, authorize=authorize)
        self._tls = tls
        self._http: HttpServer | None = None

    async def start(self) -> None:
        """Start serving on the server's address."""
        from kubeop.client.httpserver import HttpServer

        self._http = HttpServer(
            lambda _path: self._route,
            self.host,
            self.port,
            name="probe server",
            log=log,
            limits=self._limits,
            tls=self._tls,
        )
        await self._http.start()
        self.port = self._http.port

    async def stop(self) -> None:
        """Stop serving; stopping a stopped server does nothing."""
        if self._http is None:
            return
        await self._http.stop()
        self._http = None

    async def _answer(self, request: Request) -> Response:
        from kubeop.client.httpserver import Response  # loaded by __init__: a dictionary look-up

        status, body, content_type = await self._route_for(
            request.path, parse_qs(request.query, keep_blank_values=True)
        )
        return Response(status, body, content_type)

    async def _route_for(self, path: str, query: dict[str, list[str]]) -> tuple[int, bytes, str]:
        route = self.routes.get(path)
        if route is not None:
            return await route()
        if path in ("/healthz", "/livez"):
            return await self._run(self.health, "verbose" in query)
        if path == "/readyz":
            return await self._run(self.ready, "verbose" in query)
        if path == "/metrics" and self.registry is not None:
            from kubeop.manager._exposition import CONTENT_TYPE_LATEST, exposition  # on first scrape

            return 200, exposition(self.registry), CONTENT_TYPE_LATEST
        return 404, b"404: not found\n", _TEXT

    @staticmethod
    async def _run(checks: dict[str, Check], verbose: bool) -> tuple[int, bytes, str]:
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
        text = "\n".join(lines) + "\n" if (verbose or not ok) else "ok"
        return (200 if ok else 500), text.encode(), _TEXT
