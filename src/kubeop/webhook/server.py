"""WebhookServer: HTTPS (TLS 1.2+) for a :class:`~kubeop.webhook.registry.Webhooks`, on asyncio.

::

    server = WebhookServer(webhooks, "127.0.0.1:9443", cert_dir="/tmp/k8s-webhook-server/serving-certs")
    await server.start()        # ... await server.stop()

The certificate and key (``tls.crt`` / ``tls.key`` in ``cert_dir``) are re-read when either file
changes: every new connection, and a poll every ``cert_poll_interval`` seconds, check the files'
stat (two ``stat`` calls, microseconds); a changed pair is loaded into a fresh SSL context that
later connections use. A pair that does not load (half-written, key and certificate not matching)
is ignored until it does, and the old one keeps serving. Once a new pair is loaded, the
connections made before close: idle keep-alive ones at once, busy ones after their answer, so the
API server's next call shakes hands with the new certificate instead of riding an old connection
for minutes.

HTTP (kubeop's server core on llhttp, shared with the probe server: strict parsing, limits and
deadlines are described in ``kubeop.client.httpserver``): POST only, ``Content-Length``
required (ASCII digits), ``Content-Type: application/json``; bodies above ``max_body`` refused with
413 before they are read; keep-alive. A bad request is one warning line, never a traceback. Each
request reaches the webhooks with its headers (names as sent) and the caller's verified client
certificate, if any.

Limits against floods: at most ``max_connections`` open connections (default 1024; over it the
connection idle the longest is closed for the new one, then one whose peer stopped reading its
answers, then the slowest partial request, else the new connection), at most
``max_bytes_in_flight`` bytes of request bodies held at once (default 64 MiB; reserved as they
arrive, so a head announcing a large body holds little; a body that does not fit closes the
unfinished bodies that started first, else it is 503), a request head within ``header_timeout``
seconds (default 5, TLS handshake included for a new connection) and its body within
``body_timeout`` (default 10); a peer that stops reading its answers is dropped after
``body_timeout``, and a keep-alive connection idle for 90 s is closed.

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
from urllib.parse import parse_qs

import orjson

from kubeop.client.httpserver import HttpServer, Limits, Request, Response, Route, parse_address
from kubeop.webhook.certs import CERT_NAME, KEY_NAME, CertPathError, checked_cert_path
from kubeop.webhook.registry import parse_timeout

__all__ = ["CertWatcher", "Routes", "WebhookServer"]

log = logging.getLogger("kubeop.webhook")

# The API server's largest object is 3 MiB (etcd's default request limit is 1.5 MiB); an
# AdmissionReview of an update carries the object twice.
DEFAULT_MAX_BODY = 7 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_MAX_BYTES_IN_FLIGHT = 64 * 1024 * 1024
_IDLE_SECONDS = 90.0  # Go's http.Transport closes idle connections after 90 s: it goes first
_JSON = frozenset({"application/json"})


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


def _json_error(status: int, message: str) -> Response:
    return Response(status, orjson.dumps({"message": message}), "application/json")


class CertWatcher:
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
        ctx.options |= ssl.OP_NO_RENEGOTIATION
        ctx.set_alpn_protocols(["http/1.1"])
        # regular files only, never through a symlink leaving their directory (a FIFO planted
        # there would block the event loop)
        cert = checked_cert_path(self.cert_file.parent, self.cert_file.name)
        key = checked_cert_path(self.key_file.parent, self.key_file.name)
        ctx.load_cert_chain(cert, key, self._password)
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
            except (OSError, ssl.SSLError, CertPathError) as exc:
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
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_bytes_in_flight: int = DEFAULT_MAX_BYTES_IN_FLIGHT,
        header_timeout: float = 5.0,
        body_timeout: float = 10.0,
    ) -> None:
        self.webhooks = webhooks
        self.host, self.port = parse_address(address, example="127.0.0.1:9443")
        if cert_dir is None and not insecure:
            raise ValueError(
                "WebhookServer needs cert_dir= (a directory holding tls.crt and tls.key), "
                "or insecure=True for plain HTTP"
            )
        if max_body < 1:
            raise ValueError(f"WebhookServer(max_body={max_body!r}): must be at least 1 byte")
        if max_bytes_in_flight < max_body:
            raise ValueError(
                f"WebhookServer(max_bytes_in_flight={max_bytes_in_flight!r}) is below "
                f"max_body={max_body!r}: the largest request could never be read; raise it"
            )
        self.insecure = insecure
        self.cert_dir = Path(cert_dir if cert_dir is not None else ".")
        self._cert_file, self._key_file = self.cert_dir / cert_name, self.cert_dir / key_name
        self._key_password, self._tls_setup = key_password, tls_setup
        self.max_body = max_body
        self._limits = Limits(
            max_connections=max_connections,
            max_bytes_in_flight=max_bytes_in_flight,
            header_timeout=header_timeout,
            body_timeout=body_timeout,
            idle_timeout=_IDLE_SECONDS,
        )
        self._route = Route(self._handle, frozenset({"POST"}), max_body, _JSON)
        self._watcher: CertWatcher | None = None
        self._http: HttpServer | None = None
        self._poll_interval = cert_poll_interval
        self._poller: asyncio.Task[None] | None = None
        self.handshakes_since_reload = 0

    @property
    def url(self) -> str:
        """The server's base URL (``https://host:port``; ``*`` for every address)."""
        host = "*" if self.host is None else f"[{self.host}]" if ":" in self.host else self.host
        return f"{'http' if self.insecure else 'https'}://{host}:{self.port}"

    @property
    def certificate_reloads(self) -> int:
        """How many times the serving certificate was reloaded from disk since the start."""
        return self._watcher.reloads if self._watcher is not None else 0

    def ready(self) -> bool:
        """Readiness: listening with a loaded certificate."""
        return self._http is not None and self._http.serving

    async def start(self) -> None:
        """Start serving (over TLS unless insecure), reloading the certificate when its files change."""
        tls = None
        if not self.insecure:
            self._watcher = CertWatcher(self._cert_file, self._key_file, self._key_password, self._tls_setup)

            def tls() -> ssl.SSLContext:  # for each new connection
                context = self._context()
                self.handshakes_since_reload += 1
                return context

        http = self._http = HttpServer(
            lambda _path: self._route,
            self.host,
            self.port,
            name="webhook",
            log=log,
            limits=self._limits,
            tls=tls,
            error=_json_error,
        )
        await http.start()
        self.port = http.port
        if self._watcher is not None:
            self._poller = asyncio.ensure_future(self._poll())
        log.info("serving %d webhooks on %s", len(self.webhooks), self.url)

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(self._poll_interval)
            self._context()

    def _context(self) -> ssl.SSLContext:
        """The current SSL context; after a reload (found by the poll or by a new connection),
        connections made with the old one close once idle, so clients reconnect to the new one."""
        watcher = self._watcher
        assert watcher is not None
        reloads = watcher.reloads
        context = watcher.current()
        if watcher.reloads != reloads:
            self.handshakes_since_reload = 0
            if self._http is not None:
                self._http.retire()
        return context

    async def stop(self) -> None:
        """Stop serving; stopping a stopped server does nothing."""
        if self._http is None:
            return
        if self._poller is not None:
            self._poller.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poller
            self._poller = None
        await self._http.stop()
        self._http = None

    async def _handle(self, request: Request) -> Response:
        timeout = parse_timeout(parse_qs(request.query).get("timeout", [""])[0])
        status, payload = await self.webhooks.handle(
            request.path, request.body, timeout, headers=request.headers, peer=request.peercert
        )
        return Response(status, payload, "application/json")
