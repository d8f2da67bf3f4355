"""A Controller is an immutable description: builder methods return new descriptions, one
description runs in several managers at once, and a run stops cleanly whenever it is stopped."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import pytest

from kubeop.controller import (
    Context,
    Controller,
    EventRecorder,
    GenerationChanged,
    ReconcilerClient,
    Request,
    Trigger,
)
from kubeop.controller.running import ControllerRuntime, RunningController
from kubeop.manager import Manager, Serving
from kubeop.queue import ItemExponentialFailureRateLimiter
from kubeop.testing import FakeCluster

from .fakes import APP_CRD, APPS, CONFIGMAPS, ClusterCache, app, run


async def _nothing(req: Request, ctx: Context) -> None:
    pass


async def _until(pred: Any, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.005)


def _runtime(env: ClusterCache) -> ControllerRuntime:
    client = ReconcilerClient(env.client, env.factory)
    return ControllerRuntime(env.factory, client, EventRecorder(None, "test"), None, cache_sync_timeout=2)


def test_builder_methods_return_new_descriptions_and_leave_the_receiver() -> None:
    base = Controller.for_(APPS)
    built = (
        base.owns(CONFIGMAPS)
        .watches(CONFIGMAPS, lambda obj: [])
        .with_predicates(GenerationChanged)
        .max_concurrent(3)
        .named("apps")
        .with_rate_limiter(ItemExponentialFailureRateLimiter(0.1, 1))
        .triggered_by(Trigger())
        .reconcile(_nothing)
    )
    assert base == Controller.for_(APPS)  # untouched by everything built on it
    assert base.name == "app" and base.reconciler is None
    assert built.name == "apps" and built.reconciler is _nothing
    with pytest.raises(dataclasses.FrozenInstanceError):
        built._name = "other"  # type: ignore[misc]
    assert built.named("apps") == built  # a value: equal by content, and hashable
    assert len({built, built.named("apps"), base}) == 2


def test_a_shared_base_gives_independent_descriptions() -> None:
    base = Controller.for_(APPS).owns(CONFIGMAPS)
    one, two = base.named("one").reconcile(_nothing), base.named("two").max_concurrent(2).reconcile(_nothing)
    assert (one.name, two.name, base.name) == ("one", "two", "app")
    assert one._workers == 1 and two._workers == 2 and one._watches == two._watches == base._watches


def test_manager_add_refuses_what_cannot_run() -> None:
    manager = Manager(serving=Serving(metrics_address=None, health_address=None))
    with pytest.raises(ValueError, match=r"'app' has no reconciler: call \.reconcile\(fn\)"):
        manager.add(Controller.for_(APPS))
    with pytest.raises(TypeError, match=r"Manager\.add takes a Controller, got function"):
        manager.add(_nothing)  # type: ignore[arg-type]
    described = Controller.for_(APPS).reconcile(_nothing)
    assert manager.add(described) is described
    with pytest.raises(ValueError, match="already registered"):
        manager.add(described)


async def test_stop_before_start_and_twice_is_clean() -> None:
    env = ClusterCache()
    env.factory.start()
    try:
        never = RunningController(Controller.for_(APPS).reconcile(_nothing), _runtime(env))
        await never.stop()
        await never.stop()
        with pytest.raises(RuntimeError, match="was stopped"):
            await never.start()
        running = await run(Controller.for_(APPS).reconcile(_nothing), _runtime(env))
        await running.stop()
        await running.stop(drain=False)
    finally:
        await env.close()


async def test_a_trigger_reaches_every_run_while_it_runs() -> None:
    env = ClusterCache()
    env.factory.start()
    trigger = Trigger()
    seen: list[tuple[str, Request]] = []

    def recording(tag: str) -> Any:
        async def reconcile(req: Request, ctx: Context) -> None:
            seen.append((tag, req))

        return reconcile

    described = Controller.for_(APPS).triggered_by(trigger)
    try:
        one = await run(described.reconcile(recording("one")), _runtime(env))
        two = await run(described.reconcile(recording("two")), _runtime(env))
        trigger(Request("default", "x"))
        await _until(lambda: len(seen) == 2)
        assert sorted(seen) == [("one", Request("default", "x")), ("two", Request("default", "x"))]
        await one.stop()
        await two.stop()
        trigger(Request("default", "y"))  # nobody runs: goes nowhere, raises nothing
        assert repr(trigger) == "<Trigger connected=0>"
    finally:
        await env.close()


async def test_a_rate_limiter_factory_gives_each_run_its_own() -> None:
    env = ClusterCache()
    env.factory.start()
    described = (
        Controller.for_(APPS)
        .with_rate_limiter(lambda: ItemExponentialFailureRateLimiter(1, 1))
        .reconcile(_nothing)
    )
    try:
        one = RunningController(described, _runtime(env))
        two = RunningController(described, _runtime(env))
        assert one._queue.rate_limiter is not two._queue.rate_limiter
        shared = ItemExponentialFailureRateLimiter[Request](1, 1)
        same = described.with_rate_limiter(shared)
        assert RunningController(same, _runtime(env))._queue.rate_limiter is shared
    finally:
        await env.close()


async def test_two_managers_run_one_description() -> None:
    """Each manager makes its own run of the description: both reconcile every object."""
    cluster = FakeCluster()
    seen: dict[str, set[str]] = {"a": set(), "b": set()}

    async def reconcile(req: Request, ctx: Context) -> None:
        seen[ctx.client.field_manager].add(req.name)

    described = Controller.for_(APPS).reconcile(reconcile)
    cluster.add_crd(APP_CRD)
    managers = [
        Manager(cluster.client(), name=name, serving=Serving(metrics_address=None, health_address=None))
        for name in ("a", "b")
    ]
    for manager in managers:
        manager.add(described)
    stop = asyncio.Event()
    tasks = [asyncio.ensure_future(m.start(stop)) for m in managers]
    async with cluster.client() as api:
        await api.create(app("one"))
        await api.create(app("two"))
        await _until(lambda: seen == {"a": {"one", "two"}, "b": {"one", "two"}})
    stop.set()
    await asyncio.gather(*tasks)
    assert managers[0].controllers == managers[1].controllers == [described]


async def test_a_run_stopped_while_its_caches_sync_leaves_no_handler() -> None:
    """The manager cancels the starts still waiting for caches, then stops every run."""
    env = ClusterCache(crd=False)  # the App list fails (404): never synced
    env.factory.start()
    try:
        running = RunningController(Controller.for_(APPS).reconcile(_nothing), _runtime(env))
        start = asyncio.ensure_future(running.start())
        await _until(lambda: bool(running._registrations))
        informer = running._registrations[0][0]
        start.cancel()
        await asyncio.gather(start, return_exceptions=True)
        await running.stop()
        assert not informer.handlers and not running._tasks
        with pytest.raises(RuntimeError, match="was stopped"):
            await running.start()
    finally:
        await env.close()


async def test_a_trigger_called_from_another_thread_reaches_the_loop() -> None:
    """A sync reconciler or another library's callback fires the trigger from its own thread."""
    env = ClusterCache()
    env.factory.start()
    trigger = Trigger()
    seen: list[Request] = []

    async def reconcile(req: Request, ctx: Context) -> None:
        seen.append(req)

    try:
        running = await run(Controller.for_(APPS).triggered_by(trigger).reconcile(reconcile), _runtime(env))
        asyncio.get_running_loop().set_debug(True)  # a loop call from another thread raises
        await asyncio.sleep(0.05)  # the worker waits in the queue's get
        await asyncio.to_thread(trigger, Request("default", "from-a-thread"))
        await _until(lambda: seen == [Request("default", "from-a-thread")])
        await running.stop()
    finally:
        await env.close()


def test_misuse_of_the_builder_names_the_argument_and_the_fix() -> None:
    with pytest.raises(TypeError, match=r"triggered_by takes a Trigger, got function: make one with"):
        Controller.for_(APPS).triggered_by(lambda req: None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"a Trigger takes a Request, got tuple: call trigger\(Request"):
        Trigger()(("default", "x"))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"max_concurrent takes a number of workers \(int\), got '3'"):
        Controller.for_(APPS).max_concurrent("3")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"got True"):
        Controller.for_(APPS).max_concurrent(True)
    with pytest.raises(TypeError, match=r"reconcile takes a function \(request, ctx\)"):
        Controller.for_(APPS).reconcile("reconcile")  # type: ignore[arg-type]


async def test_a_run_stopped_while_it_resolves_its_watches_registers_nothing() -> None:
    env = ClusterCache()
    env.factory.start()
    try:
        runtime = _runtime(env)
        running = RunningController(Controller.for_(APPS).owns(CONFIGMAPS).reconcile(_nothing), runtime)
        resolve = runtime.client.resource
        stopped = asyncio.Event()

        async def slow_resource(what: Any) -> Any:
            if what is CONFIGMAPS:
                await running.stop()  # stop() lands while start() awaits discovery
                stopped.set()
            return await resolve(what)

        runtime.client.resource = slow_resource  # type: ignore[method-assign]
        await running.start()
        assert stopped.is_set() and not running._registrations and not running._tasks
        assert all(not informer.handlers for informer in env.factory.informers)
    finally:
        await env.close()
