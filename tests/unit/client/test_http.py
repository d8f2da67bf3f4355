"""kubeop.client.http against scripted raw servers: framing, gzip, keep-alive, failures, proxies."""

from __future__ import annotations

import asyncio
import gzip
import re
import ssl
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from kubeop.client.config import ClientConfig
from kubeop.client.http import ConnectError, ConnectionClosed, Pool, ProtocolError
from kubeop.client.transport import ApiConnectionError, HttpTransport
from kubeop.core.request import ApiRequest

from .certs import self_signed

# Given (connection number, request number on it, request head, body): bytes to send back, a list
# of byte strings to send with pauses in between (CLOSE as the last one closes the connection after
# them), or None to close the connection without answer.
CLOSE = b"<close>"
Script = Callable[[int, int, bytes, bytes], bytes | list[bytes] | None]


class RawServer:
    """An HTTP/1.1 server on loopback that answers with whatever bytes the test scripts."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = self.connections
        self.connections += 1
        try:
            for n in range(1000):
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                answer = self.script(conn, n, head, body)
                if answer is None:
                    return
                for i, part in enumerate([answer] if isinstance(answer, bytes) else answer):
                    if part is CLOSE:
                        return
                    if i:
                        await asyncio.sleep(0.05)
                    writer.write(part)
                    await writer.drain()
        finally:
            writer.close()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()


def ok(body: bytes = b'{"a":1}', *, extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


def chunked(*parts: bytes, extra: str = "", trailers: str = "") -> bytes:
    out = f"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n{extra}\r\n".encode()
    for part in parts:
        out += f"{len(part):x}\r\n".encode() + part + b"\r\n"
    return out + b"0\r\n" + trailers.encode() + b"\r\n"


Serve = Callable[[Script], Awaitable[tuple[RawServer, Pool]]]


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    made: list[tuple[RawServer, Pool]] = []

    async def make(script: Script) -> tuple[RawServer, Pool]:
        server = RawServer(script)
        url = await server.start()
        pool = Pool(url, ssl_context=None, max_connections=4, connect_timeout=2.0)
        made.append((server, pool))
        return server, pool

    yield make
    for server, pool in made:
        await pool.close()
        await server.close()


H = (("Accept", "application/json"),)


async def test_content_length_and_keep_alive_reuse(serve: Serve) -> None:
    server, pool = await serve(lambda c, n, head, body: ok(b'{"n":%d}' % n, extra="X-Y: z\r\n"))
    for n in range(3):
        resp = await pool.request("GET", f"/x/{n}", H, timeout=2.0)
        assert (resp.status, resp.body, resp.header("x-y")) == (200, b'{"n":%d}' % n, "z")
    assert server.connections == 1  # one connection, kept alive
    assert server.requests[0].startswith(b"GET /x/0 HTTP/1.1\r\nHost: 127.0.0.1:")


async def test_request_body_is_sent_with_its_length(serve: Serve) -> None:
    server, pool = await serve(lambda c, n, head, body: ok(body))
    big = b"x" * 200_000  # written separately from the head
    assert (await pool.request("POST", "/p", H, b'{"k":"v"}', timeout=2.0)).body == b'{"k":"v"}'
    assert (await pool.request("PUT", "/p", H, big, timeout=2.0)).body == big
    assert b"Content-Length: 9\r\n" in server.requests[0]


async def test_chunked_body_split_anywhere_with_trailers(serve: Serve) -> None:
    payload = chunked(b"hello ", b"chunked ", b"world", trailers="X-Trailer: 1\r\n")
    parts = [payload[i : i + 5] for i in range(0, len(payload), 5)]
    server, pool = await serve(lambda c, n, head, body: parts if n == 0 else ok(b"next"))
    resp = await pool.request("GET", "/c", H, timeout=5.0)
    assert resp.body == b"hello chunked world"
    assert (await pool.request("GET", "/c", H, timeout=5.0)).body == b"next"
    assert server.connections == 1  # the chunked body was read exactly to its end


async def test_gzip_with_length_and_chunked(serve: Serve) -> None:
    doc = b'{"items":[' + b",".join(b'{"i":%d}' % i for i in range(5000)) + b"]}"
    packed = gzip.compress(doc)
    half = len(packed) // 2

    def script(c: int, n: int, head: bytes, body: bytes) -> bytes:
        if n == 0:
            return ok(packed, extra="Content-Encoding: gzip\r\n")
        return chunked(packed[:half], packed[half:], extra="Content-Encoding: gzip\r\n")

    _, pool = await serve(script)
    assert (await pool.request("GET", "/g", H, timeout=2.0)).body == doc
    assert (await pool.request("GET", "/g", H, timeout=2.0)).body == doc


async def test_connection_close_header_and_body_to_eof(serve: Serve) -> None:
    def script(c: int, n: int, head: bytes, body: bytes) -> bytes | None:
        if c == 0:
            return ok(b"one", extra="Connection: close\r\n")
        if c == 1:
            return [b"HTTP/1.1 200 OK\r\n\r\nno length, ", b"ends with the stream", CLOSE]
        return ok(b"three")

    server, pool = await serve(script)
    assert (await pool.request("GET", "/", H, timeout=2.0)).body == b"one"
    assert (await pool.request("GET", "/", H, timeout=2.0)).body == b"no length, ends with the stream"
    assert (await pool.request("GET", "/", H, timeout=2.0)).body == b"three"
    assert server.connections == 3


async def test_closed_between_requests_retries_idempotent_requests_once(serve: Serve) -> None:
    def script(c: int, n: int, head: bytes, body: bytes) -> bytes | None:
        # Every connection answers its first request and drops the second without an answer,
        # as a server does when its idle timeout races the client's next request.
        return ok(b"ok") if n == 0 else None

    server, pool = await serve(script)
    assert (await pool.request("GET", "/", H, timeout=2.0, idempotent=True)).body == b"ok"
    assert (await pool.request("GET", "/", H, timeout=2.0, idempotent=True)).body == b"ok"
    assert server.connections == 2  # sent again on a new connection, transparently
    with pytest.raises(ConnectionClosed, match="closed the connection"):
        await pool.request("POST", "/", H, b"{}", timeout=2.0)  # a write may have happened: no retry
    assert server.connections == 2


async def test_fresh_connection_closed_is_not_retried(serve: Serve) -> None:
    server, pool = await serve(lambda c, n, head, body: None)
    with pytest.raises(ConnectionClosed):
        await pool.request("GET", "/", H, timeout=2.0, idempotent=True)
    assert server.connections == 1


@pytest.mark.parametrize(
    ("answer", "error"),
    [
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "malformed HTTP response (Expected HTTP/"),
        (b"RTSP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", "malformed HTTP response: b'RTSP/1.0"),
        (b"HTTP/1.1 abc OK\r\n\r\n", "malformed HTTP response (Invalid status code)"),
        (b"HTTP/1.1 099 Low\r\n\r\n", "malformed HTTP response: b'HTTP/1.1 099"),
        (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "malformed HTTP response (Invalid header token)"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n", "Invalid character in Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok", "Invalid character in Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 0_2\r\n\r\nok", "Invalid character in Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok", "Duplicate Content-Length"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
            "Transfer-Encoding can't be present with Content-Length",
        ),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "Invalid character in chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\nok\r\n0\r\n\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd\r\n", "malformed HTTP response"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: xchunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", "'xchunked'"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
            "unsupported transfer-encoding 'gzip, chunked'",
        ),
        (b"HTTP/1.1 200 OK\r\nX-A: a\r\n folded\r\nContent-Length: 0\r\n\r\n", "malformed HTTP response"),
        (b"HTTP/1.1 200 OK\r\n X-A: a\r\nContent-Length: 0\r\n\r\n", "malformed HTTP response"),
        (b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n", "Invalid header value char"),
        (b"HTTP/1.1 200 OK\nContent-Length: 0\n\n", "malformed HTTP response"),
        (
            b"HTTP/1.1 101 Switching Protocols\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            "switched protocols unasked",
        ),
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc", "malformed gzip body"),
        (b"HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 3\r\n\r\nabc", "content-encoding 'br'"),
        (b"HTTP/1.1 200 OK\r\nContent-Le", "incomplete HTTP response"),
    ],
)
async def test_malformed_responses_are_clear_errors(serve: Serve, answer: bytes, error: str) -> None:
    _, pool = await serve(lambda c, n, head, body: [answer, CLOSE] if n == 0 else None)
    with pytest.raises(ProtocolError, match=re.escape(error)):
        await pool.request("GET", "/", H, timeout=2.0)


async def test_truncated_body_is_connection_closed(serve: Serve) -> None:
    _, pool = await serve(
        lambda c, n, head, body: [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", CLOSE]
    )
    with pytest.raises(ConnectionClosed, match="closed the connection"):
        await pool.request("GET", "/", H, timeout=2.0)


async def test_stream_yields_chunks_as_they_arrive(serve: Serve) -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    events = [b'{"type":"ADDED"}\n', b'{"type":"MODIFIED"}\n', b'{"type":"DELETED"}\n']
    parts = [head] + [f"{len(e):x}\r\n".encode() + e + b"\r\n" for e in events] + [b"0\r\n\r\n"]
    server, pool = await serve(lambda c, n, h, b: parts if n == 0 else ok(b"after"))
    resp = await pool.request("GET", "/w?watch=true", H, stream=True, stream_deadline=5.0)
    got = []
    async for chunk in resp.chunks():
        got.append(chunk)
    assert got == events  # one chunk at a time, not the whole body at the end
    assert (await pool.request("GET", "/", H, timeout=2.0)).body == b"after"
    assert server.connections == 1  # a stream read to its end returns the connection


async def test_gzipped_stream_and_stopping_early_closes_the_connection(serve: Serve) -> None:
    text = b"".join(b"line %d\n" % i for i in range(5000))
    packed = gzip.compress(text)
    parts = [packed[i : i + 1000] for i in range(0, len(packed), 1000)]
    payload = chunked(*parts, extra="Content-Encoding: gzip\r\n")
    split = [payload[:2000], payload[2000:]]  # a pause in between: the second stream is cut short
    server, pool = await serve(lambda c, n, h, b: payload if n == 0 else split)
    resp = await pool.request("GET", "/w", H, stream=True)
    assert b"".join([c async for c in resp.chunks()]) == text
    resp = await pool.request("GET", "/w", H, stream=True)
    async for _ in resp.chunks():
        break
    resp.close()
    await pool.request("GET", "/w", H, timeout=2.0)
    assert server.connections == 2  # the abandoned stream's connection was not reused


async def test_stream_deadline_and_request_timeout(serve: Serve) -> None:
    never = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b""] + [b""] * 100
    _, pool = await serve(lambda c, n, h, b: never)
    resp = await pool.request("GET", "/w", H, stream=True, stream_deadline=0.3)
    with pytest.raises(TimeoutError):
        async for _ in resp.chunks():
            pass
    with pytest.raises(TimeoutError):
        await pool.request("GET", "/", H, timeout=0.3)


async def test_connect_errors_carry_the_os_error() -> None:
    pool = Pool("http://127.0.0.1:1", ssl_context=None, connect_timeout=2.0)
    with pytest.raises(ConnectError) as info:
        await pool.request("GET", "/", H, timeout=2.0)
    assert isinstance(info.value.cause, ConnectionRefusedError)
    await pool.close()


async def test_transport_maps_http_errors_to_api_connection_errors(serve: Serve) -> None:
    server = RawServer(lambda c, n, head, body: b"HTTP/1.1 2OO OK\r\n\r\n")
    url = await server.start()
    transport = HttpTransport(ClientConfig(server=url, qps=None, max_retries=0, source="test config"))
    try:
        with pytest.raises(ApiConnectionError) as info:
            await transport.request(ApiRequest("GET", "/api/v1/namespaces"))
        text = str(info.value)
        assert text.startswith(f"connection to API server {url} (test config) failed: malformed HTTP")
        assert text.endswith("(GET /api/v1/namespaces)")
    finally:
        await transport.close()
        await server.close()


async def test_server_url_path_prefix_and_headers(serve: Serve) -> None:
    server = RawServer(lambda c, n, head, body: ok(b"{}", extra='Warning: 299 - "deprecated"\r\n'))
    url = await server.start()
    config = ClientConfig(server=url + "/prefix/", qps=None, token="t0k", user_agent="ua/1")
    transport = HttpTransport(config)
    try:
        assert await transport.request(ApiRequest("GET", "/api", query=(("a", "b c"),))) == {}
        assert await transport.request(ApiRequest("PATCH", "/api/x", body=b"{}", content_type="ct/x")) == {}
    finally:
        await transport.close()
        await server.close()
    get, patch = server.requests
    assert get.startswith(b"GET /prefix/api?a=b+c HTTP/1.1\r\n")
    for line in (b"Authorization: Bearer t0k", b"User-Agent: ua/1", b"Accept-Encoding: gzip"):
        assert line in get
    assert b"Content-Type: ct/x\r\n" in patch and b"Content-Length: 2\r\n\r\n{}" in patch


async def _connect_proxy(seen: list[bytes]) -> tuple[asyncio.Server, int]:
    """A forward proxy: CONNECT tunnels, or absolute-form requests relayed to the origin."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        seen.append(head)
        method, target, _ = head.split(b"\r\n", 1)[0].decode().split(" ")
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            hostport = target.split("/")[2]
            host, port = hostport.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            up_writer.write(head)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_http_proxy_with_connect_for_https_and_absolute_targets_for_http() -> None:
    cert, key = self_signed("127.0.0.1")
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "c.pem").write_bytes(cert)
        (Path(tmp) / "k.pem").write_bytes(key)
        server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server_ctx.load_cert_chain(Path(tmp) / "c.pem", Path(tmp) / "k.pem")
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.load_verify_locations(cadata=cert.decode())
    client_ctx.check_hostname = False  # the test certificate has no SAN; the chain is verified

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(ok(b"through"))
        await writer.drain()
        writer.close()

    origin_tls = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_ctx)
    origin_plain = await asyncio.start_server(answer, "127.0.0.1", 0)
    seen: list[bytes] = []
    proxy, proxy_port = await _connect_proxy(seen)
    tls_port = origin_tls.sockets[0].getsockname()[1]
    plain_port = origin_plain.sockets[0].getsockname()[1]
    proxy_url = f"http://user:p%40ss@127.0.0.1:{proxy_port}"
    try:
        pool = Pool(f"https://127.0.0.1:{tls_port}", ssl_context=client_ctx, proxy_url=proxy_url)
        assert (await pool.request("GET", "/a", H, timeout=5.0)).body == b"through"
        await pool.close()
        pool = Pool(f"http://127.0.0.1:{plain_port}", ssl_context=None, proxy_url=proxy_url)
        assert (await pool.request("GET", "/b", H, timeout=5.0)).body == b"through"
        await pool.close()
    finally:
        for s in (origin_tls, origin_plain, proxy):
            s.close()
    auth = b"Proxy-Authorization: Basic dXNlcjpwQHNz"  # user:p@ss
    assert seen[0].startswith(f"CONNECT 127.0.0.1:{tls_port} HTTP/1.1\r\n".encode()) and auth in seen[0]
    assert (
        seen[1].startswith(f"GET http://127.0.0.1:{plain_port}/b HTTP/1.1\r\n".encode()) and auth in seen[1]
    )


async def test_bodies_larger_than_the_read_buffer_mark(serve: Serve) -> None:
    big = bytes(range(256)) * 40_000  # 10 MB: above the mark where a lagging stream pauses reading
    server, pool = await serve(
        lambda c, n, h, b: ok(big) if n % 2 == 0 else chunked(big[:7_000_000], big[7_000_000:])
    )
    assert (await pool.request("GET", "/", H, timeout=10.0)).body == big
    assert (await pool.request("GET", "/", H, timeout=10.0)).body == big
    resp = await pool.request("GET", "/", H, stream=True)
    got = bytearray()
    async for chunk in resp.chunks():
        await asyncio.sleep(0.01)  # a slow reader: the socket is paused and resumed
        got += chunk
    assert got == big and server.connections == 1
