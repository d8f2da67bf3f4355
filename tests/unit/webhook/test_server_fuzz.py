"""Fuzzing the HTTP boundary of both servers (the webhook server and the probe/metrics server).

Random bytes and mutated valid requests go to a real server on loopback; whatever arrives, the
server answers with well-formed HTTP/1.1 responses or closes the connection, and no exception
reaches asyncio's exception handler or kubeop's error log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import httptools
import orjson
import pytest
from examples.crontab.main import webhooks
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kubeop.manager.server import ProbeServer
from kubeop.webhook.server import WebhookServer

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
                "spec": {"cronSpec": "* * * * *", "image": "i"},
            },
        },
    }
)
VALID = [
    b"POST /validate-stable-example-com-v1beta1-crontab?timeout=5s HTTP/1.1\r\nHost: x\r\n"
    b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(REVIEW) + REVIEW,
    b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /readyz?verbose HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"HEAD /metrics HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
    b"GET http://x/livez?verbose#f HTTP/1.1\r\nHost: x\r\n\r\n",
]
PIECES = [
    b"\r\n",
    b"\n",
    b"\r",
    b" ",
    b"\t",
    b":",
    b"\x00",
    b"\xb2",
    "²".encode(),
    "٣".encode(),
    b"Content-Length: ",
    b"Content-Length: 5\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Content-Type: application/json\r\n",
    b"Expect: 100-continue\r\n",
    b"Connection: close\r\n",
    b"Upgrade: h2c\r\nConnection: Upgrade\r\n",
    b"0\r\n\r\n",
    b"ffffffffffffffff\r\n",
    b"HTTP/1.1",
    b"HTTP/2.0",
    b"GET / HTTP/1.1\r\n\r\n",
    b"99999999999999999999999",
    b"http://[",
    b"#",
    b"?",
]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    raw = bytearray(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(raw)))
        kind = draw(st.sampled_from(["insert", "delete", "replace", "duplicate"]))
        if kind == "insert":
            raw[at:at] = draw(st.one_of(st.sampled_from(PIECES), st.binary(min_size=1, max_size=8)))
        elif kind == "delete":
            del raw[at : at + draw(st.integers(1, 16))]
        elif kind == "replace":
            raw[at : at + 1] = draw(st.binary(min_size=1, max_size=3))
        else:
            line_end = raw.find(b"\r\n", at)
            line_start = raw.rfind(b"\r\n", 0, at) + 2
            if line_end > line_start:
                line = raw[line_start : line_end + 2]
                raw[line_start:line_start] = line
    return bytes(raw)


class Trouble:
    """Collects what must never happen: asyncio-level exceptions and ERROR log records."""

    def __init__(self) -> None:
        self.found: list[str] = []

    def handler(self, _loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        self.found.append(f"asyncio: {context.get('message')} {context.get('exception')!r}")

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            self.found.append(f"log: {record.getMessage()}")


class _Handler(logging.Handler):
    def __init__(self, trouble: Trouble) -> None:
        super().__init__()
        self.trouble = trouble

    def emit(self, record: logging.LogRecord) -> None:
        self.trouble.emit(record)


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[asyncio.AbstractEventLoop, Trouble, list[int]]]:
    loop = asyncio.new_event_loop()
    trouble = Trouble()
    loop.set_exception_handler(trouble.handler)
    handler = _Handler(trouble)
    for name in ("kubeop", "asyncio"):
        logging.getLogger(name).addHandler(handler)
    webhook = WebhookServer(webhooks, "127.0.0.1:0", insecure=True, max_body=64 * 1024)
    probes = ProbeServer("127.0.0.1:0")
    loop.run_until_complete(webhook.start())
    loop.run_until_complete(probes.start())
    try:
        yield loop, trouble, [webhook.port, probes.port]
    finally:
        loop.run_until_complete(webhook.stop())
        loop.run_until_complete(probes.stop())
        loop.close()
        for name in ("kubeop", "asyncio"):
            logging.getLogger(name).removeHandler(handler)


async def _send(port: int, raw: bytes) -> bytes:
    """Send ``raw``, half-close, and return everything the server sent until it closed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        writer.write_eof()
        async with asyncio.timeout(5):  # the server must answer and/or close: never hang
            return await reader.read()
    except ConnectionResetError:
        return b""
    finally:
        writer.close()


class _Responses:
    def __init__(self) -> None:
        self.complete = 0
        self.statuses: list[int] = []
        self.parser = httptools.HttpResponseParser(self)

    def on_status(self, _status: bytes) -> None:
        self.statuses.append(self.parser.get_status_code())

    def on_message_complete(self) -> None:
        self.complete += 1


def check_well_formed(answer: bytes, head_only: bool) -> None:
    """Every byte the server sent is a sequence of complete, valid HTTP/1.1 responses."""
    if not answer:
        return
    responses = _Responses()
    if head_only:  # a HEAD answer carries a Content-Length but no body: check the heads only
        assert answer.startswith(b"HTTP/1.1 "), answer[:80]
        return
    responses.parser.feed_data(answer)
    assert responses.complete == len(responses.statuses) >= 1, answer[:200]
    assert all(100 <= s <= 599 for s in responses.statuses)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(raw=st.one_of(st.binary(max_size=512), mutated()), which=st.integers(0, 1))
@example(raw=b"POST /x HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: \xb2\r\n\r\n", which=0)
@example(raw="POST /x HTTP/1.1\r\nContent-Length: ²\r\n\r\n{}".encode(), which=0)
@example(raw=b"GET /healthz HTTP/1.1\r\nContent-Length: \xb2\r\n\r\n", which=1)
@example(raw=b"\r\n" * 20_000, which=0)
@example(raw=b"GET http://[ HTTP/1.1\r\nHost: x\r\n\r\n", which=1)
@example(raw=b"POST http://[::1/v HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", which=0)
def test_any_bytes_get_well_formed_answers_or_a_close_never_an_unhandled_exception(
    servers: tuple[asyncio.AbstractEventLoop, Trouble, list[int]], raw: bytes, which: int
) -> None:
    loop, trouble, ports = servers
    before = len(trouble.found)
    answer = loop.run_until_complete(_send(ports[which], raw))
    loop.run_until_complete(asyncio.sleep(0))
    assert trouble.found[before:] == []
    check_well_formed(answer, head_only=b"HEAD" in raw)
