"""An adversarial review of the dashboard: ways round its authorization, DNS rebinding on
loopback, script injection through the text it shows, credentials in errors and log lines, and
memory under a flood of failing objects and of event-stream clients."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator
from importlib import resources

import orjson
import pytest

from kubeop.client.httpserver import Request as HttpRequest
from kubeop.controller import Request
from kubeop.controller.journal import ReconcileRecord
from kubeop.dashboard import DashboardServer, Recorder, Sources
from kubeop.dashboard.aggregate import errors

_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.c2lnbmF0dXJlc2lnbmF0dXJl"


@contextlib.asynccontextmanager
async def _serving(recorder: Recorder | None = None, **kw: object) -> AsyncIterator[DashboardServer]:
    server = DashboardServer(
        recorder or Recorder(), Sources(cluster=lambda: None), "127.0.0.1:0", refresh=0.05, **kw
    )  # type: ignore[arg-type]
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def _ask(port: int, head: str, *, limit: int = 1 << 20) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head.encode())
        await writer.drain()
        data = b""
        async with asyncio.timeout(5):
            while b"\r\n\r\n" not in data or len(data) < 64:
                chunk = await reader.read(65536)
                if not chunk:
                    break
                data += chunk
                if len(data) >= limit:
                    break
    finally:
        writer.close()
    raw_head, _, body = data.partition(b"\r\n\r\n")
    lines = raw_head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split(" ")[1]), headers, body


def _get(path: str, host: str | None = "127.0.0.1", method: str = "GET", version: str = "1.1") -> str:
    host_line = f"Host: {host}\r\n" if host is not None else ""
    return f"{method} {path} HTTP/{version}\r\n{host_line}Connection: close\r\n\r\n"


# -- DNS rebinding and the Host header ------------------------------------------------------


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8090", "127.0.0.1.evil.example", "127.0.0.1:80@evil.example", ""]
)
async def test_on_loopback_a_request_for_another_host_is_403(host: str) -> None:
    async with _serving() as server:
        for path in ("/", "/api/errors", "/events/errors", "/static/app.js"):
            status, _, body = await _ask(server.port, _get(path, host))
            assert status == 403, (host, path)
            assert b"groups" not in body and b"use strict" not in body


async def test_on_loopback_a_request_without_a_host_is_403() -> None:
    async with _serving() as server:
        status, _, _ = await _ask(server.port, _get("/api/errors", None, version="1.0"))
        assert status == 403


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost:8090", "[::1]:8090", "LOCALHOST", "127.0.0.2:1"])
async def test_on_loopback_this_machines_names_are_served(host: str) -> None:
    async with _serving() as server:
        status, _, body = await _ask(server.port, _get("/api/errors", host))
        assert status == 200 and b"groups" in body


# -- every way round the authorization --------------------------------------------------------


async def _only_with_a_token(request: HttpRequest) -> tuple[int, str] | None:
    return None if request.header("authorization") == "Bearer good" else (401, "Unauthorized")


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/index.html",
        "/static/app.js",
        "/static/index.html",
        "/static/..%2fserver.py",
        "/%2e%2e/static/app.js",
        "//api/errors",
        "/api/../api/errors",
        "/api/errors?x=/../",
        "/api%2ferrors",
        "/events/errors",
        "/events/object?kind=Secret&namespace=default&name=x",
        "http://127.0.0.1/api/errors",
        "*",
    ],
)
@pytest.mark.parametrize("method", ["GET", "HEAD", "OPTIONS", "POST", "TRACE"])
async def test_exposed_nothing_is_served_without_credentials(path: str, method: str) -> None:
    async with _serving(authorize=_only_with_a_token) as server:
        status, headers, body = await _ask(server.port, _get(path, "evil.example", method))
        assert status in (400, 401, 405), (method, path, status)
        assert b"groups" not in body and b"use strict" not in body and b"<html" not in body
        assert "text/event-stream" not in headers.get("content-type", "")


@pytest.mark.parametrize(
    "path",
    [
        "/static/../server.py",
        "/static/%2e%2e/server.py",
        "/static/..%2fserver.py",
        "/static/..%5cserver.py",
        "/static/%2e%2e%2f__init__.py",
        "/static/app.js%00.css",
        "/static/.hidden.js",
        "/static/../../../../etc/passwd",
        "/static/",
        "/static/recorder.py",
    ],
)
async def test_static_files_are_the_shipped_ones_only(path: str) -> None:
    async with _serving() as server:
        status, _, body = await _ask(server.port, _get(path))
        assert status in (400, 404), path
        assert b"import" not in body and b"root:" not in body


async def test_every_answer_carries_a_content_security_policy() -> None:
    async with _serving() as server:
        for path in ("/", "/static/app.js", "/static/app.css", "/api/overview", "/nothing", "/static/x.js"):
            _, headers, _ = await _ask(server.port, _get(path))
            policy = headers.get("content-security-policy", "")
            assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy, path
            assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
            assert (
                headers.get("x-frame-options") == "DENY"
                and headers.get("x-content-type-options") == "nosniff"
            )


def test_the_script_never_writes_markup() -> None:
    static = resources.files("kubeop.dashboard") / "static"
    script = (static / "app.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function("):
        assert sink not in script, sink
    page = (static / "index.html").read_text()
    assert not re.search(r"<script>|<style>|\son[a-z]+=|style=", page), "inline script or style"


# -- credentials and user-controlled text ----------------------------------------------------


def _failure(name: str, message: str, *, at: float = 1000.0, rid: str = "r1") -> ReconcileRecord:
    try:
        raise RuntimeError(message)
    except RuntimeError as exc:
        error = exc
    return ReconcileRecord(
        "widgets", "Widget", Request(name=name, namespace="ns"), at, 0.01, "error", error, 0.0, 1.0, 1, rid
    )


def test_credentials_in_errors_tracebacks_and_log_lines_are_not_shown() -> None:
    recorder = Recorder()
    message = (
        f"GET https://admin:hunter2@api.example/x failed: 401 with Authorization: Bearer {_TOKEN}; "
        "secret {'apiVersion': 'v1', 'kind': 'Secret', 'data': {'password': 'aHVudGVyMg=='}} token=s3cr3t"
    )
    recorder.journal.records.append(_failure("a", message))
    recorder.install(logging.getLogger("test.dashboard.attacks"))
    try:
        logging.getLogger("test.dashboard.attacks").warning(
            "calling with password=hunter2 and %s", _TOKEN, extra={"reconcile_id": "r1"}
        )
    finally:
        recorder.uninstall(logging.getLogger("test.dashboard.attacks"))
    shown = orjson.dumps(errors(recorder, 1001.0)).decode() + repr(list(recorder.lines))
    for secret in (_TOKEN, "hunter2", "aHVudGVyMg==", "s3cr3t", "c2lnbmF0dXJl"):
        assert secret not in shown, secret
    assert "<redacted>" in shown and "failed: 401" in shown  # the rest of the message stays


def test_markup_in_messages_is_kept_as_text_for_the_script_to_show_as_text() -> None:
    recorder = Recorder()
    recorder.journal.records.append(_failure("a", "<img src=x onerror=alert(1)>"))
    (group,) = errors(recorder, 1001.0)["groups"]
    assert group["error"] == "RuntimeError: <img src=x onerror=alert(1)>"  # data, not escaped twice


# -- memory ------------------------------------------------------------------------------------


def test_a_flood_of_distinct_failures_with_huge_messages_stays_bounded() -> None:
    recorder = Recorder(objects=200)
    for i in range(1000):
        recorder.journal.records.append(_failure(f"w{i}", f"failure {i}: " + "x" * 20_000, at=1000.0 + i))
        if i % 100 == 99:
            recorder.drain(1000.0 + i)
    recorder.drain(2001.0)
    assert len(recorder.failing) == 200
    assert all(len(f.error) < 1_200 and len(f.traceback) < 9_000 for f in recorder.failing.values())
    page = orjson.dumps(errors(recorder, 2001.0))
    assert len(page) < 1_500_000
    assert errors(recorder, 2001.0)["failing"] == 200


def test_many_objects_failing_the_same_way_are_listed_in_part_with_a_count() -> None:
    recorder = Recorder(objects=5000)
    for i in range(3000):
        recorder.journal.records.append(_failure(f"w{i}", "the same error", at=1000.0))
    recorder.drain(1001.0)
    (group,) = errors(recorder, 1001.0)["groups"]
    assert len(group["objects"]) + group["more"] == 3000 and len(group["objects"]) <= 100


def test_log_lines_are_cut() -> None:
    recorder = Recorder(log_lines=10)
    log = logging.getLogger("test.dashboard.attacks.lines")
    recorder.install(log)
    try:
        for _ in range(20):
            log.warning("%s", "y" * 1_000_000, extra={"reconcile_id": "r1"})
    finally:
        recorder.uninstall(log)
    assert len(recorder.lines) == 10
    assert all(len(line.message) < 3_000 for line in recorder.lines)


async def test_event_stream_clients_are_capped() -> None:
    async with _serving() as server:
        opened = []
        try:
            for _ in range(60):
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                writer.write(_get("/events/errors").encode())
                opened.append((reader, writer))
            await asyncio.sleep(0.5)
            assert server._http is not None
            assert len(server._http.open) <= 32
        finally:
            for _, writer in opened:
                writer.close()
