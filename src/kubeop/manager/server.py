"""The manager's HTTP endpoints: ``/healthz``, ``/livez``, ``/readyz`` and ``/metrics``.

Each check is a named callable returning True/raising; ``/readyz?verbose`` lists them, like the
Kubernetes components do. ``/metrics`` serves the Prometheus text format.

The server is a few dozen lines on ``asyncio.start_server`` rather than a web framework: it answers
GETs from kubelet probes and a Prometheus scraper, and importing a framework for that cost an
operator ~14 MB of RSS (aiohttp; kubeop's client has its own HTTP code).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

__all__ = ["Check", "ProbeServer", "Route", "parse_address"]

Check = Callable[[], bool | Awaitable[bool]]
Route = Callable[[], Awaitable[tuple[int, bytes, str]]]
"""An extra endpoint: answers (status, body, content type) to a GET of its path."""

_MAX_HEAD = 16 * 1024
_IDLE_SECONDS = 60.0
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
}


def parse_address(address: str) -> tuple[str, int]:
    """``"127.0.0.1:8080"`` / ``":8080"`` (loopback) -> (host, port); a clear error otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(
            f"bind address {address!r} must look like HOST:PORT, e.g. 127.0.0.1:8080 (port 0: any)"
        )
    return host or "127.0.0.1", int(port)


class ProbeServer:
    """One HTTP/1.1 server for any of the endpoints (keep-alive, GET and HEAD only)."""

    def __init__(self, address: str, *, registry: CollectorRegistry | None = None) -> None:
        self.host, self.port = parse_address(address)
        self.registry = registry
        self.health: dict[str, Check] = {"ping": lambda: True}
        self.ready: dict[str, Check] = {"ping": lambda: True}
        self.routes: dict[str, Route] = {}
        """Extra endpoints by path (they take precedence over the built-in ones)."""
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, reuse_address=True, limit=_MAX_HEAD
        )
        if self.port == 0 and self._server.sockets:
            self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    # -- HTTP -------------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            while True:
                try:
                    async with asyncio.timeout(_IDLE_SECONDS):
                        head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                    return
                keep_alive = await self._answer(head, writer)
                await writer.drain()
                if not keep_alive:
                    return
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            if task is not None:
                self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _answer(self, head: bytes, writer: asyncio.StreamWriter) -> bool:
        """Write the response to one request; returns whether the connection stays open."""
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            self._write(writer, 400, b"malformed request line\n", keep_alive=False)
            return False
        method, target, version = parts
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
        if "content-length" in headers or "transfer-encoding" in headers:
            # Probes and scrapes send no body; refusing one keeps the framing simple and safe.
            self._write(writer, 400, b"request bodies are not accepted\n", keep_alive=False)
            return False
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        if method not in ("GET", "HEAD"):
            self._write(writer, 405, b"only GET\n", keep_alive=keep_alive, extra=b"Allow: GET, HEAD\r\n")
            return keep_alive
        url = urlsplit(target)
        status, body, content_type = await self._route(url.path, parse_qs(url.query, keep_blank_values=True))
        self._write(
            writer, status, body, keep_alive=keep_alive, content_type=content_type, head=method == "HEAD"
        )
        return keep_alive

    @staticmethod
    def _write(
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        *,
        keep_alive: bool,
        content_type: str = "text/plain; charset=utf-8",
        extra: bytes = b"",
        head: bool = False,
    ) -> None:
        writer.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: %s\r\n%s\r\n"
            % (
                status,
                _REASONS.get(status, "OK").encode(),
                content_type.encode(),
                len(body),
                b"keep-alive" if keep_alive else b"close",
                extra,
            )
        )
        if not head:
            writer.write(body)

    async def _route(self, path: str, query: dict[str, list[str]]) -> tuple[int, bytes, str]:
        route = self.routes.get(path)
        if route is not None:
            return await route()
        if path in ("/healthz", "/livez"):
            return await self._run(self.health, "verbose" in query)
        if path == "/readyz":
            return await self._run(self.ready, "verbose" in query)
        if path == "/metrics" and self.registry is not None:
            return 200, generate_latest(self.registry), CONTENT_TYPE_LATEST
        return 404, b"404: not found\n", "text/plain; charset=utf-8"

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
        return (200 if ok else 500), text.encode(), "text/plain; charset=utf-8"
