"""A minimal HTTP/1.1 client on asyncio, for one API server: what the transport needs, no more.

One :class:`Pool` per server and TLS identity: at most ``max_connections`` connections, kept
alive and reused last-in-first-out (the most recently used connection is the one least likely to
have been closed by the server). A connection is closed, never reused, after any error, a
``Connection: close``, a response read to the end of the stream, or a stream the caller stopped
reading. A request on a reused connection that the server had closed meanwhile (nothing of the
response arrived) is sent again once on a new connection if it is idempotent.

Connections are :class:`asyncio.Protocol` instances that append what arrives to one bytearray;
the response is parsed in place: status line, headers (names lower-cased), then the body by
``Content-Length``, ``Transfer-Encoding: chunked`` or up to the end of the stream, gunzipped when
the server compressed it. Normal requests return the whole body; streaming requests (watches)
return a :class:`Response` whose :meth:`Response.chunks` yields the body as it arrives.

Failures raise :class:`ConnectError` (no connection: refused, DNS, TLS; ``cause`` is the
``OSError``), :class:`ConnectionClosed` (the server went away mid-exchange), :class:`ProtocolError`
(not HTTP/1.x) or :class:`TimeoutError`. HTTP(S) proxies are supported: ``CONNECT`` for https
servers, absolute request targets for http ones.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
import zlib
from collections.abc import AsyncIterator, Iterable
from urllib.parse import unquote, urlsplit

__all__ = ["ConnectError", "ConnectionClosed", "HttpError", "Pool", "ProtocolError", "Response"]

_MAX_HEAD = 256 * 1024  # status line + headers
_HIGH_WATER = 4 * 1024 * 1024  # a stream whose reader lags pauses the socket above this
_IDLE_TIMEOUT = 60.0  # idle connections older than this are closed instead of reused
_NO_BODY = frozenset((204, 304))


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
    """The server's answer is not valid HTTP/1.x."""


class _Conn(asyncio.Protocol):
    """One connection; bytes received are appended to ``buf`` and parsed by the reader."""

    __slots__ = (
        "_loop",
        "_need",
        "_waiter",
        "buf",
        "closed",
        "eof",
        "exc",
        "fresh",
        "idle_since",
        "paused",
        "transport",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.exc: BaseException | None = None
        self.eof = False
        self.closed = False
        self.paused = False
        self.fresh = True
        self.idle_since = 0.0
        self._waiter: asyncio.Future[None] | None = None
        self._need = 0

    # -- protocol callbacks ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        waiter = self._waiter
        if waiter is not None:
            if len(buf) < self._need:
                return  # the reader wants more (a whole body): never paused
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)
        # Nobody is waiting: a stream's reader is busy with what it has; stop reading above the mark.
        if len(buf) > _HIGH_WATER and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.eof = True
        if exc is not None and self.exc is None:
            self.exc = exc
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    # -- reading -----------------------------------------------------------------------------------

    async def fill(self, need: int) -> None:
        """Wait until ``buf`` holds at least ``need`` bytes; ConnectionClosed at the end of the stream."""
        while len(self.buf) < need:
            if self.exc is not None:
                raise self._closed_error()
            if self.eof:
                raise ConnectionClosed("the server closed the connection")
            if self.paused and self.transport is not None:
                self.paused = False
                self.transport.resume_reading()
            self._need = need
            self._waiter = self._loop.create_future()
            await self._waiter

    async def wait_data(self) -> None:
        """Wait for more bytes or the end of the stream (no error at the end)."""
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()
        self._need = len(self.buf) + 1
        self._waiter = self._loop.create_future()
        await self._waiter

    def _closed_error(self) -> BaseException:
        exc = self.exc
        if isinstance(exc, (TimeoutError, HttpError)):
            return exc
        if isinstance(exc, ConnectionResetError):
            return ConnectionClosed("the server reset the connection")
        return ConnectionClosed(f"the connection failed: {exc}")

    async def read_line(self, start: int, limit: int) -> int:
        """Index of the next CRLF at or after ``start`` (waits for it)."""
        while True:
            end = self.buf.find(b"\r\n", start)
            if end >= 0:
                return end
            if len(self.buf) > limit:
                raise ProtocolError("response line too long")
            start = max(start, len(self.buf) - 1)
            await self.fill(len(self.buf) + 1)

    def abort(self, exc: BaseException | None = None) -> None:
        if exc is not None and self.exc is None:
            self.exc = exc
        self.closed = True
        if self.transport is not None:
            self.transport.abort()
        self._wake()


class Response:
    """Status, headers (lower-cased names) and, for normal requests, the whole ``body``."""

    __slots__ = ("_body_reader", "_pool", "body", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self._pool: Pool | None = None
        self._body_reader: _BodyReader | None = None

    def header(self, name: str) -> str | None:
        """A header's value by lower-case name (repeated headers joined with ``", "``)."""
        return self.headers.get(name)

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body of a streaming response as it arrives (decompressed); closes when done."""
        reader = self._body_reader
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
        reader = self._body_reader
        if reader is None:
            return self.body
        try:
            parts = [chunk async for chunk in reader.iterate()]
        finally:
            self.close()
        self.body = b"".join(parts)
        return self.body

    def close(self) -> None:
        """Release the connection: back to the pool if the body was read to its end, else closed."""
        reader, self._body_reader = self._body_reader, None
        if isinstance(reader, _StreamBody) and reader._timer is not None:
            reader._timer.cancel()
        if reader is not None and self._pool is not None:
            self._pool._release(reader.conn, reuse=reader.done and reader.keep_alive)


class _BodyReader:
    """Reads one response body from a connection: by length, chunked or to the end of the stream."""

    __slots__ = ("_chunk_left", "_decoder", "_left", "_mode", "conn", "done", "keep_alive")

    def __init__(self, conn: _Conn, mode: str, length: int, gzip: bool, keep_alive: bool) -> None:
        self.conn = conn
        self._mode = mode  # "length", "chunked" or "eof"
        self._left = length
        self._chunk_left = 0
        self._decoder = zlib.decompressobj(wbits=47) if gzip else None
        self.keep_alive = keep_alive and mode != "eof"
        self.done = mode == "length" and length == 0

    async def iterate(self) -> AsyncIterator[bytes]:
        decoder = self._decoder
        async for raw in self._raw():
            yield decoder.decompress(raw) if decoder is not None else raw
        if decoder is not None:
            tail = decoder.flush()
            if tail:
                yield tail

    async def _raw(self) -> AsyncIterator[bytes]:
        conn = self.conn
        buf = conn.buf
        if self._mode == "length":
            while self._left > 0:
                if not buf:
                    await conn.fill(1)
                data = _take(buf, self._left)
                self._left -= len(data)
                yield data
            self.done = True
        elif self._mode == "eof":
            while True:
                if buf:
                    data = bytes(buf)
                    buf.clear()
                    yield data
                elif conn.eof:
                    if conn.exc is not None:
                        raise conn._closed_error()
                    break
                else:
                    await conn.wait_data()
            self.done = True
        else:
            while True:
                if self._chunk_left == 0:
                    size = await _chunk_size(conn)
                    if size == 0:
                        await _skip_trailers(conn)
                        self.done = True
                        return
                    self._chunk_left = size
                if not buf:
                    await conn.fill(1)
                data = _take(buf, self._chunk_left)
                self._chunk_left -= len(data)
                if self._chunk_left == 0:
                    await conn.fill(2)
                    if buf[:2] != b"\r\n":
                        raise ProtocolError("malformed chunked body: no CRLF after a chunk")
                    del buf[:2]
                yield data


def _take(buf: bytearray, most: int) -> bytes:
    """Remove and return up to ``most`` bytes from the front of ``buf``."""
    data = bytes(buf[:most])
    del buf[:most]
    return data


async def _chunk_size(conn: _Conn) -> int:
    end = await conn.read_line(0, 4096)
    line = bytes(conn.buf[:end])
    del conn.buf[: end + 2]
    try:
        size = int(line.split(b";", 1)[0].strip(), 16)
    except ValueError:
        raise ProtocolError(f"malformed chunked body: chunk size {line[:40]!r}") from None
    if size < 0:
        raise ProtocolError(f"malformed chunked body: chunk size {line[:40]!r}")
    return size


async def _skip_trailers(conn: _Conn) -> None:
    while True:
        end = await conn.read_line(0, _MAX_HEAD)
        del conn.buf[: end + 2]
        if end == 0:
            return


async def _read_chunked(conn: _Conn) -> bytes:
    """A whole chunked body (each chunk copied once)."""
    buf = conn.buf
    parts: list[bytes] = []
    while True:
        end = buf.find(b"\r\n")
        if end < 0:
            end = await conn.read_line(0, 4096)
        line = buf[:end]
        try:
            size = int(line.split(b";", 1)[0], 16)
        except ValueError:
            raise ProtocolError(f"malformed chunked body: chunk size {bytes(line[:40])!r}") from None
        if size < 0:
            raise ProtocolError(f"malformed chunked body: chunk size {bytes(line[:40])!r}")
        start = end + 2
        if size == 0:
            del buf[:start]
            await _skip_trailers(conn)
            return b"".join(parts) if len(parts) != 1 else parts[0]
        stop = start + size
        if len(buf) < stop + 2:
            await conn.fill(stop + 2)
        if buf[stop : stop + 2] != b"\r\n":
            raise ProtocolError("malformed chunked body: no CRLF after a chunk")
        parts.append(bytes(buf[start:stop]))
        del buf[: stop + 2]


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    try:
        text = head.decode("latin-1")
        lines = text.split("\r\n")
        version, _, rest = lines[0].partition(" ")
        if not version.startswith("HTTP/1."):
            raise ValueError
        status = int(rest[:3])
        if not 100 <= status <= 999 or rest[3:4] not in ("", " "):
            raise ValueError
    except ValueError:
        raise ProtocolError(f"malformed HTTP response: {head[:80]!r}") from None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name[-1] in " \t":
            raise ProtocolError(f"malformed HTTP header line: {line[:80]!r}")
        name = name.lower()
        value = value.strip()
        old = headers.get(name)
        headers[name] = value if old is None else f"{old}, {value}"
    return status, headers


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
    ) -> None:
        parts = urlsplit(url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port or (443 if self._https else 80)
        self._authority = parts.netloc.rpartition("@")[2]
        self._origin = f"{parts.scheme}://{self._authority}"
        self._ssl = ssl_context if self._https else None
        self._server_hostname = server_hostname or self._host
        self._connect_timeout = connect_timeout
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
        self._loop = asyncio.get_running_loop()
        self.closed = False

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
            transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            status, _ = await _read_head(conn)
            if status != 200:
                raise ConnectionRefusedError(f"the proxy answered CONNECT with HTTP {status}")
            conn.buf.clear()
            tls = await loop.start_tls(transport, conn, self._ssl, server_hostname=self._server_hostname)
        except BaseException:
            transport.close()
            raise
        if tls is None:  # pragma: no cover - only on a closed transport
            raise ConnectionResetError("the proxy closed the connection")
        conn.transport = tls
        return conn

    def _release(self, conn: _Conn, *, reuse: bool) -> None:
        self._slots.release()
        if reuse and not conn.closed and not conn.eof and not conn.buf and not self.closed:
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

    async def _checkout(self) -> _Conn:
        await self._slots.acquire()
        try:
            now = time.monotonic()
            while self._idle:
                conn = self._idle.pop()
                if conn.closed or conn.eof or conn.buf or now - conn.idle_since > _IDLE_TIMEOUT:
                    self._discard(conn)
                    continue
                return conn
            return await self._open()
        except BaseException:
            self._slots.release()
            raise

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
        if self._proxy is not None and self._ssl is None:
            target = self._origin + target
        lines = [f"{method} {target} HTTP/1.1\r\nHost: {self._authority}\r\n"]
        for name, value in headers:
            if "\n" in value or "\r" in value:
                raise ValueError(f"header {name} contains a line break")
            lines.append(f"{name}: {value}\r\n")
        if self._proxy_auth and self._proxy is not None and self._ssl is None:
            lines.append(f"Proxy-Authorization: {self._proxy_auth}\r\n")
        if body is not None:
            lines.append(f"Content-Length: {len(body)}\r\n")
        elif method in ("POST", "PUT", "PATCH"):
            lines.append("Content-Length: 0\r\n")
        lines.append("\r\n")
        return "".join(lines).encode()

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
        head = self._head(method, target, headers, body)
        data = head + body if body is not None and len(body) < 65536 else head
        if not stream:
            async with asyncio.timeout(timeout):
                return await self._exchange(method, data, head, body, idempotent, False, None)
        return await self._exchange(method, data, head, body, idempotent, True, stream_deadline)

    async def _exchange(
        self,
        method: str,
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
                    conn = await self._checkout()
            else:
                conn = await self._checkout()
            reused = not conn.fresh
            timer: asyncio.TimerHandle | None = None
            if deadline is not None:
                timer = self._loop.call_later(deadline, conn.abort, TimeoutError())
            try:
                transport = conn.transport
                assert transport is not None
                transport.write(data)
                if data is head and body:
                    transport.write(body)
                status, headers = await _read_head(conn)
            except ConnectionClosed:
                if timer is not None:
                    timer.cancel()
                self._release(conn, reuse=False)
                if reused and idempotent and not retried and not conn.buf:
                    retried = True
                    continue
                raise
            except BaseException:
                if timer is not None:
                    timer.cancel()
                self._release(conn, reuse=False)
                raise
            try:
                return await self._body(conn, method, status, headers, stream, timer)
            except BaseException:
                if timer is not None:
                    timer.cancel()
                self._release(conn, reuse=False)
                raise

    async def _body(
        self,
        conn: _Conn,
        method: str,
        status: int,
        headers: dict[str, str],
        stream: bool,
        timer: asyncio.TimerHandle | None,
    ) -> Response:
        keep_alive = "close" not in headers.get("connection", "").lower()
        encoding = headers.get("content-encoding", "").lower()
        gzip = encoding in ("gzip", "x-gzip", "deflate")
        if encoding and not gzip and encoding != "identity":
            raise ProtocolError(f"unsupported content-encoding {encoding!r}")
        te = headers.get("transfer-encoding", "").lower()
        length = -1
        if method == "HEAD" or status in _NO_BODY:
            mode, length = "length", 0
        elif te:
            if not te.endswith("chunked"):
                raise ProtocolError(f"unsupported transfer-encoding {te!r}")
            mode = "chunked"
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                length = -1
            if length < 0:
                raise ProtocolError(f"malformed content-length {headers['content-length']!r}")
            mode = "length"
        else:
            mode = "eof"
        if stream:
            resp = Response(status, headers)
            resp._pool = self
            resp._body_reader = _StreamBody(conn, mode, length, gzip, keep_alive, timer)
            return resp
        buf = conn.buf
        if mode == "length":
            if len(buf) < length:
                await conn.fill(length)
            if len(buf) == length:
                raw = bytes(buf)
                buf.clear()
            else:
                raw = bytes(buf[:length])
                del buf[:length]
        elif mode == "chunked":
            raw = await _read_chunked(conn)
        else:
            reader = _BodyReader(conn, mode, length, False, False)
            raw = b"".join([chunk async for chunk in reader._raw()])
            keep_alive = False
        if gzip and raw:
            try:
                raw = zlib.decompress(raw, wbits=47)
            except zlib.error as e:
                raise ProtocolError(f"malformed {encoding} body: {e}") from None
        self._release(conn, reuse=keep_alive)
        return Response(status, headers, raw)


class _StreamBody(_BodyReader):
    """A streaming body; cancels the stream's deadline when the connection is released."""

    __slots__ = ("_timer",)

    def __init__(
        self,
        conn: _Conn,
        mode: str,
        length: int,
        gzip: bool,
        keep_alive: bool,
        timer: asyncio.TimerHandle | None,
    ) -> None:
        super().__init__(conn, mode, length, gzip, keep_alive)
        self._timer = timer

    async def iterate(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in super().iterate():
                yield chunk
        except zlib.error as e:
            raise ProtocolError(f"malformed compressed body: {e}") from None
        finally:
            if self._timer is not None:
                self._timer.cancel()


async def _read_head(conn: _Conn) -> tuple[int, dict[str, str]]:
    """Status and headers of the next response; informational (1xx) responses are skipped."""
    buf = conn.buf
    while True:
        start = 0
        while True:
            end = buf.find(b"\r\n\r\n", start)
            if end >= 0:
                break
            if len(buf) > _MAX_HEAD:
                raise ProtocolError("response headers too large")
            start = max(0, len(buf) - 3)
            try:
                await conn.fill(len(buf) + 1)
            except ConnectionClosed:
                if buf:
                    raise ProtocolError(f"incomplete HTTP response: {bytes(buf[:80])!r}") from None
                raise
        status, headers = _parse_head(bytes(buf[:end]))
        del buf[: end + 4]
        if not 100 <= status < 200:
            return status, headers
