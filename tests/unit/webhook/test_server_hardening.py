"""WebhookServer against hostile clients: strict HTTP parsing, floods, slow peers, broken handlers.

Plain HTTP (``insecure=True``) on loopback unless TLS is the point: the HTTP layer is the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

import kubeop
from kubeop.webhook.certs import local_certificates
from kubeop.webhook.server import WebhookServer

BIG = 16 * 1024 * 1024  # an answer larger than what the kernel buffers for a peer that does not read


class Echo:
    """Routes answering 200 with what the server handed over (path, body, headers)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def handle(
        self,
        path: str,
        body: bytes,
        timeout: float | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        peer: Mapping[str, Any] | None = None,
    ) -> tuple[int, bytes]:
        self.seen.append({"path": path, "body": body, "headers": dict(headers or {}), "timeout": timeout})
        if path == "/raise":
            raise RuntimeError("a bug in the routes")
        if path == "/cancelled":  # awaits a future something else cancelled
            future = asyncio.get_running_loop().create_future()
            future.cancel()
            await future
        if path == "/slow":
            await asyncio.sleep(0.3)
        if path == "/stubborn":  # takes its time to give up when cancelled
            try:
                await asyncio.sleep(5)
            except asyncio.CancelledError:
                await asyncio.sleep(0.3)
                raise
        if path == "/big":
            return 200, b'"' + b"x" * BIG + b'"'
        return 200, orjson.dumps({"path": path, "length": len(body)})

    def __len__(self) -> int:
        return 1


async def started(**options: Any) -> WebhookServer:
    srv = WebhookServer(Echo(), "127.0.0.1:0", insecure=True, **options)
    await srv.start()
    return srv


@pytest.fixture
async def server() -> AsyncIterator[WebhookServer]:
    srv = await started(max_body=64 * 1024)
    yield srv
    await srv.stop()


def post(path: str = "/v", body: bytes = b"{}", *extra: str, length: str | None = None) -> bytes:
    head = [f"POST {path} HTTP/1.1", "Host: x", "Content-Type: application/json"]
    head.append(f"Content-Length: {len(body) if length is None else length}")
    return ("\r\n".join([*head, *extra]) + "\r\n\r\n").encode("utf-8") + body


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    lines = head.split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
    body = await reader.readexactly(int(headers["content-length"]))
    return status, headers, body


async def exchange(srv: WebhookServer, raw: bytes) -> tuple[int, dict[str, str], bytes, bool]:
    """Send ``raw``; (status, headers, body, whether the server then closed the connection)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    try:
        writer.write(raw)
        async with asyncio.timeout(5):
            status, headers, body = await read_response(reader)
            closed = await reader.read() == b"" if headers.get("connection") == "close" else False
        return status, headers, body, closed
    finally:
        writer.close()


# -- strict parsing (llhttp) and ASCII lengths -------------------------------------------------------


@pytest.mark.parametrize("length", ["²", "٣", "+2", "2, 2", " 0x2", "1_0"])
async def test_a_content_length_of_anything_but_ascii_digits_is_400(
    server: WebhookServer, length: str, caplog: pytest.LogCaptureFixture
) -> None:
    status, _, body, closed = await exchange(server, post(length=length))
    assert (status, closed) == (400, True)
    assert b"Content-Length" in body
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert (await exchange(server, post()))[0] == 200


@pytest.mark.parametrize(
    ("raw", "what"),
    [
        (post("/v", b"{}", "Content-Type: text/plain"), "Content-Type"),
        (post("/v", b"{}", "Content-Length: 2"), "Content-Length"),
        (post("/v", b"{}", "Content-Length: 20"), "Content-Length"),
        (post("/v", b"{}", "Host: y"), "Host"),
        (post("/v", b"{}", "Authorization: Bearer a", "Authorization: Bearer b"), "Authorization"),
        (post("/v", b"{}", "Transfer-Encoding: chunked"), "Transfer-Encoding"),
        (post("/v", b"{}", "X-Folded: a", "  b"), "whitespace"),  # obs-fold
        (post("/v", b"{}", "Bad Name: x"), "header token"),
        (post("/v", b"{}", "X-Ctl: a\x01b"), "header value"),
        (b"POST /v HTTP/1.1\nHost: x\nContent-Length: 2\n\n{}", "CRLF"),
        (b"POST /v HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", "Content-Length"),
        (b"POST /v HTTP/1.1\r\nTransfer-Encoding: chunked, identity\r\n\r\n", "Transfer-Encoding"),
    ],
    ids=[
        "two Content-Types",
        "two equal Content-Lengths",
        "two Content-Lengths",
        "two Hosts",
        "two Authorizations",
        "Content-Length and Transfer-Encoding",
        "obs-fold",
        "space in a header name",
        "control character in a value",
        "bare LF",
        "chunked",
        "chunked then identity",
    ],
)
async def test_ambiguous_or_malformed_heads_are_refused_never_guessed(
    server: WebhookServer, raw: bytes, what: str
) -> None:
    status, _, body, closed = await exchange(server, raw)
    assert status in (400, 411) and closed, (status, body)
    assert what.lower() in orjson.loads(body)["message"].lower()
    assert (await exchange(server, post()))[0] == 200


async def test_a_repeated_list_header_is_joined_not_collapsed(server: WebhookServer) -> None:
    echo = server.webhooks
    assert isinstance(echo, Echo)
    raw = post("/v", b"{}", "X-Trace: a", "x-trace: b", "X-Other: c")
    assert (await exchange(server, raw))[0] == 200
    headers = echo.seen[-1]["headers"]
    assert headers["X-Trace"] == "a, b" and headers["X-Other"] == "c" and "x-trace" not in headers


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (post("/v", b"{}", *(f"X-H{i}: v" for i in range(101))), 431),
        (post("/v", b"{}", "X-Big: " + "v" * 17_000), 431),
        (post("/" + "a" * 9000), 414),
        (b"POST /v HTTP/2.0\r\nContent-Length: 2\r\n\r\n{}", 505),
        (
            b"POST /v HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 2\r\nExpect: x\r\n\r\n{}",
            417,
        ),
        (b"\r\n" * 9000, 431),
    ],
    ids=["101 headers", "17 kB header", "9 kB target", "HTTP/2.0", "Expect: x", "endless CRLF"],
)
async def test_request_line_and_head_limits(server: WebhookServer, raw: bytes, status: int) -> None:
    got, _, _, closed = await exchange(server, raw)
    assert (got, closed) == (status, True)


async def test_an_absolute_form_target_is_routed_by_its_path(server: WebhookServer) -> None:
    echo = server.webhooks
    assert isinstance(echo, Echo)
    for target, path in [("http://h:1/v?timeout=3s", "/v"), ("http://[", "/"), ("http://h", "/")]:
        raw = post(target)
        assert (await exchange(server, raw))[0] == 200
        assert echo.seen[-1]["path"] == path
    assert echo.seen[0]["timeout"] == 3.0


def test_a_byte_budget_below_max_body_is_refused() -> None:
    with pytest.raises(ValueError, match=r"max_bytes_in_flight=1000.*max_body=2000"):
        WebhookServer(Echo(), insecure=True, max_body=2000, max_bytes_in_flight=1000)


async def test_expect_100_continue_is_answered_before_the_body(server: WebhookServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(post("/v", b"", "Expect: 100-continue", length="2"))
        async with asyncio.timeout(5):
            assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 100 Continue\r\n\r\n"
            writer.write(b"{}")
            assert (await read_response(reader))[0] == 200
    finally:
        writer.close()


async def test_pipelined_requests_are_answered_in_order_and_depth_is_bounded(server: WebhookServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(post("/slow") + post("/a") + post("/b", b"{1}"))
        async with asyncio.timeout(5):
            answers = [orjson.loads((await read_response(reader))[2])["path"] for _ in range(3)]
        assert answers == ["/slow", "/a", "/b"]
    finally:
        writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(post("/slow") + post("/x") * 50)  # more than 8 waiting: answered, then closed
        async with asyncio.timeout(5):
            rest = await reader.read(-1)
        assert 1 <= rest.count(b"HTTP/1.1 200 OK") <= 10
    finally:
        writer.close()


async def test_a_protocol_upgrade_is_answered_then_the_connection_closes(server: WebhookServer) -> None:
    raw = post("/v", b"{}", "Connection: Upgrade", "Upgrade: h2c") + b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    status, headers, _, closed = await exchange(server, raw)
    assert (status, headers["connection"], closed) == (200, "close", True)


# -- exceptions never escape to asyncio's logger -----------------------------------------------------


async def test_an_exception_in_the_routes_is_a_500_logged_with_the_peer(
    server: WebhookServer, caplog: pytest.LogCaptureFixture
) -> None:
    unhandled: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: unhandled.append(ctx))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    port = writer.get_extra_info("sockname")[1]
    try:
        writer.write(post("/raise"))
        async with asyncio.timeout(5):
            status, headers, body = await read_response(reader)
            assert await reader.read() == b""
    finally:
        writer.close()
    assert (status, headers["connection"]) == (500, "close")
    assert orjson.loads(body) == {"message": "internal error"}
    [record] = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert f"127.0.0.1:{port}" in record.getMessage() and record.exc_info is not None
    assert "a bug in the routes" not in body.decode()  # the caller sees no internals
    assert unhandled == []


# -- deadlines -----------------------------------------------------------------------------------------


async def test_a_slow_head_is_cut_off_at_the_header_deadline() -> None:
    srv = await started(header_timeout=0.4)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)

        async def dribble() -> None:  # slowloris: a byte every 20 ms, for ever
            with contextlib.suppress(ConnectionError):
                for byte in b"POST /v HTTP/1.1\r\nX-Slow: " + b"a" * 10_000:
                    writer.write(bytes([byte]))
                    await asyncio.sleep(0.02)

        slow = asyncio.ensure_future(dribble())
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(3):
                status, _, _ = await read_response(reader)
                assert await reader.read() == b""
        finally:
            slow.cancel()
            writer.close()
        assert status == 408 and time.monotonic() - t0 < 2.5  # the old server waited 90 s
        # a connection that sends nothing at all is closed at the same deadline
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        async with asyncio.timeout(2):
            assert await reader.read() == b""
        writer.close()
    finally:
        await srv.stop()


async def test_a_slow_body_is_cut_off_at_the_body_deadline() -> None:
    srv = await started(body_timeout=0.4)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        writer.write(post(length="1000") + b"{")
        t0 = time.monotonic()
        async with asyncio.timeout(3):
            status, _, _ = await read_response(reader)
            assert await reader.read() == b""
        assert status == 408 and time.monotonic() - t0 < 2.5  # the old server waited 30 s
        assert srv._http is not None and srv._http.bytes_in_flight == 0
        writer.close()
    finally:
        await srv.stop()


async def test_a_keep_alive_connection_between_requests_keeps_its_idle_time() -> None:
    """The header deadline runs from a request's first byte, not from the previous answer."""
    srv = await started(header_timeout=0.3)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        writer.write(post())
        assert (await read_response(reader))[0] == 200
        await asyncio.sleep(0.6)
        writer.write(post())
        async with asyncio.timeout(3):
            assert (await read_response(reader))[0] == 200
        writer.close()
    finally:
        await srv.stop()


# -- floods: connections and bytes in flight ----------------------------------------------------------


def _server_side() -> int:
    """Bytes traced in allocations made by kubeop's code: the server's buffers and bookkeeping,
    not the test's own client connections (whose unsent writes asyncio buffers in this process,
    more of them the busier the machine)."""
    package = os.path.join(os.path.dirname(kubeop.__file__), "*")
    snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, package)])
    return sum(stat.size for stat in snapshot.statistics("filename"))


async def test_a_flood_of_idle_and_partial_connections_is_capped_and_a_real_call_still_answered() -> None:
    """Scaled down from the review's 3,000 idle + 30 partial 7 MiB bodies."""
    cap, budget, body = 40, 1024 * 1024, 500 * 1024
    srv = await started(
        max_connections=cap,
        max_bytes_in_flight=budget,
        max_body=512 * 1024,
        header_timeout=30,
        body_timeout=30,
    )
    http = srv._http
    assert http is not None
    conns: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    piece = b"x" * (body - 12 * 1024)
    tracemalloc.start()
    try:
        before = _server_side()
        for _ in range(150):  # idle: connected, nothing sent
            conns.append(await asyncio.open_connection("127.0.0.1", srv.port))
            assert len(http.connections) <= cap
        partial = []
        for _ in range(10):  # a body of 500 KiB announced, all but 12 KiB of it sent
            reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            writer.write(post(length=str(body)) + piece)
            partial.append((reader, writer))
            await asyncio.sleep(0.05)
            assert len(http.connections) <= cap and http.bytes_in_flight <= budget
        await asyncio.sleep(0.3)
        held = _server_side() - before
        # a call arriving in the middle of the flood is served at once
        t0 = time.monotonic()
        status, _, _, _ = await exchange(srv, post())
        assert status == 200 and time.monotonic() - t0 < 2.0
        assert http.peak_connections <= cap and http.evicted >= 150 - cap
        alive = [r for r, w in conns if not r.at_eof() and not w.transport.is_closing()]
        assert len(alive) <= cap
        assert held < budget + 1024 * 1024, f"{held} bytes held"
        # the budget holds two of the bodies: each new one closed the unfinished body that started
        # first (idle connections went first for the connections), so the two newest are kept
        assert http.bytes_in_flight == 2 * body and http.evicted_bodies == 8
        answers = [await answered(reader) for reader, _ in partial]
        assert answers == [CLOSED] * 8 + [None, None]
        for (reader, writer), answer in zip(partial, answers, strict=True):
            if answer is None:
                writer.write(b"x" * (12 * 1024))
                async with asyncio.timeout(5):
                    assert (await read_response(reader))[0] == 200
        assert http.bytes_in_flight == 0
    finally:
        tracemalloc.stop()
        for _, writer in conns:
            writer.close()
        await srv.stop()


CLOSED = 0


async def answered(reader: asyncio.StreamReader) -> int | None:
    """The status of an answer already on its way, CLOSED if the connection closed with none,
    or None."""
    try:
        async with asyncio.timeout(0.3):
            return (await read_response(reader))[0]
    except TimeoutError:
        return None
    except (asyncio.IncompleteReadError, ConnectionError):
        return CLOSED


async def test_over_the_cap_with_nobody_idle_the_new_connection_is_closed() -> None:
    srv = await started(max_connections=3, header_timeout=30)
    http = srv._http
    assert http is not None
    busy = []
    try:
        for _ in range(3):
            reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            writer.write(post("/slow"))
            busy.append((reader, writer))
        await asyncio.sleep(0.1)
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        async with asyncio.timeout(2):
            assert await reader.read() == b""
        writer.close()
        assert http.refused == 1 and len(http.connections) == 3
        for reader, _ in busy:  # the answers being computed were not disturbed
            async with asyncio.timeout(2):
                assert (await read_response(reader))[0] == 200
    finally:
        for _, writer in busy:
            writer.close()
        await srv.stop()


async def test_bodies_over_max_body_are_413_before_they_are_read(server: WebhookServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(post(length=str(100 * 1024 * 1024)))  # no body sent at all
        async with asyncio.timeout(2):
            status, _, body = await read_response(reader)
        assert status == 413 and b"over 65536" in body
    finally:
        writer.close()


# -- TLS ------------------------------------------------------------------------------------------------


async def test_idle_tls_connections_cost_little_memory(tmp_path: Path) -> None:
    """asyncio's SSL transport keeps a 256 KiB buffer per connection; the server's own TLS does not."""
    import ssl

    local_certificates(tmp_path)
    srv = WebhookServer(Echo(), "127.0.0.1:0", cert_dir=tmp_path)
    await srv.start()
    ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    socks = []
    loop = asyncio.get_running_loop()
    try:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(40):  # blocking client sockets in a thread: only the server's memory is traced
            socks.append(await loop.run_in_executor(None, _tls_connect, ctx, srv.port))
        await asyncio.sleep(0.2)
        held = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert held < 40 * 32 * 1024, f"{held / 40:.0f} bytes per idle TLS connection"
        assert srv._http is not None and len(srv._http.connections) == 40
    finally:
        for sock in socks:
            sock.close()
        await srv.stop()


def _tls_connect(ctx: Any, port: int) -> Any:
    import socket

    return ctx.wrap_socket(socket.create_connection(("127.0.0.1", port)), server_hostname="127.0.0.1")


def _client_pair(ca: Any, common_name: str) -> bytes:
    """A client certificate and its key (one PEM) signed by ``ca`` (a kubeop.webhook.certs.KeyPair)."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca.key(), hashes.SHA256())
    )
    pem_key = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM) + pem_key


async def test_required_client_certificates_are_verified(tmp_path: Path) -> None:
    import ssl

    from kubeop.webhook.certs import make_ca

    local_certificates(tmp_path)
    trusted, other = make_ca(), make_ca()
    (tmp_path / "clients.pem").write_bytes(trusted.cert_pem)
    (tmp_path / "good.pem").write_bytes(_client_pair(trusted, "kube-apiserver"))
    (tmp_path / "bad.pem").write_bytes(_client_pair(other, "mallory"))

    def require(ctx: ssl.SSLContext) -> None:
        ctx.load_verify_locations(tmp_path / "clients.pem")
        ctx.verify_mode = ssl.CERT_REQUIRED

    echo = Echo()
    srv = WebhookServer(echo, "127.0.0.1:0", cert_dir=tmp_path, tls_setup=require)
    await srv.start()

    async def call(client: str | None) -> int:
        ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        if client is not None:
            ctx.load_cert_chain(tmp_path / client)
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port, ssl=ctx)
        try:
            writer.write(post())
            async with asyncio.timeout(5):
                return (await read_response(reader))[0]
        finally:
            writer.close()

    try:
        assert await call("good.pem") == 200
        for client in (None, "bad.pem"):  # TLS 1.3: the refusal arrives as the first read fails
            with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
                await call(client)
        assert len(echo.seen) == 1
    finally:
        await srv.stop()


async def test_a_reload_found_by_a_new_connection_retires_every_old_connection(tmp_path: Path) -> None:
    """Idle ones (a fresh one with no request yet too: Go's transport opens those) close at once,
    busy ones after their answer; the poll need not be the one that finds the new pair."""
    import ssl

    from kubeop.webhook.certs import issue_serving

    local_certificates(tmp_path)
    srv = WebhookServer(Echo(), "127.0.0.1:0", cert_dir=tmp_path, cert_poll_interval=3600)
    await srv.start()
    ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    opened = []

    async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        pair = await asyncio.open_connection("127.0.0.1", srv.port, ssl=ctx)
        opened.append(pair[1])
        return pair

    try:
        idle_r, idle_w = await connect()
        idle_w.write(post())
        assert (await read_response(idle_r))[0] == 200
        fresh_r, _ = await connect()
        busy_r, busy_w = await connect()
        busy_w.write(post("/slow"))
        await asyncio.sleep(0.1)
        issue_serving(tmp_path)
        new_r, new_w = await connect()  # its context check finds the new pair
        new_w.write(post())
        async with asyncio.timeout(5):
            assert (await read_response(new_r))[0] == 200
            assert await idle_r.read() == b"" and await fresh_r.read() == b""
            status, headers, _ = await read_response(busy_r)
            assert (status, headers["connection"]) == (200, "close")
            assert await busy_r.read() == b""
        assert srv.certificate_reloads == 1 and srv.handshakes_since_reload == 1
    finally:
        for writer in opened:
            writer.close()
        await srv.stop()


async def test_a_flood_of_bad_requests_is_not_a_flood_of_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    srv = await started()
    try:
        for _ in range(30):
            assert (await exchange(srv, post(length="²")))[0] == 400
        refusals = [r for r in caplog.records if "Content-Length" in r.getMessage()]
        assert len(refusals) == 20
    finally:
        await srv.stop()


# -- peers that stop reading, bytes in flight, closing connections, stop() ----------------------------


def deaf_socket(port: int) -> socket.socket:
    """A client that sends requests and never reads its answers (a small receive buffer)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.setblocking(False)
    return sock


async def eventually(check: Callable[[], object], seconds: float = 5.0) -> None:
    for _ in range(int(seconds * 100)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"not so after {seconds} s")


def stalled(http: Any) -> bool:
    """One connection, its answer stuck in the socket's buffer."""
    return any(c.transport.get_write_buffer_size() > 1024 * 1024 for c in http.connections)


async def test_a_peer_that_stops_reading_is_not_read_from_and_is_dropped_after_body_timeout() -> None:
    """The review's stall: the write deadline was overwritten by the next request's head, then
    cleared; the connection stayed open for ever, in neither idle nor partial."""
    srv = await started(body_timeout=0.5, header_timeout=0.5)
    http, echo = srv._http, srv.webhooks
    assert http is not None and isinstance(echo, Echo)
    sock = deaf_socket(srv.port)
    try:
        sock.send(post("/big"))
        await eventually(lambda: stalled(http))
        (conn,) = http.connections
        sock.send(post("/a") + post("/b"))  # more requests while the answer cannot go out
        await asyncio.sleep(0.2)
        assert not conn.queue, "requests were read and queued for a peer that does not read"
        t0 = time.monotonic()
        await eventually(lambda: not http.open, 3.0)  # 6x body_timeout: the old server kept it
        assert time.monotonic() - t0 < 1.5
        assert [seen["path"] for seen in echo.seen] == ["/big"]
    finally:
        sock.close()
        await srv.stop()


async def test_at_the_cap_a_connection_whose_peer_stopped_reading_is_evicted_for_a_new_one() -> None:
    """64 of these locked the probe port out (kubelet's probes failed) until they were evictable."""
    srv = await started(max_connections=1, body_timeout=30, header_timeout=30)
    http = srv._http
    assert http is not None
    sock = deaf_socket(srv.port)
    try:
        sock.send(post("/big"))
        await eventually(lambda: stalled(http))
        status, _, _, _ = await exchange(srv, post())
        assert status == 200 and http.evicted == 1 and http.refused == 0
    finally:
        sock.close()
        await srv.stop()


async def test_slow_bodies_holding_the_byte_budget_never_make_a_small_request_503() -> None:
    """~10 unauthenticated heads announcing max_body took the whole budget for body_timeout."""
    max_body, budget = 64 * 1024, 128 * 1024
    srv = await started(max_body=max_body, max_bytes_in_flight=budget, body_timeout=30, header_timeout=30)
    http = srv._http
    assert http is not None
    writers, heads = [], []
    try:
        for _ in range(6):  # a head announcing the largest body, then silence: holds a window only
            reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            writer.write(post(length=str(max_body)))
            writers.append(writer)
            heads.append(reader)
        await asyncio.sleep(0.2)
        assert http.bytes_in_flight < budget
        assert [await answered(reader) for reader in heads] == [None] * 6  # none refused (503)
        assert (await exchange(srv, post()))[0] == 200
        for _ in range(2):  # all but the last byte of the largest body, then silence
            _, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            writer.write(post(length=str(max_body)) + b"x" * (max_body - 1))
            writers.append(writer)
            await asyncio.sleep(0.1)
        assert http.bytes_in_flight <= budget
        assert (await exchange(srv, post(body=b"y" * (max_body // 2))))[0] == 200
        assert http.evicted_bodies >= 1
        assert (await exchange(srv, post()))[0] == 200
    finally:
        for writer in writers:
            writer.close()
        await srv.stop()


async def test_a_handler_raising_cancelled_error_is_a_500_not_a_silent_close(
    server: WebhookServer, caplog: pytest.LogCaptureFixture
) -> None:
    status, headers, body, closed = await exchange(server, post("/cancelled"))
    assert (status, headers["connection"], closed) == (500, "close", True)
    assert orjson.loads(body) == {"message": "internal error"}
    assert any("CancelledError" in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
    assert (await exchange(server, post()))[0] == 200


async def test_a_closed_connection_still_sending_its_answer_counts_against_the_cap() -> None:
    srv = await started(max_connections=2, body_timeout=30, header_timeout=30)
    http = srv._http
    assert http is not None
    sock = deaf_socket(srv.port)
    writers = []
    try:
        sock.send(post("/big", b"{}", "Connection: close"))
        await eventually(lambda: len(http.open) == 1 and not http.connections)  # closed, still sending
        for _ in range(3):
            _, writer = await asyncio.open_connection("127.0.0.1", srv.port)
            writers.append(writer)
            await asyncio.sleep(0.05)
            assert len(http.open) <= 2, f"{len(http.open)} sockets open, over max_connections=2"
        assert (await exchange(srv, post()))[0] == 200
    finally:
        sock.close()
        for writer in writers:
            writer.close()
        await srv.stop()


async def test_no_handler_starts_once_stop_has_begun() -> None:
    srv = await started()
    echo = srv.webhooks
    assert isinstance(echo, Echo)
    _, busy_w = await asyncio.open_connection("127.0.0.1", srv.port)
    idle_r, idle_w = await asyncio.open_connection("127.0.0.1", srv.port)
    try:
        busy_w.write(post("/stubborn"))
        await eventually(lambda: len(echo.seen) == 1)
        stopping = asyncio.ensure_future(srv.stop())
        await asyncio.sleep(0.05)  # stop() waits for /stubborn to give up (0.3 s)
        idle_w.write(post("/late"))
        async with asyncio.timeout(5):
            await stopping
            assert await idle_r.read() == b""
        assert [seen["path"] for seen in echo.seen] == ["/stubborn"]
    finally:
        busy_w.close()
        idle_w.close()
