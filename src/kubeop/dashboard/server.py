"""The dashboard's HTTP server: its page and static files, the pages' JSON, and their event streams.

    GET /                     the page (static/index.html; the pages are tabs of it)
    GET /static/<file>        its script and style sheet
    GET /api/overview         the overview's data (JSON); /api/errors; /api/object?kind=&namespace=&name=
    GET /events/overview      the same as server-sent events, a snapshot each refresh while it changes;
                              /events/errors; /events/object?kind=&namespace=&name=

GET and HEAD only: the dashboard shows, it changes nothing. ``authorize`` (given when the
dashboard is exposed beyond loopback) runs before every route, the page and its files included.
Without it on a loopback address, a request must name this machine in its ``Host`` header
(``localhost``, ``127.0.0.1``, ``[::1]``, any port): a web page whose own name an attacker points
at 127.0.0.1 (DNS rebinding) is 403, so it cannot read the pages through the browser.

Every answer forbids what the pages do not need (``Content-Security-Policy``: scripts, styles and
connections from this origin only, no inline script, no framing; ``X-Frame-Options``, no
``Referer``); the script builds the pages with DOM text nodes, never ``innerHTML``, as everything
shown (errors, log lines, Events) is user-controlled text.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
from collections.abc import Callable
from importlib import resources
from typing import Any
from urllib.parse import parse_qs

import orjson

from kubeop.client.httpserver import Authorize, HttpServer, Limits, Request, Response, Route
from kubeop.client.httpserver import parse_address as _parse_address
from kubeop.dashboard import aggregate, sse
from kubeop.dashboard.aggregate import Sources
from kubeop.dashboard.recorder import Recorder

__all__ = ["DashboardServer"]

log = logging.getLogger("kubeop.dashboard")

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
_JSON = "application/json"
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HEADERS = (
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", "no-store"),
    ("Content-Security-Policy", _CSP),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "no-referrer"),
    ("Cross-Origin-Resource-Policy", "same-origin"),
)
_NOT_FOUND = Response(404, b"404: not found\n", headers=_HEADERS)
_LOCAL_NAMES = frozenset({"localhost", "localhost."})
_MAX_CONNECTIONS = 32
_OBJECT_REFRESH = 2.0  # the object page also lists Events (an API call): not faster than this


def _static(name: str) -> bytes | None:
    if "/" in name or name.startswith(".") or not any(name.endswith(ext) for ext in _TYPES):
        return None
    try:
        return (resources.files("kubeop.dashboard") / "static" / name).read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return None


class DashboardServer:
    """Serves the dashboard on ``address`` (see the module docstring)."""

    def __init__(
        self,
        recorder: Recorder,
        sources: Sources,
        address: str,
        *,
        refresh: float = 1.0,
        tls: Callable[[], ssl.SSLContext] | None = None,
        authorize: Authorize | None = None,
    ) -> None:
        host, self.port = _parse_address(address)
        self.host = host
        self._recorder = recorder
        self._sources = sources
        self._refresh = refresh
        self._tls = tls
        if authorize is None and _is_local(host):
            authorize = _local_host_only
        self._route = Route(self._answer, authorize=authorize)
        self._stop = asyncio.Event()
        self._http: HttpServer | None = None

    @property
    def url(self) -> str:
        """Where a browser opens it (``http://127.0.0.1:8090/``), once started."""
        scheme = "https" if self._tls is not None else "http"
        host = self.host or "127.0.0.1"
        host = "127.0.0.1" if host in ("0.0.0.0", "*") else f"[{host}]" if ":" in host else host
        return f"{scheme}://{host}:{self.port}/"

    async def start(self) -> None:
        """Start serving the pages and their event streams."""
        self._stop.clear()
        self._http = HttpServer(
            lambda _path: self._route,
            self.host,
            self.port,
            name="dashboard",
            log=log,
            limits=Limits(max_connections=_MAX_CONNECTIONS, max_bytes_in_flight=0),
            tls=self._tls,
        )
        await self._http.start()
        self.port = self._http.port

    async def stop(self) -> None:
        """End the event streams and stop serving."""
        self._stop.set()  # the event streams end
        if self._http is not None:
            await self._http.stop()
            self._http = None

    async def _answer(self, request: Request) -> Response:
        path = request.path
        query = {k: v[-1] for k, v in parse_qs(request.query, keep_blank_values=True).items()}
        if path in ("/", "/index.html"):
            path = "/static/index.html"
        if path.startswith("/static/"):
            name = path.removeprefix("/static/")
            body = _static(name)
            if body is None:
                return _NOT_FOUND
            return Response(200, body, _TYPES["." + name.rsplit(".", 1)[-1]], _HEADERS)
        if path.startswith("/api/"):
            page = self._page(path.removeprefix("/api/"), query)
            if page is None:
                return _NOT_FOUND
            make, _ = page
            return Response(200, orjson.dumps(await make()), _JSON, _HEADERS)
        if path.startswith("/events/"):
            page = self._page(path.removeprefix("/events/"), query)
            if page is None:
                return _NOT_FOUND
            make, interval = page
            if request.method == "HEAD":  # the head only: no stream to start
                return Response(200, content_type=sse.CONTENT_TYPE, headers=_HEADERS)
            return Response(
                200,
                content_type=sse.CONTENT_TYPE,
                headers=_HEADERS,
                stream=sse.snapshots(make, self._stop, interval=interval),
            )
        return _NOT_FOUND

    def _page(self, name: str, query: dict[str, str]) -> tuple[Callable[[], Any], float] | None:
        recorder, sources = self._recorder, self._sources
        if name == "overview":

            async def make_overview() -> Any:
                return aggregate.overview(recorder, sources)

            return make_overview, self._refresh
        if name == "errors":

            async def make_errors() -> Any:
                return aggregate.errors(recorder)

            return make_errors, self._refresh
        if name == "object":
            kind, namespace, obj = query.get("kind", ""), query.get("namespace", ""), query.get("name", "")

            async def make_object() -> Any:
                if not (kind and obj):
                    keys = aggregate.object_keys(recorder)
                    return {"query": query, "found": False, "recent": [k._asdict() for k in keys]}
                return await aggregate.object_page(recorder, sources, kind, namespace, obj)

            return make_object, max(self._refresh, _OBJECT_REFRESH)
        return None


def _is_local(host: str | None) -> bool:
    """Whether ``host`` (a name or an address, without a port) is this machine only."""
    if host is None:
        return False
    if host.lower() in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def _local_host_only(request: Request) -> tuple[int, str] | None:
    """Refuses a request whose ``Host`` is not this machine (see the module docstring)."""
    value = (request.header("host") or "").strip()
    if value.startswith("["):
        host, _, port = value[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = value.partition(":")
    if _is_local(host) and (not port or (port.isascii() and port.isdigit())):
        return None
    return (
        403,
        f"Host {value[:100]!r} is not this machine: the dashboard on a loopback address answers "
        "requests for localhost, 127.0.0.1 or [::1] only (open it by one of those names, or expose it "
        "with Dashboard(secure=True))",
    )
