"""The HTTP/1.1 server core shared by kubeop's servers (the webhook server, the probe/metrics server).

:class:`~kubeop.webhook.server.WebhookServer` and :class:`~kubeop.manager.server.ProbeServer`
are built on it, so it is a public module of kubeop.client (not exported from the package's
namespace: operators use those servers, not this core). It lives next to the HTTP client
because both layers may import it and both parse HTTP with llhttp (``httptools``).

::

    server = HttpServer(resolve, "127.0.0.1", 8080, name="probes", log=log, limits=Limits())
    await server.start()       # ... await server.stop()

``resolve(path)`` returns the :class:`Route` for a path (None: 404): its ``handler`` answers a
complete :class:`Request` with a :class:`Response`; ``methods`` are the methods it accepts (405
otherwise), ``max_body`` its largest body (0: none accepted), ``content_types`` the media types
it accepts (415 otherwise) and ``authorize`` an optional async hook run before the handler
(None: allowed; ``(status, message)``: refused with that answer). ``tls`` gives the SSL context
for each new connection (a certificate reload takes effect on the next connection).

Parsing is llhttp's, strictly: a malformed request line, header or length, duplicate
``Content-Length``, ``Transfer-Encoding`` with ``Content-Length``, obsolete line folding, bare CR
or LF and control characters are 400 and the connection closes. On top: HTTP/1.0 and 1.1 only
(505), ``Transfer-Encoding`` refused (411 where a body is expected, 400 elsewhere; both servers'
clients send ``Content-Length``), ``Content-Length`` of ASCII digits only, duplicate singleton
headers (``Host``, ``Content-Type``, ``Content-Length``, ``Authorization``...) 400, other
repeated headers joined with ``", "`` as RFC 9110 says; request target, header count and head
size limited (414, 431). Everything a route refuses on its head (404, 405, 411, 413, 415, 417,
503) is answered before the body is read, and the connection closes.

Limits (:class:`Limits`): at most ``max_connections`` connections, counted by open sockets (a
closed one still sending its last answer counts until it is gone); a connection over the cap
evicts the one idle the longest (a keep-alive connection between requests or one that has sent
nothing yet), else a closed one still sending its last answer, else one whose peer stopped
reading its answers, else the one whose partial request started first, else it is closed at once:
a flood of idle or slow connections cannot lock the API server out, and its own connections,
which send their request as soon as they connect, are the last to go.

Bodies are reserved against ``max_bytes_in_flight`` as they arrive: what has arrived plus a window
of ``_BODY_WINDOW`` bytes (never more than the ``Content-Length``), so a head announcing a large
body and then nothing holds little; the reservation is released when the answer is written. A
reservation that does not fit closes the unfinished bodies that started first (connections with
no answer being computed) until it does, else it is 503: the API server sends a body at once, so a
flood of slow bodies cannot starve it. A request's head must arrive within ``header_timeout``
(from the connection for the first request, TLS handshake included; from its first byte after
that), its body within ``body_timeout``; a connection idle between requests is closed after
``idle_timeout``, and one whose answers stop going out (the socket's buffer full: the peer stopped
reading) is dropped after ``body_timeout`` of that.

Keep-alive follows the request (``should_keep_alive``). Pipelined requests are parsed while one is
answered, answered in order, and the socket is not read while any wait, nor while answers cannot
go out (no more answers are computed for a peer that does not read them); more than
``max_pipelined`` waiting closes the connection after the ones before are answered. ``Expect:
100-continue`` is answered with ``100 Continue`` once the head is accepted. Once :meth:`stop` has
begun, a request arriving closes its connection instead of reaching a handler.

TLS runs on :class:`ssl.MemoryBIO` inside the connection (not asyncio's SSL transport, whose
256 KiB read buffer per connection made 1,000 idle TLS connections cost ~270 MiB).

No exception escapes to asyncio's logger: a handler that raises is a 500 logged with the peer's
address (a ``CancelledError`` too, unless the answer itself is being cancelled), and an error
anywhere else in a connection closes it with one log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, NamedTuple, cast

import httptools

__all__ = [
    "Authorize",
    "HttpServer",
    "Limits",
    "Request",
    "Response",
    "Route",
    "parse_address",
]

_CHUNK = 64 * 1024  # one socket read (and one TLS read) at most
_TEXT = "text/plain; charset=utf-8"
_DIGITS = re.compile(r"[0-9]{1,18}").fullmatch
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+").fullmatch
_FIELD_VALUE = re.compile(r"[^\x00-\x08\x0a-\x1f\x7f]*").fullmatch
# Headers a request may carry once: a second one is refused rather than guessed at.
_SINGLE = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "transfer-encoding",
        "authorization",
        "expect",
        "content-encoding",
    }
)
_IDLE, _HEAD, _BODY = 0, 1, 2
# Methods whose requests carry a body: on a route taking bodies they must say how long it is (a
# GET or DELETE without Content-Length has none).
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# After a refusal the connection half-closes and reads (and drops) what the client still sends for
# up to this long / this much, so that its kernel does not reset the connection and lose the answer.
_LINGER_SECONDS = 2.0
_LINGER_BYTES = 8 * 1024 * 1024
_REFUSALS_LOGGED = 20  # per 10 s
# A body's reservation runs this far ahead of what has arrived: one more read's worth, so that a
# body arriving at once is reserved in a few steps while a head alone holds little (1,024
# connections of heads alone hold 16 MiB, a quarter of the default budget).
_BODY_WINDOW = 16 * 1024
_REASONS = {s.value: s.phrase.encode() for s in HTTPStatus}


def parse_address(address: str, *, example: str = "127.0.0.1:8080") -> tuple[str | None, int]:
    """``HOST:PORT`` -> (host, port): ``[::1]:PORT`` for IPv6, ``:PORT`` for loopback, ``*:PORT``
    for all interfaces (host None); port 0 picks a free one. A clear error otherwise."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise ValueError(
            f"address {address!r} must look like HOST:PORT with a port of 0-65535, e.g. {example} "
            "(*:PORT for all interfaces, port 0 for any free port)"
        )
    if host == "*":
        return None, int(port)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host or "127.0.0.1", int(port)


@dataclass(frozen=True, slots=True)
class Limits:
    """What one server allows (see the module docstring)."""

    max_connections: int = 1024
    max_bytes_in_flight: int = 64 * 1024 * 1024
    header_timeout: float = 5.0
    body_timeout: float = 10.0
    idle_timeout: float = 90.0
    max_head: int = 16 * 1024
    max_headers: int = 100
    max_target: int = 8 * 1024
    max_pipelined: int = 8

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_head", "max_headers", "max_target", "max_pipelined"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)!r}")
        if self.max_bytes_in_flight < 0:
            raise ValueError(f"max_bytes_in_flight must be >= 0, not {self.max_bytes_in_flight!r}")
        for name in ("header_timeout", "body_timeout", "idle_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be a positive number of seconds, not {getattr(self, name)!r}")


class Request:
    """One complete request. ``headers``: names as sent (the first spelling of a repeated one);
    :meth:`header` looks one up by any case. ``peercert``: the verified client certificate."""

    __slots__ = (
        "body",
        "fields",
        "headers",
        "keep_alive",
        "method",
        "path",
        "peer",
        "peercert",
        "query",
        "repeated",
        "reserved",
        "route",
        "target",
    )

    def __init__(
        self,
        method: str,
        target: str,
        fields: dict[str, str],
        names: dict[str, str],
        route: Route,
        peer: Any,
        peercert: dict[str, Any] | None,
        repeated: dict[str, list[str]] | None = None,
    ) -> None:
        self.method, self.target, self.route = method, target, route
        self.path, self.query = _split_target(target)
        self.fields = fields
        self.repeated = repeated or {}
        self.headers = {names[k]: v for k, v in fields.items()}
        self.peer, self.peercert = peer, peercert
        self.body = b""
        self.keep_alive = True
        self.reserved = 0

    def header(self, name: str) -> str | None:
        """The field ``name`` (any case); a repeated one's values joined with ``", "``."""
        return self.fields.get(name.lower())

    def header_values(self, name: str) -> list[str]:
        """Each value of the field ``name`` as sent, one per line (none: ``[]``): for fields
        whose values may themselves hold commas, such as a front proxy's group headers."""
        key = name.lower()
        values = self.repeated.get(key)
        if values is not None:
            return list(values)
        value = self.fields.get(key)
        return [] if value is None else [value]

    def __repr__(self) -> str:
        return f"<Request {self.method} {self.path} from {_peer(self.peer)}>"


class Response(NamedTuple):
    """An answer. With ``stream`` set the body is its chunks instead of ``body``, sent with
    ``Transfer-Encoding: chunked`` as each arrives (an API server's watch); the connection closes
    after it, and the stream is closed (``aclose``) when the peer goes or the server stops."""

    status: int
    body: bytes = b""
    content_type: str = _TEXT
    headers: tuple[tuple[str, str], ...] = ()
    stream: AsyncIterator[bytes] | None = None


_BEARER_CHALLENGE = ("WWW-Authenticate", "Bearer")

Authorize = Callable[[Request], Awaitable[tuple[int, str] | None]]
"""Before the handler: None lets the request through; ``(status, message)`` answers it instead."""


@dataclass(frozen=True, slots=True)
class Route:
    handler: Callable[[Request], Awaitable[Response]]
    methods: frozenset[str] = frozenset({"GET", "HEAD"})
    max_body: int = 0
    content_types: frozenset[str] = frozenset()
    authorize: Authorize | None = None


def text_error(status: int, message: str) -> Response:
    return Response(status, f"{status}: {message}\n".encode())


class _Refused(Exception):
    """Raised in a parser callback: stop parsing, answer ``status`` (0: none) and close."""

    def __init__(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def _split_target(target: str) -> tuple[str, str]:
    """(path, query) of an origin-form target, or of an absolute-form one (``http://host/p?q``).
    Never raises: whatever llhttp let through is split, and routes judge the path."""
    target = target.partition("#")[0]
    if not target.startswith("/"):
        _, absolute, rest = target.partition("://")
        if absolute:
            cut = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
            target = rest[cut:] if rest[cut:].startswith("/") else "/" + rest[cut:]
    path, _, query = target.partition("?")
    return path, query


def _peer(peer: Any) -> str:
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"[{peer[0]}]:{peer[1]}" if ":" in str(peer[0]) else f"{peer[0]}:{peer[1]}"
    return str(peer) if peer else "unknown peer"


class HttpServer:
    """Serves the routes ``resolve`` returns on ``host:port``; see the module docstring."""

    def __init__(
        self,
        resolve: Callable[[str], Route | None],
        host: str | None,
        port: int,
        *,
        name: str,
        log: logging.Logger,
        limits: Limits | None = None,
        tls: Callable[[], ssl.SSLContext] | None = None,
        error: Callable[[int, str], Response] = text_error,
    ) -> None:
        self.resolve, self.host, self.port = resolve, host, port
        self.name, self.log, self.limits = name, log, limits or Limits()
        self.tls, self.error = tls, error
        self.connections: set[_Connection] = set()  # admitted and not closed
        self.open: set[_Connection] = set()  # admitted and not yet lost (closing ones too)
        self.aborting: set[_Connection] = set()  # aborted, not yet lost: gone on the next loop turn
        self.tasks: set[asyncio.Task[None]] = set()  # answers being computed, closed connections' too
        self.idle: dict[_Connection, None] = {}  # oldest idle first
        self.partial: dict[_Connection, None] = {}  # oldest partial request first
        self.bodies: dict[_Connection, None] = {}  # reading a body: the first one started first
        self.stalled: dict[_Connection, None] = {}  # answers not going out: the first stalled first
        self.flushing: dict[_Connection, None] = {}  # closed, the last answer still going out
        self.bytes_in_flight = 0
        self.evicted = 0
        self.evicted_bodies = 0
        self.refused = 0
        self.peak_connections = 0
        self._buffer = memoryview(bytearray(_CHUNK))  # every read lands here, then is copied out
        self._plain = memoryview(bytearray(_CHUNK))  # every TLS record decrypts here
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._gone: asyncio.Event | None = None
        self._warned = 0.0
        self._refusal_window = 0.0
        self._refusals_logged = self._refusals_unlogged = 0
        self._stopping = False

    @property
    def serving(self) -> bool:
        return self._server is not None and self._server.is_serving()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._stopping = False
        self._server = await loop.create_server(
            lambda: _Connection(self), self.host, self.port, reuse_address=True, backlog=1024
        )
        if self.port == 0 and self._server.sockets:
            self.port = self._server.sockets[0].getsockname()[1]
        self._sweeper = asyncio.ensure_future(self._sweep())

    async def stop(self, grace: float = 5.0) -> None:
        """Stop listening, cancel the answers being computed, close every connection (waiting up
        to ``grace`` seconds for their last bytes to go out, then aborting them) and wait until all
        are closed."""
        if self._server is None:
            return
        self._stopping = True
        self._server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._gone = asyncio.Event()
        for conn in list(self.connections):
            conn.close()
        late = list(self.tasks)  # none should have started since; cancel any that did
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
        if self.open:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await self._gone.wait()
            for conn in list(self.open):
                conn.abort()
            if self.open:  # abort() reports connection_lost on the next loop iteration
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1):
                        await self._gone.wait()
        self._gone = None
        with contextlib.suppress(Exception):
            await self._server.wait_closed()
        self._server = None

    def retire(self) -> None:
        """After a certificate reload: close the connections idle between requests (fresh ones that
        have shaken hands too: a client may open one it has no request for yet), and let the busy
        ones close after their answer. A TLS handshake under way is left alone: it started with
        the context current when it began, which is the new one unless it began microseconds ago."""
        for conn in list(self.connections):
            if conn.handshaking:
                continue
            if conn in self.idle:
                conn.close()
            else:
                conn.retiring = True

    # -- connection bookkeeping (called by _Connection) ---------------------------------------------

    @property
    def connection_count(self) -> int:
        """The connections the cap counts: every open socket, closed ones still sending too."""
        return len(self.open) - len(self.aborting)

    def admit(self, conn: _Connection) -> bool:
        """A new connection: admit it, evicting another when at the cap, or refuse it."""
        if self._stopping:
            return False
        if self.connection_count >= self.limits.max_connections:
            victim = (
                next(iter(self.idle), None)
                or next(iter(self.flushing), None)
                or next(iter(self.stalled), None)
                or next((c for c in self.partial if c.task is None), None)
            )
            if victim is None:
                self.refused += 1
                self._warn_cap("closed a new connection")
                return False
            self.evicted += 1
            self._warn_cap("closed the longest idle or slowest connection for a new one")
            victim.abort()
        self.connections.add(conn)
        self.open.add(conn)
        self.idle[conn] = None
        self.peak_connections = max(self.peak_connections, self.connection_count)
        return True

    def reserve(self, conn: _Connection, size: int) -> bool:
        """Reserve ``size`` more bytes of ``conn``'s body; when they do not fit, close the other
        unfinished bodies that started first (none with an answer being computed) until they do.
        False (nothing closed) when even that would not make the room."""
        budget = self.limits.max_bytes_in_flight
        if self.bytes_in_flight + size > budget:
            victims = [c for c in self.bodies if c is not conn and c.task is None and not c.closed]
            if self.bytes_in_flight + size - sum(c.holding for c in victims) > budget:
                return False
            for victim in victims:
                self.evicted_bodies += 1
                self._warn_cap(
                    "closed the unfinished request body that started first for a new request's "
                    "bytes (max_bytes_in_flight)"
                )
                victim.abort()
                if self.bytes_in_flight + size <= budget:
                    break
        self.bytes_in_flight += size
        return True

    def forget(self, conn: _Connection) -> None:
        self.connections.discard(conn)
        self.idle.pop(conn, None)
        self.partial.pop(conn, None)
        self.bodies.pop(conn, None)
        self.stalled.pop(conn, None)

    def lost(self, conn: _Connection) -> None:
        self.forget(conn)
        self.open.discard(conn)
        self.aborting.discard(conn)
        self.flushing.pop(conn, None)
        if self._gone is not None and not self.open:
            self._gone.set()

    def _warn_cap(self, what: str) -> None:
        now = time.monotonic()
        if now - self._warned >= 10:
            self._warned = now
            self.log.warning(
                "%s: %d connections, %d bytes of bodies in flight: %s "
                "(%d connections and %d bodies evicted, %d refused so far)",
                self.name,
                self.connection_count,
                self.bytes_in_flight,
                what,
                self.evicted,
                self.evicted_bodies,
                self.refused,
            )

    async def _sweep(self) -> None:
        limits = self.limits
        tick = min(0.5, max(0.01, min(limits.header_timeout, limits.body_timeout, limits.idle_timeout) / 4))
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(tick)
            now = loop.time()
            for conn in list(self.connections):
                if conn.write_deadline is not None and now >= conn.write_deadline:
                    self.log.debug(
                        "%s: %s stopped reading its answers: connection dropped", self.name, _peer(conn.peer)
                    )
                    conn.abort()
                elif conn.deadline is not None and now >= conn.deadline:
                    conn.expire()

    async def answer(self, request: Request) -> Response:
        """The route's answer (authorization first); a handler's exception is a 500, logged with the
        peer's address, and the connection closes after it."""
        route = request.route
        try:
            if route.authorize is not None:
                refusal = await route.authorize(request)
                if refusal is not None:
                    status, message = refusal
                    refused = self.error(status, message)
                    if status == 401:  # RFC 9110: a 401 says how to authenticate
                        refused = refused._replace(headers=(*refused.headers, _BEARER_CHALLENGE))
                    return refused
            return await route.handler(request)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # this answer is being cancelled (stop(), the connection lost)
            # raised by the handler (a future someone else cancelled): an error like any other
            what = "the handler of %s %s from %s raised CancelledError without being cancelled"
            return self._internal_error(request, what)
        except Exception:
            return self._internal_error(request, "internal error answering %s %s from %s")

    def _internal_error(self, request: Request, what: str) -> Response:
        """Log ``what`` (formatted with the request's method, path and peer) with the exception
        being handled; the answer is a 500 and the connection closes after it."""
        self.log.error(
            "%s: " + what, self.name, request.method, request.path, _peer(request.peer), exc_info=True
        )
        request.keep_alive = False
        return self.error(500, "internal error")

    def log_refusal(self, conn: _Connection, path: str, status: int, message: str) -> None:
        """One warning line per refused request, at most _REFUSALS_LOGGED per 10 s (a flood of bad
        or slow requests must not become a flood of log lines); the rest are counted."""
        now = time.monotonic()
        if now - self._refusal_window >= 10:
            if self._refusals_unlogged:
                self.log.warning(
                    "%s: %d more requests refused in the last 10 s", self.name, self._refusals_unlogged
                )
            self._refusal_window, self._refusals_logged, self._refusals_unlogged = now, 0, 0
        if self._refusals_logged >= _REFUSALS_LOGGED:
            self._refusals_unlogged += 1
            return
        self._refusals_logged += 1
        self.log.warning("%s %s from %s: %d %s", self.name, path or "-", _peer(conn.peer), status, message)


class _Reply:
    """A queued answer that is not a handler's: a refusal (then the connection closes)."""

    __slots__ = ("response",)

    def __init__(self, response: Response | None) -> None:
        self.response = response


class _Connection(asyncio.BufferedProtocol):
    """One connection: bytes -> (TLS) -> llhttp -> requests queued -> answers written in order."""

    __slots__ = (
        "_arrived",
        "_body",
        "_eof",
        "_expected",
        "_fields",
        "_handshaken",
        "_head_bytes",
        "_head_size",
        "_headers_done",
        "_lingering",
        "_loop",
        "_lost",
        "_names",
        "_parser",
        "_path",
        "_reading",
        "_repeated",
        "_request",
        "_server",
        "_tls",
        "_tls_in",
        "_tls_out",
        "_url",
        "_write_waiter",
        "closed",
        "deadline",
        "fresh",
        "peer",
        "peercert",
        "queue",
        "retiring",
        "state",
        "task",
        "transport",
        "write_deadline",
    )

    def __init__(self, server: HttpServer) -> None:
        self._server = server
        self._loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self._tls: ssl.SSLObject | None = None
        self._tls_in: ssl.MemoryBIO | None = None
        self._tls_out: ssl.MemoryBIO | None = None
        self._handshaken = False
        self._parser: httptools.HttpRequestParser | None = httptools.HttpRequestParser(self)
        self.state = _IDLE
        self.fresh = True
        self.deadline: float | None = self._loop.time() + server.limits.header_timeout
        self.queue: deque[Request | _Reply] = deque()
        self.task: asyncio.Task[None] | None = None
        self.closed = False
        self.retiring = False
        self.peer: Any = None
        self.peercert: dict[str, Any] | None = None
        self._reading = True
        self._eof = False
        self._lingering = -1  # >= 0: bytes dropped since the refusal
        self._write_waiter: asyncio.Future[None] | None = None
        self._lost: asyncio.Future[None] | None = None  # set once closed, while a stream is sent
        self.write_deadline: float | None = None  # while answers cannot go out
        self._reset()

    def _reset(self) -> None:
        self._url = b""
        self._path = ""
        self._fields: dict[str, str] = {}
        self._names: dict[str, str] = {}
        self._repeated: dict[str, list[str]] = {}  # the values of a field sent more than once
        self._body: list[bytes] = []
        self._request: Request | None = None
        self._head_bytes = self._head_size = 0
        self._headers_done = False
        self._expected = self._arrived = 0  # the body's Content-Length, and what has arrived

    # -- asyncio.Protocol --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        server = self._server
        if not server.admit(self):
            self.closed = True
            transport.abort()
            return
        try:
            self.peer = transport.get_extra_info("peername")
            if server.tls is not None:
                self._tls_in, self._tls_out = ssl.MemoryBIO(), ssl.MemoryBIO()
                self._tls = server.tls().wrap_bio(self._tls_in, self._tls_out, server_side=True)
        except Exception:
            server.log.error(
                "%s: cannot set up a connection from %s", server.name, _peer(self.peer), exc_info=True
            )
            self.abort()

    @property
    def handshaking(self) -> bool:
        return self._server.tls is not None and not self._handshaken

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._server._buffer

    def buffer_updated(self, nbytes: int) -> None:
        try:
            if self._lingering >= 0:
                self._lingering += nbytes
                if self._lingering > _LINGER_BYTES:
                    self.abort()
                return
            data = self._server._buffer[:nbytes]
            if self._tls is None:
                self._received(data)
            else:
                self._tls_received(data)
        except Exception:
            self._crashed("reading a request")

    def eof_received(self) -> bool:
        if self._lingering >= 0:
            return False
        if self._lost is not None:  # a stream's peer is gone: stop sending it
            self._eof = True
            self._signal_lost()
            return True
        if self.task is not None or self.queue:
            self._eof = True  # answer what was asked, then close
            return True
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._parser = None
        self._release_all()
        self._server.lost(self)
        self._signal_lost()
        if self._write_waiter is not None and not self._write_waiter.done():
            self._write_waiter.set_result(None)

    def pause_writing(self) -> None:
        """The socket's buffer is full: no more reading (and so no more answers) until it drains,
        and the peer has ``body_timeout`` to read before the connection is dropped."""
        self._write_waiter = self._loop.create_future()
        self.write_deadline = self._loop.time() + self._server.limits.body_timeout
        if not self.closed:
            self._server.stalled[self] = None  # evictable, as a slow connection is
        self._pause_reading()

    def resume_writing(self) -> None:
        if self._write_waiter is not None and not self._write_waiter.done():
            self._write_waiter.set_result(None)
        self._write_waiter = None
        self.write_deadline = None
        self._server.stalled.pop(self, None)
        if not self.queue and not self.closed:
            self._resume_reading()

    @property
    def holding(self) -> int:
        """The bytes of request bodies this connection has reserved."""
        held = self._request.reserved if self._request is not None else 0
        return held + sum(item.reserved for item in self.queue if isinstance(item, Request))

    # -- reading -----------------------------------------------------------------------------------

    def _tls_received(self, data: memoryview) -> None:
        tls, incoming = self._tls, self._tls_in
        assert tls is not None and incoming is not None
        incoming.write(data)
        if not self._handshaken:
            try:
                tls.do_handshake()
            except ssl.SSLWantReadError:
                self._flush_tls()
                return
            except (ssl.SSLError, OSError, ValueError) as exc:
                self._flush_tls()  # the alert, if any: close() lets it go out
                self._server.log.debug(
                    "%s: TLS handshake with %s failed: %s", self._server.name, _peer(self.peer), exc
                )
                self.close()
                return
            self._handshaken = True
            self.peercert = tls.getpeercert() or None
        plain = self._server._plain
        while not self.closed:
            try:
                n = cast(int, tls.read(_CHUNK, plain))  # into the buffer: the count
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:  # close_notify: the client is done sending
                if not self.eof_received():
                    self.close()
                break
            except (ssl.SSLError, OSError, ValueError) as exc:
                self._server.log.debug("%s: TLS error from %s: %s", self._server.name, _peer(self.peer), exc)
                self.abort()
                return
            if not n:  # close_notify, as SSLObject reports it (no SSLZeroReturnError)
                if not self.eof_received():
                    self.close()
                break
            self._received(plain[:n])
        self._flush_tls()

    def _received(self, data: memoryview) -> None:
        parser = self._parser
        if parser is None or self.closed:
            return
        if self.state == _IDLE:
            self._begin()
        if not self._headers_done:
            self._head_bytes += len(data)
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            # The request (its answer queued) asked for another protocol: answer it over HTTP/1.1
            # and close, since what follows on the connection is not HTTP/1.1.
            self._parser = None
            if self.queue and isinstance(self.queue[-1], Request):
                self.queue[-1].keep_alive = False
            else:
                self._refuse(400, "protocol upgrades are not supported")
        except httptools.HttpParserCallbackError as exc:
            cause = exc.__context__
            if isinstance(cause, _Refused):
                self._refuse(cause.status, cause.message, cause.headers)
            else:
                self._crashed("parsing a request", cause)
        except httptools.HttpParserError as exc:
            self._refuse(400, f"malformed request: {exc}")
        else:
            if (
                not self._headers_done
                and self.state == _HEAD
                and self._head_bytes > self._server.limits.max_head
            ):
                self._refuse(431, f"the request head is over {self._server.limits.max_head} bytes")

    def _begin(self) -> None:
        """The first byte of a request."""
        server = self._server
        self.state = _HEAD
        server.idle.pop(self, None)
        server.partial[self] = None
        if not self.fresh:
            self.deadline = self._loop.time() + server.limits.header_timeout

    # llhttp callbacks (a _Refused raised here stops the parser; the connection answers and closes)

    def on_message_begin(self) -> None:
        if self.closed:  # closed by a callback earlier in this read (stop(), say)
            raise _Refused(0, "the connection is closed")
        if self.state == _IDLE:  # a pipelined request in the same read as the one before
            self._begin()
        if len(self.queue) >= self._server.limits.max_pipelined:
            raise _Refused(0, "too many pipelined requests")

    def on_url(self, url: bytes) -> None:
        self._url += url
        if len(self._url) > self._server.limits.max_target:
            raise _Refused(414, f"the request target is over {self._server.limits.max_target} bytes")

    def on_header(self, name: bytes, value: bytes) -> None:
        limits = self._server.limits
        self._head_size += len(name) + len(value) + 4
        if len(self._fields) >= limits.max_headers:
            raise _Refused(431, f"over {limits.max_headers} header fields")
        if self._head_size > limits.max_head:
            raise _Refused(431, f"the request head is over {limits.max_head} bytes")
        if self._headers_done:  # a trailer: never, as chunked bodies are refused
            raise _Refused(400, "trailers are not accepted")
        sent = name.decode("latin-1")
        key = sent.lower()
        text = value.decode("latin-1").rstrip(" \t")
        before = self._fields.get(key)
        if before is None:
            self._fields[key] = text
            self._names[key] = sent
        elif key in _SINGLE:
            raise _Refused(400, f"the {sent} header is repeated")
        else:
            values = self._repeated.get(key)
            if values is None:
                values = self._repeated[key] = [before]
            values.append(text)
            self._fields[key] = f"{before}, {text}"

    def on_headers_complete(self) -> None:
        self._headers_done = True
        server, limits = self._server, self._server.limits
        parser = self._parser
        assert parser is not None
        if parser.get_http_version() not in ("1.1", "1.0"):
            raise _Refused(505, "only HTTP/1.1 and HTTP/1.0")
        target = self._url.decode("latin-1")
        self._path = _split_target(target)[0]
        route = server.resolve(self._path)
        if route is None:
            raise _Refused(404, "no such path")
        fields = self._fields
        method = parser.get_method().decode("latin-1")
        chunked = "transfer-encoding" in fields
        length_field = fields.get("content-length")
        if length_field is not None and not _DIGITS(length_field):
            raise _Refused(400, "Content-Length must be ASCII digits")
        length = int(length_field) if length_field is not None else 0
        if route.max_body == 0 and (chunked or length):
            raise _Refused(400, "request bodies are not accepted")
        if method not in route.methods:
            allowed = ", ".join(sorted(route.methods))
            raise _Refused(405, f"only {allowed}", (("Allow", allowed),))
        if route.max_body:
            if chunked:
                raise _Refused(411, "a Content-Length is required (Transfer-Encoding is not accepted)")
            if length_field is None and method in _BODY_METHODS:
                raise _Refused(411, "a Content-Length is required")
            if length > route.max_body:
                raise _Refused(413, f"the body is {length} bytes, over {route.max_body}")
        if route.content_types:
            media = fields.get("content-type", "").partition(";")[0].strip().lower()
            if media not in route.content_types:
                raise _Refused(
                    415, f"Content-Type {media!r} is not {' or '.join(sorted(route.content_types))}"
                )
        expect = fields.get("expect")
        if expect is not None and expect.lower() != "100-continue":
            raise _Refused(417, f"Expect: {expect!r} is not supported")
        first = min(length, _BODY_WINDOW)
        if first and not server.reserve(self, first):
            raise _Refused(503, "too many request bytes in flight; retry", (("Retry-After", "1"),))
        request = self._request = Request(
            method, target, fields, self._names, route, self.peer, self.peercert, self._repeated
        )
        request.reserved = first
        if length:
            self._expected = length
            self.state = _BODY
            server.bodies[self] = None
            self.deadline = self._loop.time() + limits.body_timeout
            if expect is not None and self.task is None and not self.queue:
                self._send(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        request = self._request
        assert request is not None
        self._arrived += len(body)
        if self._arrived > request.reserved:  # the reservation runs _BODY_WINDOW ahead
            more = min(self._expected, self._arrived + _BODY_WINDOW) - request.reserved
            if not self._server.reserve(self, more):
                raise _Refused(503, "too many request bytes in flight; retry", (("Retry-After", "1"),))
            request.reserved += more
        self._body.append(body)

    def on_message_complete(self) -> None:
        request, parser = self._request, self._parser
        assert request is not None and parser is not None
        body = self._body
        request.body = body[0] if len(body) == 1 else b"".join(body)
        request.keep_alive = parser.should_keep_alive()
        self._reset()
        self._done_parsing()
        self.fresh = False
        self._enqueue(request)

    def _done_parsing(self) -> None:
        self.state = _IDLE
        self.deadline = None
        self._server.partial.pop(self, None)
        self._server.bodies.pop(self, None)

    # -- answering ---------------------------------------------------------------------------------

    def _refuse(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> None:
        """Stop reading; answer ``status`` after the requests before it, then close."""
        self._parser = None
        path = self._path
        if self._request is not None:
            self._release(self._request)
        self._reset()
        self._done_parsing()
        if status:
            self._server.log_refusal(self, path, status, message)
            error = self._server.error(status, message)
            self._enqueue(_Reply(error._replace(headers=error.headers + headers)))
        else:
            self._enqueue(_Reply(None))

    def _enqueue(self, item: Request | _Reply) -> None:
        if self.closed or self._server._stopping:  # no handler starts once stop() has begun
            self._release(item)
            self.close()
            return
        self.queue.append(item)
        if self.task is None:
            task = self.task = self._loop.create_task(self._answer())
            self._server.tasks.add(task)
            task.add_done_callback(self._server.tasks.discard)
        else:
            self._pause_reading()

    async def _answer(self) -> None:
        server = self._server
        item: Request | _Reply | None = None
        try:
            while self.queue and not self.closed:
                item = self.queue.popleft()
                if not self.queue:
                    self._resume_reading()
                if isinstance(item, _Reply):
                    if item.response is None:
                        self.close()
                    else:
                        self._respond(item.response, keep_alive=False)
                        self._linger()
                    return
                response = await server.answer(item)
                if response.stream is not None:
                    self._release(item)
                    item = None
                    await self._stream(response)
                    self.close()
                    return
                keep_alive = item.keep_alive and not (self._eof or self.retiring or server._stopping)
                if not self.closed:
                    self._respond(response, keep_alive=keep_alive, head=item.method == "HEAD")
                self._release(item)
                item = None
                if not keep_alive:
                    self.close()
                    return
                if self._write_waiter is not None:  # no next answer before this one goes out
                    await self._write_waiter  # (write_deadline bounds the wait)
        except asyncio.CancelledError:
            self.close()
            raise
        except Exception:
            self._crashed("answering a request")
        finally:
            if item is not None:
                self._release(item)
            self.task = None
            if not self.closed and self.state == _IDLE and self._parser is not None:
                server.idle[self] = None  # between requests: the first to go when at the cap
                self.deadline = self._loop.time() + server.limits.idle_timeout

    def _respond(self, response: Response, *, keep_alive: bool, head: bool = False) -> None:
        status, body, content_type, headers, _ = response
        if (
            not 100 <= status <= 599
            or not _FIELD_VALUE(content_type)
            or not all(_TOKEN(k) and _FIELD_VALUE(v) for k, v in headers)
        ):
            self._server.log.error(
                "%s: a handler answered %r: not a valid HTTP response", self._server.name, status
            )
            status, body, content_type, headers, _ = self._server.error(500, "internal error")
            keep_alive = False
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers).encode("latin-1") if headers else b""
        data = b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: %s\r\n%s\r\n" % (
            status,
            _REASONS.get(status, b"Unknown"),
            content_type.encode("latin-1"),
            len(body),
            b"keep-alive" if keep_alive else b"close",
            extra,
        )
        self._send(data if head else data + body)

    async def _stream(self, response: Response) -> None:
        """Send ``response.stream``'s chunks as they come (see :class:`Response`)."""
        stream = response.stream
        assert stream is not None
        try:
            if self.closed:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
                return
            extra = "".join(f"{k}: {v}\r\n" for k, v in response.headers)
            if not all(_TOKEN(k) and _FIELD_VALUE(v) for k, v in response.headers) or not _FIELD_VALUE(
                response.content_type
            ):
                raise ValueError("a handler answered a stream with an invalid header")
            self._send(
                b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n"
                b"Connection: close\r\n%s\r\n"
                % (
                    response.status,
                    _REASONS.get(response.status, b"Unknown"),
                    response.content_type.encode("latin-1"),
                    extra.encode("latin-1"),
                )
            )
            lost = self._lost = self._loop.create_future()
            # one task iterates the stream (a generator's context managers stay in one task) and
            # is cancelled when the connection goes first
            pumping = asyncio.ensure_future(self._pump(stream))
            try:
                await asyncio.wait((pumping, lost), return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not pumping.done():
                    pumping.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await pumping
            if pumping.done() and not pumping.cancelled():
                pumping.result()
        finally:
            self._lost = None

    async def _pump(self, stream: AsyncIterator[bytes]) -> None:
        try:
            async for chunk in stream:
                if self.closed:
                    return
                if chunk:
                    self._send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                if self._write_waiter is not None:  # the peer reads slowly: wait (write_deadline bounds it)
                    await self._write_waiter
            self._send(b"0\r\n\r\n")
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    def _signal_lost(self) -> None:
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)

    def _send(self, data: bytes) -> None:
        transport = self.transport
        if transport is None or self.closed or transport.is_closing():
            return
        if self._tls is None:
            transport.write(data)
        else:
            self._tls.write(data)
            self._flush_tls()

    def _flush_tls(self) -> None:
        out = self._tls_out
        if out is not None and out.pending and self.transport is not None and not self.transport.is_closing():
            self.transport.write(out.read())

    # -- flow, limits, closing ---------------------------------------------------------------------

    def _pause_reading(self) -> None:
        if self._lingering >= 0:
            return  # dropping what still arrives after a refusal: keep reading
        if self._reading and self.transport is not None and not self.transport.is_closing():
            self._reading = False
            self.transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._write_waiter is not None and self._lingering < 0:
            return  # answers are not going out: read on once they do (resume_writing)
        if not self._reading and self.transport is not None and not self.transport.is_closing():
            self._reading = True
            self.transport.resume_reading()

    def _release(self, item: Request | _Reply) -> None:
        if isinstance(item, Request) and item.reserved:
            self._server.bytes_in_flight -= item.reserved
            item.reserved = 0

    def _release_all(self) -> None:
        if self._request is not None:
            self._release(self._request)
        for item in self.queue:
            self._release(item)
        self.queue.clear()

    def expire(self) -> None:
        """The deadline passed: a slow head or body is 408, an idle connection just closes."""
        if self.closed:
            return
        if self._write_waiter is not None:  # the peer stopped reading its answer
            self.abort()
        elif self._lingering >= 0:
            self.close()
        elif self.state != _IDLE and self.task is None and not self.queue:
            self._refuse(408, "the request took too long to arrive")
        elif self.state == _IDLE and self.task is None:
            self.close()
        # else: a pipelined partial request behind one being answered: checked again next tick

    def _linger(self) -> None:
        """Half-close after a refusal and drop what still arrives (see _LINGER_SECONDS)."""
        transport = self.transport
        if self.closed or transport is None or transport.is_closing() or not transport.can_write_eof():
            self.close()
            return
        self._parser = None
        self._release_all()
        if self._tls is not None and self._handshaken:
            with contextlib.suppress(ssl.SSLError, OSError, ValueError):
                self._tls.unwrap()  # close_notify
            self._flush_tls()
        transport.write_eof()
        self._lingering = 0
        self._server.partial.pop(self, None)
        self._server.idle[self] = None  # the first to go if a new connection needs the room
        self.deadline = self._loop.time() + _LINGER_SECONDS
        self._resume_reading()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._signal_lost()
        self._parser = None
        self._release_all()
        self._server.forget(self)
        transport = self.transport
        if self._tls is not None and self._handshaken and self._lingering < 0:
            with contextlib.suppress(ssl.SSLError, OSError, ValueError):
                self._tls.unwrap()  # close_notify
            self._flush_tls()
        if transport is not None:
            transport.close()
            if transport.get_write_buffer_size():  # a peer that stops reading cannot keep it
                if self in self._server.open:
                    self._server.flushing[self] = None  # counted by the cap, and evictable
                self._loop.call_later(self._server.limits.body_timeout, transport.abort)

    def abort(self) -> None:
        self.closed = True
        self._signal_lost()
        self._parser = None
        self._release_all()
        server = self._server
        server.forget(self)
        server.flushing.pop(self, None)
        if self.transport is not None:
            if self in server.open:
                server.aborting.add(self)  # connection_lost follows on the next loop turn
            self.transport.abort()

    def _crashed(self, what: str, cause: BaseException | None = None) -> None:
        server = self._server
        server.log.error(
            "%s: internal error %s from %s",
            server.name,
            what,
            _peer(self.peer),
            exc_info=cause if cause is not None else True,
        )
        if self.task is None and not self.queue and not self.closed:
            self._respond(server.error(500, "internal error"), keep_alive=False)
        self.close()
