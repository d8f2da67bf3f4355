"""kopf's liveness endpoint: the probe handlers' results as JSON by handler id, run at most once
per 10 s (concurrent queries share a run), 500 when a handler fails for good."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

import kubeop.kopf as kopf
from kubeop.kopf.activities import Activity
from kubeop.kopf.probing import PROBE_MAX_AGE, Probes, parse_endpoint, serve

log = logging.getLogger("test")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def probes(reg: kopf.Registry, clock: Clock | None = None) -> Probes:
    return Probes(
        reg.activities(Activity.PROBE),
        lambda: {"logger": log, "memo": kopf.Memo(), "settings": kopf.OperatorSettings()},
        clock=clock or Clock(),
    )


async def test_results_by_handler_id_without_none_and_throttled_as_kopf() -> None:
    reg = kopf.Registry()
    calls: list[str] = []

    @kopf.on.probe(registry=reg, id="objects")
    async def objects(**_: Any) -> int:
        calls.append("objects")
        return len(calls)

    @kopf.on.probe(registry=reg, id="status")
    def status(**_: Any) -> dict[str, str]:
        return {"db": "up"}

    @kopf.on.probe(registry=reg, id="nothing")
    def nothing(**_: Any) -> None:
        return None

    clock = Clock()
    p = probes(reg, clock)
    status_code, body, content_type = await p.answer()
    assert status_code == 200 and content_type.startswith("application/json")
    assert json.loads(body) == {"objects": 1, "status": {"db": "up"}}
    clock.now += PROBE_MAX_AGE - 0.1
    assert (await p.results())["objects"] == 1 and p.runs == 1  # served from the last run
    clock.now += 0.1
    assert (await p.results())["objects"] == 2 and p.runs == 2  # 10 s later: run again
    clock.now += PROBE_MAX_AGE
    await asyncio.gather(*(p.answer() for _ in range(5)))
    assert p.runs == 3 and calls == ["objects"] * 3  # concurrent queries share one run


async def test_no_probe_handlers_answer_an_empty_object() -> None:
    assert await probes(kopf.Registry()).answer() == (200, b"{}", "application/json; charset=utf-8")


async def test_a_handler_failing_for_good_answers_500_and_the_next_query_runs_again() -> None:
    reg = kopf.Registry()
    failing = [True]

    @kopf.on.probe(registry=reg, id="db")
    def db(**_: Any) -> str:
        if failing[0]:
            raise kopf.PermanentError("the database is gone")
        return "up"

    p = probes(reg)
    status_code, body, _ = await p.answer()
    assert status_code == 500 and b"db" in body
    failing[0] = False
    assert await p.answer() == (200, b'{"db": "up"}', "application/json; charset=utf-8")


async def test_a_temporary_error_is_retried_within_the_query_as_kopf_does() -> None:
    reg = kopf.Registry()
    tries: list[int] = []

    @kopf.on.probe(registry=reg, id="flaky")
    def flaky(retry: int, **_: Any) -> int:
        tries.append(retry)
        if retry < 2:
            raise kopf.TemporaryError("not yet", delay=0.01)
        return retry

    assert await probes(reg).results() == {"flaky": 2} and tries == [0, 1, 2]


async def test_results_that_are_not_json_answer_500() -> None:
    reg = kopf.Registry()
    kopf.on.probe(registry=reg, id="odd")(lambda **_: object())
    status_code, body, _ = await probes(reg).answer()
    assert status_code == 500 and b"not JSON" in body


def test_endpoint_urls_as_kopf_reads_them() -> None:
    assert parse_endpoint("http://0.0.0.0:8080/healthz") == ("0.0.0.0", 8080, "/healthz")
    assert parse_endpoint("http://:8081/probe") == ("localhost", 8081, "/probe")
    assert parse_endpoint("http://127.0.0.1") == ("127.0.0.1", 80, "/")
    for bad in ("0.0.0.0:8080", "https://0.0.0.0:8080/healthz", "http://h:port/x"):
        with pytest.raises(ValueError, match="liveness endpoint"):
            parse_endpoint(bad)


async def test_the_server_answers_the_endpoint_path() -> None:
    reg = kopf.Registry()
    kopf.on.probe(registry=reg, id="n")(lambda **_: 7)
    server = await serve("http://127.0.0.1:0/healthz", probes(reg))
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        response = await reader.read()
        writer.close()
    finally:
        await server.stop()
    head, _, body = response.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and b"application/json" in head
    assert json.loads(body) == {"n": 7}
