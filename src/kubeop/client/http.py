"""A minimal HTTP/1.1 client on asyncio, for one API server: what the transport needs, no more.

One :class:`Pool` per server and TLS identity. Normal requests hold one of ``max_connections``
slots while they run; streaming requests (watches) stay open for minutes and never take a slot,
so any number of watches cannot starve the requests beside them (leader election's lease renewal
among them). Connections are kept alive and reused last-in-first-out (the most recently used
connection is the one least likely to have been closed by the server). A connection is closed,
never reused, after any error, a ``Connection: close``, a response read to the end of the stream,
a stream the caller stopped reading, or bytes the server sent beyond the response. A request on a
reused connection that the server had closed meanwhile (nothing of the response arrived) is sent
again once on a new connection if it is idempotent. Every connection has TCP keepalive on, so a
peer that vanished without a word is noticed within about a minute.

Connections are :class:`asyncio.Protocol` instances that feed what arrives to llhttp (the parser
of Node.js, through ``httptools``), strictly: a malformed status line, header, length or chunk
is a :class:`ProtocolError`, never guessed at. Bodies are framed by ``Content-Length``, ``chunked``
(the only transfer coding accepted) or the end of the stream, and gunzipped when the server
compressed them, never beyond ``max_body`` bytes. Normal requests return the whole body; streaming
requests return a :class:`Response` whose :meth:`Response.chunks` yields the body as it arrives.

Everything written to the socket is checked first: the method and request target must be plain
visible ASCII, header names HTTP tokens and header values free of control characters, so no
value can end a line and start another request.

Failures raise :class:`ConnectError` (no connection: refused, DNS, TLS; ``cause`` is the
``OSError``), :class:`ConnectionClosed` (the server went away mid-exchange), :class:`ProtocolError`
(not HTTP/1.x, or a body over ``max_body``) or :class:`TimeoutError`. HTTP(S) proxies are
supported: ``CONNECT`` for https servers, absolute request targets for http ones.
"""

from __future__ import annotations

import asyncio
import base64
import re
import socket
import ssl
import time
import zlib
from collections.abc import AsyncIterator, Iterable
from urllib.parse import unquote, urlsplit

import httptools

__all__ = ["ConnectError", "ConnectionClosed", "HttpError", "Pool", "ProtocolError", "Response"]

_MAX_HEAD = 256 * 1024  # status line + headers
_MAX_BODY = 512 * 1024 * 1024  # a whole (decompressed) response body
_STREAM_PIECE = 1024 * 1024  # a compressed stream is decompressed in pieces of at most this much
_HIGH_WATER = 4 * 1024 * 1024  # a stream whose reader lags pauses the socket above this
_IDLE_TIMEOUT = 60.0  # idle connections older than this are closed instead of reused
# TCP keepalive: probe after 30 s of silence, every 10 s, give up after 3 unanswered (~60 s).
_KEEPALIVE = (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3))

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+").fullmatch
_FIELD_VALUE = re.compile(r"[^\x00-\x08\x0a-\x1f\x7f]*").fullmatch
_TARGET = re.compile(r"[\x21-\x7e]+").fullmatch


class HttpError(Exception):
    """No (complete) HTTP answer."""


class ConnectError(HttpError):
    """The connection could not be made: ``cause`` is the ``OSError`` (``ssl.SSLError`` for TLS)."""

    def __init__(self, cause: OSError) -> None:
        self.cause = cause
        super().__init__(str(cause))


class ConnectionClosed(HttpError):
    """The server closed or reset the connection before the response was complete."""


class ProtocolError(HttpError):
    """The server's answer is not valid HTTP/1.x (or is larger than allowed)."""


class _ExtraResponse(Exception):
    """Raised inside the parser when a second response starts: stop parsing, never reuse."""


class _TooLarge(Exception):
    pass


def _keepalive(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is None:
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in _KEEPALIVE:
            option = getattr(socket, name, None)
            if option is not None:
                sock.setsockopt(socket.IPPROTO_TCP, option, value)
    except OSError:  # pragma: no cover - a socket type without these options
        pass


class _Conn(asyncio.Protocol):
    """One connection. Bytes received go through the response parser into this object's state.

    For each request :meth:`begin` sets up a fresh parser; its callbacks fill ``status``,
    ``headers`` and ``parts`` (body pieces not yet taken by the reader) and set ``head_done`` and
    ``complete``. The reader waits on one future, woken when the headers are complete, a body
    piece arrives (streams only), the response is complete, or the connection ends.
    """

    __slots__ = (
        "_loop",
        "_waiter",
        "body_bytes",
        "buffered",
        "closed",
        "complete",
        "dirty",
        "eof",
        "exc",
        "fresh",
        "head_bytes",
        "head_done",
        "headers",
        "idle_since",
        "informational",
        "keep_alive",
        "limit",
        "parser",
        "parts",
        "paused",
        "sample",
        "slot",
        "status",
        "stream",
        "transport",
        "until_eof",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self.parser: httptools.HttpResponseParser | None = None
        self.exc: BaseException | None = None
        self.eof = False
        self.closed = False
        self.paused = False
        self.fresh = True
        self.dirty = False  # bytes arrived that belong to no request: never reuse
        self.slot = False  # holds one of the pool's request slots
        self.idle_since = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._reset(stream=False, limit=_MAX_BODY)

    def _reset(self, *, stream: bool, limit: int) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.parts: list[bytes] = []
        self.body_bytes = 0
        self.buffered = 0
        self.head_bytes = 0
        self.head_done = False
        self.complete = False
        self.informational = False
        self.keep_alive = False
        self.until_eof = False
        self.sample = b""
        self.stream = stream
        self.limit = limit

    def begin(self, *, stream: bool, limit: int) -> None:
        """Expect a new response (called before the request is written)."""
        self._reset(stream=stream, limit=limit)
        self.parser = httptools.HttpResponseParser(self)

    # -- parser callbacks --------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self.complete:
            raise _ExtraResponse

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1").strip(" \t")
        old = self.headers.get(key)
        self.headers[key] = text if old is None else f"{old}, {text}"

    def on_headers_complete(self) -> None:
        parser = self.parser
        assert parser is not None
        status = parser.get_status_code()
        self.status = status
        if status < 100 or not self.sample.startswith(b"HTTP/1."):
            raise ProtocolError(f"malformed HTTP response: {self.sample!r}")
        if status == 101:
            raise ProtocolError(f"the server switched protocols unasked: {self.sample!r}")
        if status < 200:
            self.informational = True  # 100 Continue, 103 Early Hints: skipped (101 raises)
            return
        headers = self.headers
        te = headers.get("transfer-encoding")
        if te is not None and te.lower() != "chunked":
            raise ProtocolError(f"unsupported transfer-encoding {te!r} (only 'chunked')")
        self.keep_alive = parser.should_keep_alive()
        self.until_eof = te is None and "content-length" not in headers and status not in (204, 304)
        self.head_done = True
        waiter = self._waiter
        if waiter is not None and self.stream:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)
        if not self.stream:
            self.body_bytes += len(body)
            if self.body_bytes > self.limit:
                raise _TooLarge
            return
        self.buffered += len(body)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)
        elif self.buffered > _HIGH_WATER and not self.paused and self.transport is not None:
            # Nobody is waiting: the stream's reader is busy; stop reading above the mark.
            self.paused = True
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        if self.informational:
            self.informational = False  # the real response follows on the same parser
            self.status = 0
            self.headers = {}
            return
        self.complete = True
        self._wake()

    # -- protocol callbacks ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        _keepalive(transport)

    def data_received(self, data: bytes) -> None:
        parser = self.parser
        if parser is None or self.complete:
            self.dirty = True  # nobody asked for these bytes
            return
        if not self.head_done:
            if len(self.sample) < 80:
                self.sample += data[: 80 - len(self.sample)]
            self.head_bytes += len(data)
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(ProtocolError(f"the server switched protocols unasked: {self.sample!r}"))
            return
        except httptools.HttpParserCallbackError as e:
            cause = e.__context__
            if isinstance(cause, _ExtraResponse):
                self.dirty = True  # the response is whole; what follows it is not ours
            elif isinstance(cause, _TooLarge):
                self._fail(ProtocolError(f"response body larger than {self.limit} bytes"))
            elif isinstance(cause, ProtocolError):
                self._fail(cause)
            else:  # pragma: no cover - a bug in a callback
                self._fail(ProtocolError(f"cannot parse the response: {cause!r}"))
            return
        except httptools.HttpParserError as e:
            self._fail(ProtocolError(f"malformed HTTP response ({e}): {self.sample!r}"))
            return
        if not self.head_done and self.head_bytes > _MAX_HEAD:
            self._fail(ProtocolError("response headers too large"))

    def _fail(self, exc: BaseException) -> None:
        self.parser = None
        self.abort(exc)

    def eof_received(self) -> bool:
        self.eof = True
        if self.head_done and self.until_eof and not self.complete and self.exc is None:
            self.complete = True  # a body delimited by the end of the stream
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if exc is not None and self.exc is None:
            self.exc = exc  # first: a reset is no end of a body delimited by the end of the stream
        if not self.eof:
            self.eof_received()
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    # -- reading -----------------------------------------------------------------------------------

    async def wait(self) -> None:
        """Wait for the next event; raise if the connection failed or ended early."""
        if self.exc is not None:
            raise self._closed_error()
        if self.eof:
            if not self.head_done and self.sample:
                raise ProtocolError(f"incomplete HTTP response: {self.sample!r}")
            raise ConnectionClosed("the server closed the connection")
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        self._waiter = self._loop.create_future()
        await self._waiter

    async def read_head(self) -> None:
        while not self.head_done:
            await self.wait()

    async def read_all(self) -> None:
        while not self.complete:
            await self.wait()

    def take(self) -> list[bytes]:
        parts = self.parts
        self.parts = []
        self.buffered = 0
        return parts

    def _closed_error(self) -> BaseException:
        exc = self.exc
        if isinstance(exc, (TimeoutError, HttpError)):
            return exc
        if isinstance(exc, ConnectionResetError):
            return ConnectionClosed("the server reset the connection")
        return ConnectionClosed(f"the connection failed: {exc}")

    def reusable(self) -> bool:
        return self.complete and self.keep_alive and not self.dirty and not self.closed and not self.eof

    def abort(self, exc: BaseException | None = None) -> None:
        if exc is not None and self.exc is None:
            self.exc = exc
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
        self._wake()


class Response:
    """Status, headers (lower-cased names) and, for normal requests, the whole ``body``."""

    __slots__ = ("_body", "_pool", "body", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self._pool: Pool | None = None
        self._body: _StreamBody | None = None

    def header(self, name: str) -> str | None:
        """A header's value by lower-case name (repeated headers joined with ``", "``)."""
        return self.headers.get(name)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body of a streaming response as it arrives (decompressed); closes when done."""
        reader = self._body
        if reader is None:
            if self.body:
                yield self.body
            return
        try:
            async for chunk in reader.iterate():
                if chunk:
                    yield chunk
        finally:
            self.close()

    async def read(self) -> bytes:
        """The rest of a streaming response's body (for error responses), then release it."""
        reader = self._body
        if reader is None:
            return self.body
        parts: list[bytes] = []
        size = 0
        try:
            async for chunk in reader.iterate():
                size += len(chunk)
                if size > reader.conn.limit:
                    raise ProtocolError(f"response body larger than {reader.conn.limit} bytes")
                parts.append(chunk)
        finally:
            self.close()
        self.body = b"".join(parts)
        return self.body

    def close(self) -> None:
        """Release the connection: back to the pool if the body was read to its end, else closed."""
        reader, self._body = self._body, None
        if reader is None:
            return
        if reader.timer is not None:
            reader.timer.cancel()
        if self._pool is not None:
            self._pool._release(reader.conn, reuse=reader.conn.reusable())


class _StreamBody:
    """The body of a streaming response, decompressed in bounded pieces; owns the stream's deadline."""

    __slots__ = ("conn", "decoder", "timer")

    def __init__(self, conn: _Conn, gzip: bool, timer: asyncio.TimerHandle | None) -> None:
        self.conn = conn
        self.decoder = zlib.decompressobj(wbits=47) if gzip else None
        self.timer = timer

    async def iterate(self) -> AsyncIterator[bytes]:
        conn = self.conn
        decoder = self.decoder
        try:
            while True:
                if conn.parts:
                    for raw in conn.take():
                        if decoder is None:
                            yield raw
                            continue
                        data = decoder.decompress(raw, _STREAM_PIECE)
                        while True:
                            yield data
                            if not decoder.unconsumed_tail:
                                break
                            data = decoder.decompress(decoder.unconsumed_tail, _STREAM_PIECE)
                elif conn.complete:
                    break
                else:
                    await conn.wait()
            if decoder is not None:
                tail = decoder.flush()
                if tail:
                    yield tail
        except zlib.error as e:
            raise ProtocolError(f"malformed compressed body: {e}") from None
        finally:
            if self.timer is not None:
                self.timer.cancel()


def _gunzip(raw: bytes, encoding: str, limit: int) -> bytes:
    decoder = zlib.decompressobj(wbits=47)
    try:
        data = decoder.decompress(raw, limit + 1)
    except zlib.error as e:
        raise ProtocolError(f"malformed {encoding} body: {e}") from None
    if len(data) > limit:
        raise ProtocolError(f"response body larger than {limit} bytes once decompressed")
    return data


class Pool:
    """Keep-alive connections to one server (``http(s)://host[:port]``), optionally through a proxy."""

    def __init__(
        self,
        url: str,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None = None,
        max_connections: int = 100,
        connect_timeout: float | None = None,
        proxy_url: str | None = None,
        proxy_ssl_context: ssl.SSLContext | None = None,
        max_body: int = _MAX_BODY,
    ) -> None:
        parts = urlsplit(url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._https else 80)
        self._authority = parts.netloc.rpartition("@")[2]
        if not _TARGET(self._authority):
            raise ValueError(f"invalid server address {self._authority!r}")
        self._origin = f"{parts.scheme}://{self._authority}"
        self._ssl = ssl_context if self._https else None
        self._server_hostname = server_hostname or self._host
        self._connect_timeout = connect_timeout
        self._max_body = max_body
        self._proxy: tuple[str, int, bool] | None = None
        self._proxy_auth: str | None = None
        self._proxy_ssl = proxy_ssl_context
        if proxy_url:
            p = urlsplit(proxy_url)
            proxy_https = p.scheme == "https"
            self._proxy = (p.hostname or "", p.port or (443 if proxy_https else 80), proxy_https)
            if p.username is not None:
                pair = f"{unquote(p.username)}:{unquote(p.password or '')}".encode()
                self._proxy_auth = "Basic " + base64.b64encode(pair).decode("ascii")
        self._idle: list[_Conn] = []
        self._all: set[_Conn] = set()
        self._slots = asyncio.Semaphore(max_connections)
        self._checked: tuple[tuple[str, str], ...] | None = None  # the last header tuple validated
        self._loop = asyncio.get_running_loop()
        self.closed = False

    def __repr__(self) -> str:
        return f"<Pool {self._origin} {len(self._all)} connections>"

    # -- connections -----------------------------------------------------------------------------

    async def _open(self) -> _Conn:
        loop = self._loop
        try:
            if self._proxy is not None:
                conn = await self._open_via_proxy()
            else:
                _, conn = await loop.create_connection(
                    lambda: _Conn(loop),
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=self._server_hostname if self._ssl is not None else None,
                )
        except OSError as e:  # ssl.SSLError included
            raise ConnectError(e) from None
        self._all.add(conn)
        return conn

    async def _open_via_proxy(self) -> _Conn:
        loop = self._loop
        assert self._proxy is not None
        host, port, proxy_https = self._proxy
        proxy_ssl: ssl.SSLContext | None = None
        if proxy_https:
            proxy_ssl = self._proxy_ssl or ssl.create_default_context()
        transport, conn = await loop.create_connection(
            lambda: _Conn(loop), host, port, ssl=proxy_ssl, server_hostname=host if proxy_ssl else None
        )
        if self._ssl is None:
            return conn  # plain http: absolute request targets through the proxy
        try:
            where = f"[{self._host}]:{self._port}" if ":" in self._host else f"{self._host}:{self._port}"
            lines = [f"CONNECT {where} HTTP/1.1", f"Host: {where}"]
            if self._proxy_auth:
                lines.append(f"Proxy-Authorization: {self._proxy_auth}")
            conn.begin(stream=True, limit=0)
            transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            await conn.read_head()
            if conn.status == 407:
                raise ConnectionRefusedError(
                    "the proxy answered CONNECT with HTTP 407 (Proxy Authentication Required): it "
                    "wants a user and password in the proxy URL, or refused the ones given"
                )
            if conn.status != 200:
                raise ConnectionRefusedError(f"the proxy answered CONNECT with HTTP {conn.status}")
            if conn.parts:
                raise ConnectionRefusedError("the proxy sent data before the TLS handshake")
            conn.parser = None
            conn._reset(stream=False, limit=self._max_body)
            tls = await loop.start_tls(transport, conn, self._ssl, server_hostname=self._server_hostname)
        except HttpError as e:
            transport.close()
            raise ConnectionRefusedError(f"the proxy's answer to CONNECT: {e}") from None
        except BaseException:
            transport.close()
            raise
        if tls is None:  # pragma: no cover - only on a closed transport
            raise ConnectionResetError("the proxy closed the connection")
        conn.transport = tls
        return conn

    def _release(self, conn: _Conn, *, reuse: bool) -> None:
        if conn.slot:
            conn.slot = False
            self._slots.release()
        conn.parser = None
        if reuse and not conn.closed and not conn.eof and not conn.dirty and not self.closed:
            conn.fresh = False
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            self._discard(conn)

    def _discard(self, conn: _Conn) -> None:
        self._all.discard(conn)
        if not conn.closed:
            conn.closed = True
            if conn.transport is not None:
                conn.transport.close()

    async def _checkout(self, *, slot: bool) -> _Conn:
        """A connection; a normal request's holds a slot (``slot``), a stream's does not."""
        if slot:
            await self._slots.acquire()
        try:
            now = time.monotonic()
            while self._idle:
                conn = self._idle.pop()
                if conn.closed or conn.eof or conn.dirty or now - conn.idle_since > _IDLE_TIMEOUT:
                    self._discard(conn)
                    continue
                break
            else:
                conn = await self._open()
        except BaseException:
            if slot:
                self._slots.release()
            raise
        conn.slot = slot
        return conn

    async def close(self) -> None:
        """Close every connection, including those of requests and streams still running."""
        self.closed = True
        for conn in list(self._all):
            conn.abort(ConnectionClosed("the client closed its connection pool"))
        self._all.clear()
        self._idle.clear()

    # -- requests ----------------------------------------------------------------------------------

    def _head(
        self, method: str, target: str, headers: Iterable[tuple[str, str]], body: bytes | None
    ) -> bytes:
        if not _TOKEN(method):
            raise ValueError(f"invalid HTTP method {method[:40]!r}")
        if not _TARGET(target):
            raise ValueError(
                f"invalid request target {target[:80]!r}: only visible ASCII, no spaces or control characters"
            )
        if self._proxy is not None and self._ssl is None:
            target = self._origin + target
        lines = [f"{method} {target} HTTP/1.1\r\nHost: {self._authority}\r\n"]
        if headers is not self._checked:
            for name, value in headers:
                _check_header(name, value)
            if isinstance(headers, tuple):
                self._checked = headers  # the transport sends the same tuple again and again
        for name, value in headers:
            lines.append(f"{name}: {value}\r\n")
        if self._proxy_auth and self._proxy is not None and self._ssl is None:
            lines.append(f"Proxy-Authorization: {self._proxy_auth}\r\n")
        if body is not None:
            lines.append(f"Content-Length: {len(body)}\r\n")
        elif method in ("POST", "PUT", "PATCH"):
            lines.append("Content-Length: 0\r\n")
        lines.append("\r\n")
        return "".join(lines).encode("latin-1")

    async def request(
        self,
        method: str,
        target: str,
        headers: Iterable[tuple[str, str]],
        body: bytes | None = None,
        *,
        stream: bool = False,
        idempotent: bool = False,
        timeout: float | None = None,
        stream_deadline: float | None = None,
    ) -> Response:
        """Send one request; the response's body is read unless ``stream``.

        ``timeout`` bounds the whole exchange of a normal request (waiting for a free connection
        and connecting included); a stream has ``stream_deadline`` (seconds from now) for all of
        it, body included, and ``connect_timeout`` for getting a connection.
        """
        if self.closed:
            raise ConnectionClosed("the connection pool is closed")
        if method == "HEAD":
            raise ValueError("HEAD requests are not supported (a response to HEAD has no body)")
        head = self._head(method, target, headers, body)
        data = head + body if body is not None and len(body) < 65536 else head
        if not stream:
            async with asyncio.timeout(timeout):
                return await self._exchange(data, head, body, idempotent, False, None)
        return await self._exchange(data, head, body, idempotent, True, stream_deadline)

    async def _exchange(
        self,
        data: bytes,
        head: bytes,
        body: bytes | None,
        idempotent: bool,
        stream: bool,
        deadline: float | None,
    ) -> Response:
        retried = False
        while True:
            if stream or (self._connect_timeout is not None and not self._idle):
                async with asyncio.timeout(self._connect_timeout):
                    conn = await self._checkout(slot=not stream)
            else:
                conn = await self._checkout(slot=True)
            reused = not conn.fresh
            timer: asyncio.TimerHandle | None = None
            if deadline is not None:
                timer = self._loop.call_later(deadline, conn.abort, TimeoutError())
            try:
                conn.begin(stream=stream, limit=self._max_body)
                transport = conn.transport
                assert transport is not None
                transport.write(data)
                if data is head and body:
                    transport.write(body)
                if stream:
                    await conn.read_head()
                else:
                    await conn.read_all()
            except ConnectionClosed:
                if timer is not None:
                    timer.cancel()
                self._release(conn, reuse=False)
                if reused and idempotent and not retried and not conn.sample:
                    retried = True
                    continue
                raise
            except BaseException:
                if timer is not None:
                    timer.cancel()
                self._release(conn, reuse=False)
                raise
            try:
                return self._response(conn, stream, timer)
            except BaseException:
                if timer is not None:
                    timer.cancel()
                self._release(conn, reuse=False)
                raise

    def _response(self, conn: _Conn, stream: bool, timer: asyncio.TimerHandle | None) -> Response:
        headers = conn.headers
        encoding = headers.get("content-encoding", "").lower()
        gzip = encoding in ("gzip", "x-gzip", "deflate")
        if encoding and not gzip and encoding != "identity":
            raise ProtocolError(f"unsupported content-encoding {encoding!r}")
        if stream:
            resp = Response(conn.status, headers)
            resp._pool = self
            resp._body = _StreamBody(conn, gzip, timer)
            return resp
        parts = conn.take()
        raw = parts[0] if len(parts) == 1 else b"".join(parts)
        if gzip and raw:
            raw = _gunzip(raw, encoding, self._max_body)
        self._release(conn, reuse=conn.reusable())
        return Response(conn.status, headers, raw)


def _check_header(name: str, value: str) -> None:
    if not _TOKEN(name):
        raise ValueError(f"invalid HTTP header name {name[:40]!r}: must be a token (letters, digits, -)")
    if not _FIELD_VALUE(value):
        raise ValueError(
            f"invalid value of HTTP header {name}: control characters (CR, LF, NUL) are not allowed"
        )
