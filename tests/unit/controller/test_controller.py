"""Reconcile semantics on a FakeCluster's watches: every Result / error path, owners, predicates,
concurrency and cache sync."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubeop.controller import (
    Context,
    Controller,
    EventRecorder,
    GenerationChanged,
    Metrics,
    ReconcilerClient,
    Request,
    Result,
    TerminalError,
)
from kubeop.controller.running import ControllerRuntime, RunningController
from kubeop.core.patch import PatchType
from kubeop.queue import ItemExponentialFailureRateLimiter

from .fakes import APP_CRD, APPS, CONFIGMAPS, ClusterCache, app, run


@pytest.fixture
async def env() -> AsyncIterator[ClusterCache]:
    env = ClusterCache()
    env.factory.start()
    yield env
    await env.close()


def _runtime(env: ClusterCache, probe: Any = None) -> ControllerRuntime:
    client = ReconcilerClient(env.client, env.factory)
    return ControllerRuntime(
        env.factory, client, EventRecorder(None, "test"), Metrics(), cache_sync_timeout=2, probe=probe
    )


def _count(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return value or 0.0


async def _until(pred: Any, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.005)


async def test_success_reconciles_each_object_once(env: ClusterCache) -> None:
    await env.add(app("a"))
    seen: list[Request] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        obj = await ctx.client.get(APPS, req.name, namespace=req.namespace)
        assert obj["metadata"]["name"] == req.name
        seen.append(req)

    ctrl = Controller.for_(APPS).reconcile(reconcile)
    rt = _runtime(env)
    running = await run(ctrl, rt)
    await env.add(app("b"))
    await _until(lambda: len(seen) == 2)
    await running.stop()
    assert sorted(seen, key=str) == [Request("default", "a"), Request("default", "b")]
    assert _count(rt.metrics, "controller_runtime_reconcile_total", controller="app", result="success") == 2


async def test_errors_back_off_exponentially_then_success_forgets(env: ClusterCache) -> None:
    await env.add(app("a"))
    times: list[float] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        times.append(time.monotonic())
        if len(times) < 5:
            raise RuntimeError("boom")

    ctrl = (
        Controller.for_(APPS)
        .with_rate_limiter(ItemExponentialFailureRateLimiter(0.02, 10))
        .reconcile(reconcile)
    )
    rt = _runtime(env)
    running = await run(ctrl, rt)
    await _until(lambda: len(times) == 5)
    await asyncio.sleep(0.05)
    await running.stop()
    gaps = [b - a for a, b in itertools.pairwise(times)]
    for gap, want in zip(gaps, [0.02, 0.04, 0.08, 0.16], strict=True):
        assert want * 0.9 <= gap < want + 0.05, gaps
    assert len(times) == 5
    assert _count(rt.metrics, "controller_runtime_reconcile_errors_total", controller="app") == 4
    assert running._queue.num_requeues(Request("default", "a")) == 0


async def test_terminal_error_is_counted_and_not_retried(env: ClusterCache) -> None:
    await env.add(app("a"))
    calls = 0

    async def reconcile(req: Request, ctx: Context) -> None:
        nonlocal calls
        calls += 1
        raise TerminalError("spec.x is invalid")

    ctrl = Controller.for_(APPS).reconcile(reconcile)
    rt = _runtime(env)
    running = await run(ctrl, rt)
    await _until(lambda: calls == 1)
    await asyncio.sleep(0.1)
    await running.stop()
    assert calls == 1
    assert _count(rt.metrics, "controller_runtime_terminal_reconcile_errors_total", controller="app") == 1


async def test_requeue_after_comes_back_after_the_delay(env: ClusterCache) -> None:
    await env.add(app("a"))
    times: list[float] = []

    async def reconcile(req: Request, ctx: Context) -> Result:
        times.append(time.monotonic())
        return Result(requeue_after=0.15) if len(times) == 1 else Result()

    ctrl = Controller.for_(APPS).reconcile(reconcile)
    rt = _runtime(env)
    running = await run(ctrl, rt)
    await _until(lambda: len(times) == 2)
    await running.stop()
    assert 0.14 <= times[1] - times[0] < 0.5
    assert (
        _count(rt.metrics, "controller_runtime_reconcile_total", controller="app", result="requeue_after")
        == 1
    )


async def test_sync_reconciler_runs_in_a_thread_and_its_exceptions_requeue(env: ClusterCache) -> None:
    import threading

    await env.add(app("a"))
    threads: list[str] = []

    def reconcile(req: Request, ctx: Any) -> None:
        threads.append(threading.current_thread().name)
        obj = ctx.client.get(APPS, req.name, namespace=req.namespace)  # sync facade over the cache
        assert obj["metadata"]["name"] == "a"
        if len(threads) == 1:
            raise ValueError("first try fails")

    ctrl = (
        Controller.for_(APPS)
        .with_rate_limiter(ItemExponentialFailureRateLimiter(0.01, 1))
        .reconcile(reconcile)
    )
    running = await run(ctrl, _runtime(env))
    await _until(lambda: len(threads) == 2)
    await running.stop()
    assert all(t != threading.main_thread().name for t in threads)


async def test_owned_child_events_enqueue_the_controller_owner(env: ClusterCache) -> None:
    seen: list[Request] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        seen.append(req)

    ctrl = Controller.for_(APPS).owns(CONFIGMAPS).reconcile(reconcile)
    running = await run(ctrl, _runtime(env))
    owned = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "child",
            "namespace": "ns",
            "ownerReferences": [
                {
                    "apiVersion": "example.com/v1",
                    "kind": "App",
                    "name": "parent",
                    "uid": "u",
                    "controller": True,
                },
                {
                    "apiVersion": "other.com/v1",
                    "kind": "App",
                    "name": "not-me",
                    "uid": "v",
                    "controller": False,
                },
            ],
        },
    }
    await env.add(owned)
    orphan = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "orphan", "namespace": "ns"}}
    await env.add(orphan)
    await _until(lambda: len(seen) == 1)
    await env.client.delete(CONFIGMAPS, "child", namespace="ns")
    await _until(lambda: len(seen) == 2)
    await running.stop()
    assert seen == [Request("ns", "parent"), Request("ns", "parent")]


async def test_generation_changed_predicate_skips_status_updates(env: ClusterCache) -> None:
    await env.add(app("a"))
    seen: list[Request] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        seen.append(req)

    ctrl = Controller.for_(APPS, GenerationChanged).reconcile(reconcile)
    running = await run(ctrl, _runtime(env))
    await _until(lambda: len(seen) == 1)
    # A status-only write: the server keeps the generation.
    await env.client.patch(
        APPS, "a", {"status": {"seen": 1}}, namespace="default", type=PatchType.MERGE, subresource="status"
    )
    await asyncio.sleep(0.05)
    assert len(seen) == 1
    await env.put(app("a", generation=2))  # a spec change: the server bumps the generation
    await _until(lambda: len(seen) == 2)
    await running.stop()


async def test_max_concurrency_never_processes_one_key_twice(env: ClusterCache) -> None:
    active: set[str] = set()
    peak = 0
    done = 0

    async def reconcile(req: Request, ctx: Context) -> None:
        nonlocal peak, done
        key = str(req)
        assert key not in active, f"{key} reconciled twice at once"
        active.add(key)
        peak = max(peak, len(active))
        await asyncio.sleep(0.01)
        active.discard(key)
        done += 1

    ctrl = Controller.for_(APPS).max_concurrent(4).reconcile(reconcile)
    running = await run(ctrl, _runtime(env))
    for round_ in range(5):
        for i in range(8):
            await env.put({**app(f"o{i}"), "spec": {"x": round_}})
        await asyncio.sleep(0.005)
    await _until(lambda: not active and done >= 8)
    await asyncio.sleep(0.1)
    await running.stop()
    assert peak == 4


async def test_no_reconcile_before_caches_sync() -> None:
    """The App CRD is installed after the controller starts: its informer cannot list (404)
    until then, and the controller waits for it."""
    env = ClusterCache(crd=False)
    env.factory.start()
    seen: list[Request] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        seen.append(req)

    running = RunningController(Controller.for_(APPS).reconcile(reconcile), _runtime(env))
    start = asyncio.ensure_future(running.start())
    await asyncio.sleep(0.1)
    assert not start.done() and not seen
    env.cluster.add_crd(APP_CRD)
    await env.add(app("a"))
    await start
    await _until(lambda: len(seen) == 1)
    await running.stop()
    await env.close()


async def test_cache_sync_timeout_names_rbac() -> None:
    env = ClusterCache(crd=False)  # the list fails (404, as a 403 without RBAC would): never synced
    env.factory.start()

    async def reconcile(req: Request, ctx: Context) -> None:
        pass

    rt = _runtime(env)
    rt.cache_sync_timeout = 0.1
    try:
        with pytest.raises(TimeoutError, match="RBAC"):
            await run(Controller.for_(APPS).reconcile(reconcile), rt)
    finally:
        await env.close()


def test_builder_validation() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Controller.for_(APPS).max_concurrent(0)
    assert Controller.for_(APPS).name == "app"
    assert Controller.for_(APPS).named("x").name == "x"


async def test_requests_failed_by_an_unreachable_server_are_retried_when_it_returns(
    monkeypatch: pytest.MonkeyPatch, env: ClusterCache
) -> None:
    from kubeop.client import ApiConnectionError

    back = asyncio.Event()

    class Probe:
        async def wait(self, delay: float) -> bool:
            await back.wait()
            return True

    await env.add(app("a"))
    calls: list[float] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise ApiConnectionError("cannot connect to API server")

    # A backoff of 30 s: without the probe the retry would come much later than the server's return.
    ctrl = (
        Controller.for_(APPS)
        .with_rate_limiter(ItemExponentialFailureRateLimiter(30, 60))
        .reconcile(reconcile)
    )
    running = await run(ctrl, _runtime(env, Probe()))
    await _until(lambda: len(calls) == 1)
    await asyncio.sleep(0.05)
    back.set()
    await _until(lambda: len(calls) == 2, timeout=2)
    await running.stop(drain=False)
    assert calls[1] - calls[0] < 2


async def test_without_a_probe_of_its_own_the_runtime_waits_on_the_caches(env: ClusterCache) -> None:
    """The probe is passed explicitly: a runtime given none uses its cache's (one per API server)."""
    from kubeop.client import ApiConnectionError

    back = asyncio.Event()
    waits: list[float] = []

    class Probe:
        async def wait(self, delay: float) -> bool:
            waits.append(delay)
            await back.wait()
            return True

    env.factory.probe = Probe()  # type: ignore[assignment]
    await env.add(app("a"))
    calls: list[float] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise ApiConnectionError("cannot connect to API server")

    ctrl = (
        Controller.for_(APPS)
        .with_rate_limiter(ItemExponentialFailureRateLimiter(30, 60))
        .reconcile(reconcile)
    )
    running = await run(ctrl, _runtime(env))
    await _until(lambda: len(calls) == 1 and len(waits) == 1)
    back.set()
    await _until(lambda: len(calls) == 2, timeout=2)
    await running.stop(drain=False)


class _CountingLimiter(ItemExponentialFailureRateLimiter[Request]):
    """30 s per failure: a retry that went through the rate limiter would come far too late."""

    def __init__(self) -> None:
        super().__init__(30, 60)
        self.calls = 0

    def when(self, item: Request) -> float:
        self.calls += 1
        return super().when(item)


def _probe(back: asyncio.Event | None) -> Any:
    """The shared readiness probe: the first wait ends when ``back`` is set (the server went down
    and came back); every later one (or all, without ``back``) sleeps its delay: no transition."""
    released: list[bool] = []

    class Probe:
        async def wait(self, delay: float) -> bool:
            if back is not None and not released:
                await back.wait()
                released.append(True)
                return True
            await asyncio.sleep(delay)
            return False

    return Probe()


async def test_an_unavailable_server_is_not_charged_to_the_rate_limiter_and_its_warm_up_is_retried_promptly(
    monkeypatch: pytest.MonkeyPatch,
    env: ClusterCache,
) -> None:
    """An outage's failures go neither to the per-item backoff nor to the token bucket, and a
    request that fails once more right after the server's return (a 503 while it installs its
    paths) is retried within a fraction of a second, without waiting for another outage."""
    from kubeop.client import ApiConnectionError
    from kubeop.core.errors import ServiceUnavailable

    back = asyncio.Event()
    probe = _probe(back)
    await env.add(app("a"))
    calls: list[float] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        calls.append(time.monotonic())
        if len(calls) == 1:
            raise ApiConnectionError("cannot connect to API server")
        if len(calls) == 2:
            raise ServiceUnavailable(
                "the request has been made before all known HTTP paths have been installed"
            )

    limiter = _CountingLimiter()
    ctrl = Controller.for_(APPS).with_rate_limiter(limiter).reconcile(reconcile)
    running = await run(ctrl, _runtime(env, probe))
    await _until(lambda: len(calls) == 1)
    await asyncio.sleep(0.05)
    back.set()
    await _until(lambda: len(calls) == 3, timeout=2)
    await running.stop(drain=False)
    assert calls[2] - calls[1] < 0.5  # the controller's own backoff, reset by the return: 0.2-0.4 s
    assert limiter.calls == 0


async def test_without_the_probe_parked_requests_are_retried_on_the_controllers_own_backoff(
    monkeypatch: pytest.MonkeyPatch, env: ClusterCache
) -> None:
    """A server the probe never sees down (a 503 from one aggregated API, say) is retried 0.2 s
    doubling, all parked requests at once; a wrapped connection error counts as one."""
    from kubeop.client import ApiConnectionError

    probe = _probe(None)
    for name in ("a", "b"):
        await env.add(app(name))
    calls: dict[str, list[float]] = {"a": [], "b": []}

    async def reconcile(req: Request, ctx: Context) -> None:
        calls[req.name].append(time.monotonic())
        if len(calls[req.name]) <= 2:
            try:
                raise ApiConnectionError("connection refused")
            except ApiConnectionError as exc:
                raise RuntimeError("could not write the child") from exc

    limiter = _CountingLimiter()
    ctrl = Controller.for_(APPS).with_rate_limiter(limiter).max_concurrent(2).reconcile(reconcile)
    running = await run(ctrl, _runtime(env, probe))
    await _until(lambda: len(calls["a"]) == 3 and len(calls["b"]) == 3, timeout=3)
    await running.stop(drain=False)
    for times in calls.values():
        first, second = times[1] - times[0], times[2] - times[1]
        assert 0.15 <= first < 0.5 and 0.35 <= second < 1.0, times  # 0.2-0.4 s, then 0.4-0.8 s
    assert limiter.calls == 0


async def test_a_failed_reconcile_says_which_object_in_the_message(
    caplog: pytest.LogCaptureFixture, env: ClusterCache
) -> None:
    """The message itself names the object, whatever the log formatter does with extra fields."""
    await env.add(app("a"))
    await env.add(app("b"))

    async def reconcile(req: Request, ctx: Context) -> None:
        if req.name == "a":
            raise RuntimeError("boom")
        raise TerminalError("spec.x is invalid")

    ctrl = (
        Controller.for_(APPS)
        .with_rate_limiter(ItemExponentialFailureRateLimiter(10, 10))
        .reconcile(reconcile)
    )
    rt = _runtime(env)
    with caplog.at_level(logging.WARNING, logger="kubeop"):
        running = await run(ctrl, rt)
        await _until(lambda: len([r for r in caplog.records if "reconcile of" in r.getMessage()]) >= 2)
        await running.stop()
    messages = sorted(r.getMessage() for r in caplog.records if "reconcile of" in r.getMessage())
    assert messages == [
        "app: reconcile of default/a failed, will retry: RuntimeError: boom",
        "app: reconcile of default/b failed (terminal, not retried): spec.x is invalid",
    ]
