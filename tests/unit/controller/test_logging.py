"""What a running controller logs, through kubeop's formatters: every line of a reconcile names it,
one traceback per failing streak, one line per change, nothing per reconcile at INFO."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kubeop.controller import (
    Context,
    Controller,
    EventRecorder,
    ReconcilerClient,
    Request,
    TerminalError,
)
from kubeop.controller.context import current_reconcile
from kubeop.controller.running import ControllerRuntime
from kubeop.manager.logs import JsonFormatter, TextFormatter
from kubeop.queue import ItemExponentialFailureRateLimiter

from .fakes import APPS, CONFIGMAPS, ClusterCache, app, run

TAG = re.compile(r" controller=app kind=App object=default/a reconcileID=([0-9a-f]{10})$")


class Captured:
    def __init__(self, stream: io.StringIO, handler: logging.Handler) -> None:
        self.stream = stream
        self.handler = handler

    def use(self, formatter: logging.Formatter, level: int) -> None:
        self.handler.setFormatter(formatter)
        logging.getLogger().setLevel(level)

    @property
    def text(self) -> str:
        return self.stream.getvalue()

    def lines(self, containing: str = "") -> list[str]:
        """The first line of each record (a traceback follows its line)."""
        return [ln for ln in self.text.splitlines() if re.match(r"\d{4}-\d\d-\d\dT", ln) and containing in ln]


@pytest.fixture
def captured() -> Iterator[Captured]:
    """kubeop's text formatter on the root logger, at DEBUG, for the test."""
    root = logging.getLogger()
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(TextFormatter())
    handler.addFilter(lambda r: r.name.startswith(("kubeop", "my_operator")))
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield Captured(stream, handler)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _runtime(env: ClusterCache) -> ControllerRuntime:
    client = ReconcilerClient(env.client, env.factory)
    return ControllerRuntime(env.factory, client, EventRecorder(None, "test"), None, cache_sync_timeout=2)


async def _until(pred: Any, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.005)


def _failing_then_recovering(failures: int, calls: list[Request]) -> Any:
    async def reconcile(req: Request, ctx: Context) -> None:
        calls.append(req)
        ctx.log.info("attempt %d", len(calls))
        logging.getLogger("my_operator").debug("a plain logger of the operator's own")
        if len(calls) <= failures:
            obj: dict[str, Any] = {}
            obj["spec"]

    return reconcile


async def _run(reconcile: Any, until: Any) -> None:
    env = ClusterCache()
    env.factory.start()
    await env.add(app("a"))
    ctrl = (
        Controller.for_(APPS)
        .with_rate_limiter(ItemExponentialFailureRateLimiter(0.001, 0.004))
        .reconcile(reconcile)
    )
    running = await run(ctrl, _runtime(env))
    try:
        await _until(until)
    finally:
        await running.stop()
        await env.close()


async def test_a_failing_streak_logs_one_traceback_then_short_retries_then_recovery(
    captured: Captured,
) -> None:
    calls: list[Request] = []
    await _run(_failing_then_recovering(4, calls), lambda: "recovered" in captured.text)

    # Every line of the reconcile, the framework's and the reconciler's own, names it.
    started, *lines = captured.lines()
    assert started.endswith("INFO kubeop.controller: controller started controller=app")
    assert len(lines) == 5 + 5 + 1 + 3 + 1 + 1, captured.text
    assert all(TAG.search(ln) for ln in lines), captured.text
    assert captured.text.count("Traceback (most recent call last)") == 1
    first = captured.lines("ERROR")
    assert len(first) == 1
    assert (
        "ERROR kubeop.controller: app: reconcile of default/a failed, will retry: KeyError: 'spec'"
        in first[0]
    )
    assert captured.text.index("Traceback") > captured.text.index(first[0])  # right below its line
    again = captured.lines("failed again")
    assert [re.search(r"attempt \d", ln).group() for ln in again] == ["attempt 2", "attempt 3", "attempt 4"]  # type: ignore[union-attr]
    assert all("DEBUG" in ln and " ms): KeyError: 'spec'" in ln for ln in again)
    assert (
        len(
            captured.lines(
                "INFO kubeop.controller: app: reconcile of default/a recovered after 4 failed attempts"
            )
        )
        == 1
    )
    assert len(captured.lines("DEBUG kubeop.controller: app: reconciled default/a in ")) == 1
    assert len(captured.lines("INFO kubeop.controller.app: attempt ")) == 5
    assert len(captured.lines("DEBUG my_operator: a plain logger of the operator's own")) == 5
    # One reconcile id per reconcile: five reconciles, five ids, each on all its lines.
    ids = [TAG.search(ln).group(1) for ln in lines]  # type: ignore[union-attr]
    assert len(set(ids)) == 5


async def test_at_info_a_successful_reconcile_logs_nothing_and_a_change_one_line(captured: Captured) -> None:
    captured.use(TextFormatter(), logging.INFO)
    calls: list[Request] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        calls.append(req)
        cm = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": req.name, "namespace": req.namespace},
        }
        await ctx.client.create_or_update(cm)

    await _run(reconcile, lambda: len(calls) == 1)
    started, created = captured.lines()
    assert "controller started" in started
    assert "INFO kubeop.controller: created ConfigMap default/a controller=app" in created and TAG.search(
        created
    )


async def test_a_sync_reconciler_in_a_thread_is_tagged_too(captured: Captured) -> None:
    captured.use(TextFormatter(), logging.INFO)
    calls: list[Request] = []

    def reconcile(req: Request, ctx: Any) -> None:
        calls.append(req)
        logging.getLogger("my_operator").info("syncing")
        ctx.client.create_or_update(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "default"}}
        )

    await _run(reconcile, lambda: len(calls) == 1 and "created" in captured.text)
    lines = captured.lines()[1:]
    assert len(lines) == 2 and all(TAG.search(ln) for ln in lines), captured.text
    assert len({TAG.search(ln).group(1) for ln in lines}) == 1  # type: ignore[union-attr]


async def test_a_terminal_error_ends_the_streak(captured: Captured) -> None:
    calls: list[Request] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        calls.append(req)
        if len(calls) < 3:
            raise RuntimeError("not yet")
        raise TerminalError("spec.size must be positive")

    await _run(reconcile, lambda: "terminal" in captured.text)
    terminal = captured.lines("terminal")
    assert len(terminal) == 1 and "ERROR" in terminal[0] and TAG.search(terminal[0])
    assert "(terminal, not retried, after 2 failed attempts): spec.size must be positive" in terminal[0]
    assert captured.text.count("Traceback") == 1


async def test_json_lines_carry_the_same_fields(captured: Captured) -> None:
    captured.use(JsonFormatter(), logging.DEBUG)
    calls: list[Request] = []
    await _run(_failing_then_recovering(2, calls), lambda: "recovered" in captured.text)
    records = [json.loads(line) for line in captured.text.splitlines()][1:]  # after "controller started"
    assert all(
        {"ts", "level", "logger", "msg", "controller", "kind", "namespace", "name", "reconcileID"} <= r.keys()
        for r in records
    ), records
    assert {(r["controller"], r["kind"], r["namespace"], r["name"]) for r in records} == {
        ("app", "App", "default", "a")
    }
    errors = [r for r in records if r["level"] == "error"]
    assert len(errors) == 1 and errors[0]["error"] == "KeyError: 'spec'"
    assert errors[0]["traceback"].startswith("Traceback") and "KeyError: 'spec'" in errors[0]["traceback"]
    assert [r for r in records if "traceback" in r] == errors
    again = [r for r in records if "failed again" in r["msg"]]
    assert len(again) == 1 and again[0]["error"] == "KeyError: 'spec'"
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$", records[0]["ts"])


async def test_an_informer_started_by_a_reconcile_does_not_log_as_that_reconcile() -> None:
    env = ClusterCache()
    env.factory.start()
    factory = env.factory
    seen: list[Context | None] = []
    informer = factory.informer

    def recording(resource: Any, **kwargs: Any) -> Any:
        seen.append(current_reconcile())
        return informer(resource, **kwargs)

    factory.informer = recording  # type: ignore[method-assign]
    await env.add(app("a"))  # starts the App informer: the test's call
    calls: list[Context | None] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        calls.append(current_reconcile())
        await ctx.client.get(
            CONFIGMAPS, "x", namespace="default"
        )  # the first read of a kind starts its informer

    await _run_with(env, reconcile, lambda: calls)
    assert calls[0] is not None and calls[0].request == Request("default", "a")
    assert seen == [None, None, None]  # the test's, the controller's watch, the reconcile's read
    assert current_reconcile() is None


async def _run_with(env: ClusterCache, reconcile: Any, until: Any) -> None:
    ctrl = Controller.for_(APPS).reconcile(reconcile)
    running = await run(ctrl, _runtime(env))
    try:
        await _until(until)
    finally:
        await running.stop()
        await env.close()


@pytest.mark.parametrize("sync", [False, True])
async def test_the_traceback_starts_at_the_reconciler(captured: Captured, sync: bool) -> None:
    def failing(req: Request, ctx: Any) -> None:
        raise RuntimeError("boom")

    async def failing_async(req: Request, ctx: Context) -> None:
        failing(req, ctx)

    await _run(failing if sync else failing_async, lambda: "Traceback" in captured.text)
    traceback = captured.text[captured.text.index("Traceback") :].splitlines()
    assert traceback[1].startswith(f'  File "{__file__}"'), traceback


async def test_the_client_logs_each_change_once_and_what_changed_nothing_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    env = ClusterCache()
    env.factory.start()
    client = _runtime(env).client
    await env.add({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
    obj = {
        "apiVersion": "example.com/v1",
        "kind": "App",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"a": "1"},
    }
    with caplog.at_level(logging.DEBUG, logger="kubeop.controller"):
        _, created = await client.create_or_update(obj)
        await client.create_or_update(obj)  # unchanged: no request, no line
        _, updated = await client.create_or_patch({**obj, "spec": {"a": "2"}})
        await client.patch_status(updated, {"phase": "Ready"})
        await client.add_finalizer(updated, "example.com/cleanup")
        current = await env.client.get(APPS, "c", namespace="ns")
        await client.remove_finalizer(current, "example.com/cleanup")
        await client.patch(APPS, "c", {"spec": {"a": "2"}}, namespace="ns")  # the server changes nothing
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("INFO", "created App ns/c"),
        ("INFO", "patched App ns/c"),
        ("INFO", "patched status of App ns/c"),
        ("INFO", "added finalizer example.com/cleanup to App ns/c"),
        ("INFO", "removed finalizer example.com/cleanup from App ns/c"),
        ("DEBUG", "patched App ns/c: unchanged"),
    ]
    assert created["metadata"]["resourceVersion"] != updated["metadata"]["resourceVersion"]
    await env.close()
