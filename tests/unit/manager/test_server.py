"""The manager's probe/metrics server, over real sockets on loopback."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry, Counter

from kubeop.manager.server import ProbeServer, parse_address


async def _exchange(port: int, raw: bytes, responses: int = 1) -> list[tuple[int, dict[str, str], bytes]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    await writer.drain()
    out = []
    for _ in range(responses):
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        lines = head.split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
        body = (
            await reader.readexactly(int(headers["content-length"]))
            if "head" not in raw[:4].decode().lower()
            else b""
        )
        out.append((status, headers, body))
    writer.close()
    return out


@pytest.fixture
async def server() -> ProbeServer:
    registry = CollectorRegistry()
    Counter("kubeop_test_total", "a test counter", registry=registry).inc(3)
    srv = ProbeServer("127.0.0.1:0", registry=registry)
    await srv.start()
    yield srv  # type: ignore[misc]
    await srv.stop()


async def test_health_ready_and_metrics(server: ProbeServer) -> None:
    [(status, _, body)] = await _exchange(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (status, body) == (200, b"ok")
    [(status, _, body)] = await _exchange(server.port, b"GET /readyz?verbose HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200 and b"[+]ping ok" in body
    [(status, headers, body)] = await _exchange(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200 and b"kubeop_test_total 3.0" in body
    assert headers["content-type"].startswith("text/plain")


async def test_a_failing_check_is_500_and_named(server: ProbeServer) -> None:
    def broken() -> bool:
        raise RuntimeError("cache not synced")

    async def fine() -> bool:
        return True

    server.ready["informers"] = broken
    server.ready["leader"] = fine
    [(status, _, body)] = await _exchange(server.port, b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 500
    assert b"[-]informers failed: cache not synced" in body and b"[+]leader ok" in body


async def test_keep_alive_serves_several_requests_on_one_connection(server: ProbeServer) -> None:
    two = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /livez HTTP/1.1\r\nHost: x\r\n\r\n"
    answers = await _exchange(server.port, two, responses=2)
    assert [a[0] for a in answers] == [200, 200]
    assert answers[0][1]["connection"] == "keep-alive"


async def test_unknown_path_wrong_method_and_garbage(server: ProbeServer) -> None:
    [(status, _, _)] = await _exchange(server.port, b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 404
    [(status, headers, _)] = await _exchange(server.port, b"DELETE /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 405 and headers["allow"] == "GET, HEAD"
    [(status, headers, _)] = await _exchange(server.port, b"nonsense\r\n\r\n")
    assert status == 400 and headers["connection"] == "close"
    body = b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
    [(status, _, _)] = await _exchange(server.port, body)
    assert status == 400


async def test_head_has_no_body(server: ProbeServer) -> None:
    [(status, headers, body)] = await _exchange(server.port, b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200 and headers["content-length"] == "2" and body == b""


async def test_stop_closes_idle_connections(server: ProbeServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    await server.stop()
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()


def test_parse_address() -> None:
    assert parse_address(":8080") == ("127.0.0.1", 8080)
    assert parse_address("0.0.0.0:0") == ("0.0.0.0", 0)
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_address("8080")


def test_parse_address_forms() -> None:
    assert parse_address("*:8080") == ("*", 8080)
    assert parse_address("[::1]:8080") == ("::1", 8080)
    for bad in (":8080²", ":70000", "host:", ":-1"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_address(bad)


@pytest.mark.parametrize(
    "raw",
    [
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\r\n  folded\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: \xb2\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET /healthz HTTP/1.1\nHost: x\n\n",
    ],
    ids=["two Hosts", "obs-fold", "non-ASCII length", "chunked", "bare LF"],
)
async def test_ambiguous_requests_are_400_and_close(server: ProbeServer, raw: bytes) -> None:
    [(status, headers, _)] = await _exchange(server.port, raw)
    assert status == 400 and headers["connection"] == "close"


async def test_an_extra_route_that_raises_is_a_500_logged_with_the_peer(
    server: ProbeServer, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken() -> tuple[int, bytes, str]:
        raise RuntimeError("boom")

    server.routes["/broken"] = broken
    [(status, headers, body)] = await _exchange(server.port, b"GET /broken HTTP/1.1\r\nHost: x\r\n\r\n")
    assert (status, headers["connection"]) == (500, "close") and b"boom" not in body
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert "GET /broken from 127.0.0.1:" in record.getMessage()
    assert (await _exchange(server.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))[0][0] == 200


async def test_idle_connections_are_capped_and_a_probe_still_answered() -> None:
    srv = ProbeServer("127.0.0.1:0", max_connections=4)
    await srv.start()
    conns = []
    try:
        for _ in range(12):
            conns.append(await asyncio.open_connection("127.0.0.1", srv.port))
        await asyncio.sleep(0.2)
        assert len([r for r, _ in conns if not r.at_eof()]) <= 4
        [(status, _, body)] = await asyncio.wait_for(
            _exchange(srv.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"), 2
        )
        assert (status, body) == (200, b"ok")
    finally:
        for _, writer in conns:
            writer.close()
        await srv.stop()
