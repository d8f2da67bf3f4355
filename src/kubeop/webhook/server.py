"""WebhookServer: HTTPS (TLS 1.2+) for a :class:`~kubeop.webhook.registry.Webhooks`, on asyncio.

::

    server = WebhookServer(webhooks, "127.0.0.1:9443", cert_dir="/tmp/k8s-webhook-server/serving-certs")
    await server.start()        # ... await server.stop()

The certificate and key (``tls.crt`` / ``tls.key`` in ``cert_dir``) are re-read when either file
changes: every TLS handshake, and a poll every ``cert_poll_interval`` seconds, check the files'
stat (two ``stat`` calls, microseconds); a changed pair is loaded into a fresh SSL context that
later handshakes use (the SNI callback swaps it in; it runs for clients that send no server name
too). A pair that does not load (half-written, key and certificate not matching) is ignored until
it does, and the old one keeps serving. When the poll finds a new pair it closes the idle
keep-alive connections, so the API server's next call shakes hands with the new certificate
instead of riding an old connection for minutes (a request in flight finishes first).

HTTP: POST only, ``Content-Length`` required, bodies above ``max_body`` refused with 413 before
they are read, keep-alive, one request at a time per connection (the API server's Go client
never pipelines). A bad request is one warning line, never a traceback. Each request reaches the
webhooks with its headers (names as sent) and the caller's verified client certificate, if any.

Options for other setups: ``"*:PORT"`` listens on all interfaces; ``key_password=`` decrypts
the key; ``tls_setup=`` is called with every SSL context built (the first and each reload),
e.g. to ask for and verify client certificates (``ctx.load_verify_locations(...)``,
``ctx.verify_mode = ssl.CERT_OPTIONAL``); ``insecure=True`` serves plain HTTP (no certificate,
for a local tunnel; the API server itself only calls HTTPS).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from kubeop.webhook.certs import CERT_NAME, KEY_NAME
from kubeop.webhook.registry import parse_timeout

__all__ = ["Routes", "WebhookServer"]

log = logging.getLogger("kubeop.webhook")

_MAX_HEAD = 16 * 1024
_IDLE_SECONDS = 90.0
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Payload Too Large",
    415: "Unsupported Media Type",
}
# The API server's largest object is 3 MiB (etcd's default request limit is 1.5 MiB); an
# AdmissionReview of an update carries the object twice.
DEFAULT_MAX_BODY = 7 * 1024 * 1024


class Routes(Protocol):
    """What a server answers (:class:`~kubeop.webhook.registry.Webhooks` is one)."""

    async def handle(
        self,
        path: str,
        body: bytes,
        timeout: float | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        peer: Mapping[str, Any] | None = None,
    ) -> tuple[int, bytes]: ...

    def __len__(self) -> int: ...


def _parse_address(address: str) -> tuple[str | None, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; ``*:PORT``: all interfaces, as None)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"webhook address {address!r} must look like HOST:PORT, e.g. 127.0.0.1:9443")
    if host == "*":
        return None, int(port)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "127.0.0.1", int(port)


class _CertWatcher:
    """The current SSL context for a certificate/key pair on disk, reloaded when the files change."""

    def __init__(
        self,
        cert_file: Path,
        key_file: Path,
        password: str | None = None,
        setup: Callable[[ssl.SSLContext], None] | None = None,
    ) -> None:
        self.cert_file, self.key_file = cert_file, key_file
        self._password, self._setup = password, setup
        self._seen: tuple[tuple[int, int, int], ...] | None = None
        self.context = self._load()
        self._seen = self._stat()
        self.reloads = 0

    def _stat(self) -> tuple[tuple[int, int, int], ...]:
        out = []
        for path in (self.cert_file, self.key_file):
            st = os.stat(path)
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
        return tuple(out)

    def _load(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.set_alpn_protocols(["http/1.1"])
        ctx.load_cert_chain(self.cert_file, self.key_file, self._password)
        if self._setup is not None:
            self._setup(ctx)
        return ctx

    def current(self) -> ssl.SSLContext:
        try:
            seen = self._stat()
        except OSError:
            return self.context  # a file is being replaced: keep the pair that works
        if seen != self._seen:
            try:
                self.context = self._load()
            except (OSError, ssl.SSLError) as exc:
                log.warning("webhook certificate in %s not reloaded yet: %s", self.cert_file.parent, exc)
                return self.context
            self._seen = seen
            self.reloads += 1
            log.info("webhook certificate reloaded from %s", self.cert_file.parent)
        return self.context


class WebhookServer:
    """Serves ``webhooks`` over HTTPS on ``address``; see the module docstring."""

    def __init__(
        self,
        webhooks: Routes,
        address: str = "127.0.0.1:9443",
        *,
        cert_dir: str | os.PathLike[str] | None = None,
        cert_name: str = CERT_NAME,
        key_name: str = KEY_NAME,
        key_password: str | None = None,
        tls_setup: Callable[[ssl.SSLContext], None] | None = None,
        insecure: bool = False,
        max_body: int = DEFAULT_MAX_BODY,
        cert_poll_interval: float = 1.0,
    ) -> None:
        self.webhooks = webhooks
        self.host, self.port = _parse_address(address)
        if cert_dir is None and not insecure:
            raise ValueError(
                "WebhookServer needs cert_dir= (a directory holding tls.crt and tls.key), "
                "or insecure=True for plain HTTP"
            )
        self.insecure = insecure
        self.cert_dir = Path(cert_dir if cert_dir is not None else ".")
        self._cert_file, self._key_file = self.cert_dir / cert_name, self.cert_dir / key_name
        self._key_password, self._tls_setup = key_password, tls_setup
        self.max_body = max_body
        self._watcher: _CertWatcher | None = None
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._idle: dict[asyncio.StreamWriter, None] = {}
        self._poll_interval = cert_poll_interval
        self._poller: asyncio.Task[None] | None = None
        self.handshakes_since_reload = 0

    @property
    def url(self) -> str:
        host = "*" if self.host is None else f"[{self.host}]" if ":" in self.host else self.host
        return f"{'http' if self.insecure else 'https'}://{host}:{self.port}"

    @property
    def certificate_reloads(self) -> int:
        return self._watcher.reloads if self._watcher is not None else 0

    def ready(self) -> bool:
        """Readiness: listening with a loaded certificate."""
        return self._server is not None and self._server.is_serving()

    async def start(self) -> None:
        if self.insecure:
            self._server = await asyncio.start_server(
                self._serve, self.host, self.port, reuse_address=True, limit=_MAX_HEAD
            )
            self._bound()
            return
        watcher = self._watcher = _CertWatcher(
            self._cert_file, self._key_file, self._key_password, self._tls_setup
        )
        base = watcher.context

        def swap(sslobj: ssl.SSLObject, _name: str | None, _ctx: ssl.SSLContext) -> None:
            reloads = watcher.reloads
            current = watcher.current()
            self.handshakes_since_reload = (
                1 if watcher.reloads != reloads else self.handshakes_since_reload + 1
            )
            if current is not sslobj.context:
                sslobj.context = current

        base.sni_callback = swap
        self._server = await asyncio.start_server(
            self._serve,
            self.host,
            self.port,
            ssl=base,
            ssl_handshake_timeout=10,
            reuse_address=True,
            limit=_MAX_HEAD,
        )
        self._poller = asyncio.ensure_future(self._poll(watcher))
        self._bound()

    def _bound(self) -> None:
        assert self._server is not None
        if self.port == 0 and self._server.sockets:
            self.port = self._server.sockets[0].getsockname()[1]
        log.info("serving %d webhooks on %s", len(self.webhooks), self.url)

    async def _poll(self, watcher: _CertWatcher) -> None:
        while True:
            await asyncio.sleep(self._poll_interval)
            reloads = watcher.reloads
            watcher.current()
            if watcher.reloads != reloads:
                self.handshakes_since_reload = 0
                for writer in list(self._idle):
                    writer.close()  # its reader sees EOF; the client reconnects with the new certificate

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        with contextlib.suppress(Exception):
            await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, ssl.SSLError, asyncio.CancelledError):
            pass
        finally:
            try:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
            finally:
                if task is not None:  # only now: stop() waits for connections still closing too
                    self._connections.discard(task)

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; whether the connection stays open."""
        self._idle[writer] = None
        try:
            async with asyncio.timeout(_IDLE_SECONDS):
                head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, TimeoutError):
            return False
        except asyncio.LimitOverrunError:
            await self._reply(writer, 400, b'{"message": "request head too large"}', keep_alive=False)
            return False
        finally:
            self._idle.pop(writer, None)
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            await self._reply(writer, 400, b'{"message": "malformed request line"}', keep_alive=False)
            return False
        method, target, version = parts
        sent = {k.strip(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
        headers = {k.lower(): v for k, v in sent.items()}
        connection = headers.get("connection", "").lower()
        keep_alive = connection != "close" if version == "HTTP/1.1" else connection == "keep-alive"
        url = urlsplit(target)
        if method != "POST":
            await self._reply(writer, 405, b'{"message": "only POST"}', keep_alive=False)
            return False
        if "transfer-encoding" in headers or not headers.get("content-length", "").isdigit():
            await self._refuse(url.path, writer, 411, "a Content-Length is required")
            return False
        length = int(headers["content-length"])
        if length > self.max_body:
            await self._refuse(url.path, writer, 413, f"the body is {length} bytes, over {self.max_body}")
            return False
        media = headers.get("content-type", "").partition(";")[0].strip().lower()
        try:
            async with asyncio.timeout(30):
                body = await reader.readexactly(length)
        except (asyncio.IncompleteReadError, TimeoutError):
            return False
        if media != "application/json":
            await self._refuse(url.path, writer, 415, f"Content-Type {media!r} is not application/json")
            return keep_alive
        timeout = parse_timeout(parse_qs(url.query).get("timeout", [""])[0])
        peer = writer.get_extra_info("peercert") or None
        status, payload = await self.webhooks.handle(url.path, body, timeout, headers=sent, peer=peer)
        await self._reply(writer, status, payload, keep_alive=keep_alive)
        return keep_alive

    async def _refuse(self, path: str, writer: asyncio.StreamWriter, status: int, message: str) -> None:
        log.warning("webhook %s: %d %s", path, status, message)
        body = b'{"message": "%s"}' % message.replace('"', "'").encode()
        await self._reply(writer, status, body, keep_alive=False)

    @staticmethod
    async def _reply(writer: asyncio.StreamWriter, status: int, body: bytes, *, keep_alive: bool) -> None:
        writer.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\nConnection: %s\r\n\r\n"
            % (
                status,
                _REASONS.get(status, "OK").encode(),
                len(body),
                b"keep-alive" if keep_alive else b"close",
            )
        )
        writer.write(body)
        await writer.drain()
