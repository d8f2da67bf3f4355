"""WebhookServer over real TLS on loopback: routing, bad requests, certificate rotation."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography import x509
from examples.crontab.main import webhooks
from examples.crontab.webhooks.crontab_v1beta1 import validate

from kubeop.webhook.certs import issue_serving, local_certificates
from kubeop.webhook.server import WebhookServer


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[WebhookServer]:
    local_certificates(tmp_path)
    srv = WebhookServer(webhooks, "127.0.0.1:0", cert_dir=tmp_path, max_body=64 * 1024)
    await srv.start()
    yield srv
    await srv.stop()


def client_context(ca_dir: Path, *, maximum: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca_dir / "ca.crt"))
    if maximum is not None:
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = maximum
    return ctx


async def call(
    srv: WebhookServer, raw: bytes, *, ctx: ssl.SSLContext | None = None
) -> tuple[int, dict[str, Any], bytes]:
    """Send ``raw`` (a whole request), return (status, body, the server's certificate DER)."""
    reader, writer = await asyncio.open_connection(
        srv.host, srv.port, ssl=ctx or client_context(srv.cert_dir)
    )
    try:
        sslobj = writer.get_extra_info("ssl_object")
        der = sslobj.getpeercert(binary_form=True)
        writer.write(raw)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ")[1])
        length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        body = await reader.readexactly(length)
        return status, orjson.loads(body), der
    finally:
        writer.close()


def post(path: str, body: bytes, content_type: str = "application/json") -> bytes:
    return (
        f"POST {path}?timeout=10s HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


REVIEW = orjson.dumps(
    {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "operation": "CREATE",
            "object": {
                "apiVersion": "stable.example.com/v1beta1",
                "kind": "CronTab",
                "metadata": {"name": "c"},
                "spec": {"cronSpec": "61 * * * *", "image": "i"},
            },
        },
    }
)


async def test_serves_a_review(server: WebhookServer) -> None:
    status, body, _ = await call(server, post(validate.path, REVIEW))
    assert status == 200
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["message"] == "spec.cronSpec: minute '61' is outside 0-59"
    assert server.ready()


@pytest.mark.parametrize(
    ("raw", "status", "message"),
    [
        (post("/validate-stable-example-com-v1beta1-crontab", b"{nope"), 400, "not JSON"),
        (post("/nowhere", REVIEW), 404, "no webhook"),
        (post("/validate-stable-example-com-v1beta1-crontab", REVIEW, "text/plain"), 415, "text/plain"),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 405, "only POST"),
        (b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 411, "Content-Length"),
        (b"POST /x HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n", 413, "over 65536"),
        (b"BREW\r\n\r\n", 400, "malformed"),
    ],
)
async def test_bad_requests_are_refused_and_the_server_keeps_serving(
    server: WebhookServer, raw: bytes, status: int, message: str
) -> None:
    got, body, _ = await call(server, raw)
    assert got == status and message in body["message"]
    assert (await call(server, post(validate.path, REVIEW)))[0] == 200


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_tls_below_1_2_is_refused(server: WebhookServer) -> None:
    ctx = client_context(server.cert_dir, maximum=ssl.TLSVersion.TLSv1_1)
    with pytest.raises((ssl.SSLError, ConnectionError)):
        await call(server, post(validate.path, REVIEW), ctx=ctx)


async def test_a_rotated_certificate_is_used_by_the_next_connection(server: WebhookServer) -> None:
    _, _, before = await call(server, post(validate.path, REVIEW))
    issue_serving(server.cert_dir)
    _, _, after = await call(server, post(validate.path, REVIEW))
    assert before != after
    assert (
        x509.load_der_x509_certificate(after).serial_number
        == x509.load_pem_x509_certificate((server.cert_dir / "tls.crt").read_bytes()).serial_number
    )
    assert server.certificate_reloads == 1


async def test_a_broken_pair_keeps_the_old_certificate(server: WebhookServer) -> None:
    _, _, before = await call(server, post(validate.path, REVIEW))
    (server.cert_dir / "tls.key").write_bytes(b"garbage")
    status, _, after = await call(server, post(validate.path, REVIEW))
    assert status == 200 and after == before and server.certificate_reloads == 0


def test_local_certificates_are_reused_while_valid(tmp_path: Path) -> None:
    first = local_certificates(tmp_path)
    cert = (tmp_path / "tls.crt").read_bytes()
    again = local_certificates(tmp_path)
    assert again.ca_pem == first.ca_pem and (tmp_path / "tls.crt").read_bytes() == cert
    other = local_certificates(tmp_path, hosts=("127.0.0.1", "localhost"))
    assert other.ca_pem == first.ca_pem and (tmp_path / "tls.crt").read_bytes() != cert


async def test_rotation_closes_idle_keep_alive_connections(tmp_path: Path) -> None:
    local_certificates(tmp_path)
    srv = WebhookServer(webhooks, "127.0.0.1:0", cert_dir=tmp_path, cert_poll_interval=0.05)
    await srv.start()
    try:
        reader, writer = await asyncio.open_connection(srv.host, srv.port, ssl=client_context(tmp_path))
        writer.write(post(validate.path, REVIEW))
        head = await reader.readuntil(b"\r\n\r\n")
        assert b"200 OK" in head and b"keep-alive" in head
        await reader.readexactly(int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0]))
        issue_serving(tmp_path)
        async with asyncio.timeout(2):
            assert await reader.read() == b""  # closed by the server: the next call shakes hands anew
        writer.close()
        assert srv.certificate_reloads == 1 and srv.handshakes_since_reload == 0
        await call(srv, post(validate.path, REVIEW))
        assert srv.handshakes_since_reload == 1
    finally:
        await srv.stop()
