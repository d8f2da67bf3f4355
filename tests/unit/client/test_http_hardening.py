"""The HTTP client's boundaries (issue 12): watches never starve requests, nothing unchecked reaches
the socket, bodies are capped, bytes beyond a response poison its connection, every connection has
TCP keepalive, and every watch has a read deadline."""

from __future__ import annotations

import asyncio
import gzip
import socket
import time
from collections.abc import AsyncIterator

import pytest

from kubeop.client import transport as transport_module
from kubeop.client.config import ClientConfig
from kubeop.client.http import Pool, ProtocolError
from kubeop.client.transport import ApiConnectionError, HttpTransport
from kubeop.client.watch import split_lines
from kubeop.core.request import ApiRequest

from .test_http import CLOSE, H, RawServer, Serve, chunked, ok, serve

__all__ = ["serve"]  # the fixture, re-exported for pytest


def _stream_forever(c: int, n: int, head: bytes, body: bytes) -> bytes | list[bytes]:
    if head.startswith(b"GET /watch"):
        return [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"] + [b""] * 200  # ~10 s open
    return ok(b"fine")


async def test_open_watches_never_starve_requests() -> None:
    server = RawServer(_stream_forever)
    url = await server.start()
    pool = Pool(url, ssl_context=None, max_connections=3, connect_timeout=2.0)
    try:
        watches = [await pool.request("GET", f"/watch/{i}", H, stream=True) for i in range(10)]
        started = time.monotonic()
        # More requests at once than there are slots: they share the slots, none waits on a watch.
        answers = await asyncio.gather(*(pool.request("GET", "/x", H, timeout=2.0) for _ in range(6)))
        assert [a.body for a in answers] == [b"fine"] * 6
        assert time.monotonic() - started < 1.0
        for w in watches:
            w.close()
    finally:
        await pool.close()
        await server.close()


@pytest.mark.parametrize(
    ("method", "target", "headers", "error"),
    [
        ("GET", "/api/v1/namespaces/a/configmaps/x/status HTTP/1.1\r\nX: y\r\n\r\nDELETE /", H, "target"),
        ("GET", "/a b", H, "target"),
        ("GET", "/a\x00b", H, "target"),
        ("GET", "/caf\u00e9", H, "target"),
        ("GET", "", H, "target"),
        ("GE T", "/", H, "method"),
        ("GET\r\n", "/", H, "method"),
        ("GET", "/", (("Impersonate-User\r\nX", "admin"),), "header name"),
        ("GET", "/", (("X Y", "1"),), "header name"),
        ("GET", "/", (("X:Y", "1"),), "header name"),
        ("GET", "/", (("", "1"),), "header name"),
        ("GET", "/", (("X-A", "1\r\nImpersonate-User: admin"),), "control characters"),
        ("GET", "/", (("X-A", "1\nB"),), "control characters"),
        ("GET", "/", (("X-A", "a\x00b"),), "control characters"),
    ],
)
async def test_nothing_unchecked_reaches_the_socket(
    serve: Serve, method: str, target: str, headers: tuple[tuple[str, str], ...], error: str
) -> None:
    server, pool = await serve(lambda c, n, h, b: ok())
    with pytest.raises(ValueError, match=error):
        await pool.request(method, target, headers, timeout=2.0)
    assert server.connections == 0 and server.requests == []


async def test_header_tuple_is_checked_even_after_a_good_one(serve: Serve) -> None:
    _, pool = await serve(lambda c, n, h, b: ok())
    good = (("X-A", "1"),)
    await pool.request("GET", "/", good, timeout=2.0)
    await pool.request("GET", "/", good, timeout=2.0)  # the same tuple: checked once
    with pytest.raises(ValueError):
        await pool.request("GET", "/", [("X-A", "1\r\n")], timeout=2.0)
    with pytest.raises(ValueError):
        await pool.request("GET", "/", (("X-A", "2\r\n"),), timeout=2.0)


async def test_head_requests_are_refused(serve: Serve) -> None:
    _, pool = await serve(lambda c, n, h, b: ok())
    with pytest.raises(ValueError, match="HEAD"):
        await pool.request("HEAD", "/", H, timeout=2.0)


async def test_bodies_over_the_cap_are_refused_gzip_bombs_included() -> None:
    bomb = gzip.compress(b"\0" * 50_000_000)  # ~50 KB that would be 50 MB
    answers = {
        0: f"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {len(bomb)}\r\n\r\n".encode()
        + bomb,
        1: ok(b"x" * 2_000_000),
        2: chunked(b"y" * 900_000, b"y" * 900_000),
        3: ok(b"z" * 1000),
    }
    server = RawServer(lambda c, n, h, b: answers[int(h.split(b" ")[1][1:])])
    url = await server.start()
    pool = Pool(url, ssl_context=None, max_body=1_000_000)
    try:
        for n in (0, 1, 2):
            with pytest.raises(ProtocolError, match="larger than 1000000 bytes"):
                await pool.request("GET", f"/{n}", H, timeout=5.0)
        assert (await pool.request("GET", "/3", H, timeout=5.0)).body == b"z" * 1000
    finally:
        await pool.close()
        await server.close()


async def test_a_compressed_stream_is_decompressed_in_bounded_pieces(serve: Serve) -> None:
    bomb = gzip.compress(b"\0" * 20_000_000)
    _, pool = await serve(lambda c, n, h, b: chunked(bomb, extra="Content-Encoding: gzip\r\n"))
    resp = await pool.request("GET", "/w", H, stream=True)
    sizes = [len(c) async for c in resp.chunks()]
    assert sum(sizes) == 20_000_000 and max(sizes) <= 1024 * 1024


async def test_bytes_after_a_response_poison_the_connection(serve: Serve) -> None:
    forged = ok(b"one") + ok(b"forged")
    server, pool = await serve(lambda c, n, h, b: forged if c == 0 else ok(b"two"))
    assert (await pool.request("GET", "/", H, timeout=2.0)).body == b"one"
    assert (await pool.request("GET", "/", H, timeout=2.0)).body == b"two"  # not "forged"
    assert server.connections == 2


async def test_informational_responses_are_skipped(serve: Serve) -> None:
    early = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + ok(b"final")
    _, pool = await serve(lambda c, n, h, b: early)
    resp = await pool.request("GET", "/", H, timeout=2.0)
    assert resp.status == 200 and resp.body == b"final" and "link" not in resp.headers


async def test_a_reset_mid_body_to_end_of_stream_is_no_complete_answer(serve: Serve) -> None:
    _, pool = await serve(lambda c, n, h, b: [b"HTTP/1.1 200 OK\r\n\r\npartial", CLOSE])
    resp = await pool.request("GET", "/", H, timeout=2.0)
    assert resp.body == b"partial"  # a clean close ends such a body: that is its framing


async def test_every_connection_has_tcp_keepalive(serve: Serve) -> None:
    _, pool = await serve(lambda c, n, h, b: ok())
    await pool.request("GET", "/", H, timeout=2.0)
    (conn,) = pool._all
    assert conn.transport is not None
    sock = conn.transport.get_extra_info("socket")
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 30


async def test_a_watch_without_timeout_seconds_still_has_a_read_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = RawServer(_stream_forever)
    url = await server.start()
    monkeypatch.setattr(transport_module, "_WATCH_DEFAULT_DEADLINE", 0.2)
    monkeypatch.setattr(transport_module, "_WATCH_GRACE", 0.1)
    transport = HttpTransport(ClientConfig(server=url, qps=None, max_retries=0))
    try:
        req = ApiRequest("GET", "/watch/x", (("watch", "1"),), stream=True)
        started = time.monotonic()
        with pytest.raises(ApiConnectionError, match="timed out"):
            async for _ in transport.stream(req):
                pass
        assert time.monotonic() - started < 2.0
    finally:
        await transport.close()
        await server.close()


async def test_a_watch_line_without_end_is_refused() -> None:
    async def endless() -> AsyncIterator[bytes]:
        yield b'{"type":"ADDED"}\n'
        while True:
            yield b"x" * 1000

    got = []
    with pytest.raises(ProtocolError, match="longer than 100000 bytes"):
        async for line in split_lines(endless(), max_line=100_000):
            got.append(line)
    assert got == [b'{"type":"ADDED"}']
