"""Engaging and disengaging under pressure, on FakeClusters and a loopback server that never
answers: rapid engage/rotate/disengage cycles leave no task, Cluster or connection behind; a
disengage while a reconcile runs, or while a cluster never answers, returns within a bound;
a burst of Secret changes ends with the Secret's last kubeconfig engaged, once."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import itertools
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import yaml

from kubeop.client import ClientConfig
from kubeop.controller import Context, Controller, Request
from kubeop.fleet import Fleet, KubeconfigSecrets
from kubeop.fleet._member import Member
from kubeop.fleet.secrets import SECRETS
from kubeop.manager import Runtime
from kubeop.testing import FakeCluster

from ._support import BOUND, CM, Fakes, configmap, create, in_background, labeller, until


async def test_rapid_engage_rotate_disengage_cycles_leak_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    members: list[weakref.ref[Member]] = []
    init = Member.__init__

    def tracked(self: Member, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        members.append(weakref.ref(self))

    monkeypatch.setattr(Member, "__init__", tracked)
    east, west = FakeCluster(), FakeCluster()
    seen: list[tuple[str, str]] = []
    provider = Fakes({"east": east})
    fleet = Fleet(provider, runtime=Runtime(graceful_shutdown_timeout=1.0))
    fleet.add(labeller(seen))
    stop = asyncio.Event()
    run = asyncio.create_task(fleet.start(stop))
    engaged_west = 0
    try:
        await fleet.wait_engaged("east", BOUND)
        baseline = len(asyncio.all_tasks())
        assert provider.fleet is not None
        for i in range(20):
            await provider.engage("west", west)
            if i % 2:  # half the time: disengaged before it even started
                await fleet.wait_engaged("west", BOUND)
                await provider.engage("west", west, namespace=f"rotated-{i}")  # credentials rotated
                await fleet.wait_engaged("west", BOUND)
                engaged_west += 2
            await provider.fleet.disengage("west")
            assert "west" not in fleet.engaged
        await until(lambda: len(asyncio.all_tasks()) <= baseline)
        # east was never disturbed: it still converges.
        await create(east, configmap("after-cycles"))
        await until(lambda: ("east", "after-cycles") in seen)
        assert engaged_west == 20
        gc.collect()
        alive = [m for m in map(lambda ref: ref(), members) if m is not None]
        assert [m.name for m in alive] == ["east"]  # every Member of west was freed, its Cluster too
        assert len(members) > 20
    finally:
        stop.set()
        await asyncio.wait_for(run, BOUND)


async def test_disengaging_during_a_reconcile_is_bounded_and_cancels_it() -> None:
    fake = FakeCluster()
    await create(fake, configmap("slow"))
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def reconcile(req: Request, ctx: Context) -> None:
        started.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    provider = Fakes({"edge": fake})
    fleet = Fleet(provider, runtime=Runtime(graceful_shutdown_timeout=0.5))
    fleet.add(Controller.for_(CM).named("stuck").reconcile(reconcile))
    async with in_background(fleet.start):
        async with asyncio.timeout(BOUND):
            await started.wait()
        assert provider.fleet is not None
        t0 = time.monotonic()
        await asyncio.wait_for(provider.fleet.disengage("edge"), BOUND)
        assert time.monotonic() - t0 < 3.0  # the drain timeout (0.5 s), not the reconcile's hour
        assert cancelled.is_set()
        assert "edge" not in fleet.clusters


async def test_a_sync_reconcile_still_running_after_disengage_cannot_write_there() -> None:
    fake = FakeCluster()
    await create(fake, configmap("slow"))
    started, release = threading.Event(), threading.Event()
    outcome: list[str] = []

    def reconcile(req: Request, ctx: Context) -> None:
        started.set()
        release.wait(BOUND)
        try:
            ctx.client.patch(CM, req.name, {"data": {"late": "write"}}, namespace=req.namespace)
            outcome.append("written")
        except Exception as exc:
            outcome.append(type(exc).__name__)

    async with _disengaged_mid_reconcile(fake, "stuck-sync", reconcile, started, release):
        await until(lambda: bool(outcome))
        assert outcome != ["written"]
        async with fake.client() as api:
            obj = await api.get(CM, "slow", namespace="default")
        assert "late" not in (obj.get("data") or {})


async def test_a_sync_reconcile_still_running_after_disengage_reads_no_false_absence() -> None:
    # Its cluster's cache is released on disengage: a read must fail (or be stale), never answer
    # that objects which exist are gone (a reconciler would clean up after them).
    fake = FakeCluster()
    await create(fake, configmap("slow"), configmap("other"))
    started, release = threading.Event(), threading.Event()
    outcome: list[str] = []

    def reconcile(req: Request, ctx: Context) -> None:
        if req.name != "slow":
            return
        started.set()
        release.wait(BOUND)
        for read in (
            lambda: len(ctx.client.list(CM, namespace="default")) == 2,
            lambda: ctx.client.get(CM, "other", namespace="default") is not None,
        ):
            try:
                outcome.append("stale" if read() else "absent")
            except Exception as exc:
                outcome.append(f"error: {exc}")

    async with _disengaged_mid_reconcile(fake, "stuck-reader", reconcile, started, release):
        await until(lambda: len(outcome) == 2)
        assert "absent" not in outcome, outcome
        assert all("edge" in o for o in outcome if o.startswith("error")), outcome


class Silent:
    """A loopback server that accepts connections and never answers (a cluster that hangs)."""

    def __init__(self) -> None:
        self.open = 0
        self.accepted = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> str:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.open += 1
            self.accepted += 1
            self._writers.append(writer)
            try:
                while await reader.read(65536):
                    pass
            finally:
                self.open -= 1

        self._server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def __aexit__(self, *exc: Any) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()


async def test_a_cluster_that_never_answers_is_retried_and_disengaged_without_a_leak() -> None:
    good = FakeCluster()
    seen: list[tuple[str, str]] = []
    provider = Fakes({"good": good})
    fleet = Fleet(provider, runtime=Runtime(cache_sync_timeout=0.3, graceful_shutdown_timeout=0.5))
    fleet.add(labeller(seen))
    stop = asyncio.Event()
    run = asyncio.create_task(fleet.start(stop))
    silent = Silent()
    async with silent as url:
        try:
            await fleet.wait_engaged("good", BOUND)
            baseline = len(asyncio.all_tasks())
            assert provider.fleet is not None
            await provider.fleet.engage("hung", ClientConfig(server=url, qps=None))
            await until(lambda: silent.accepted >= 1)
            await asyncio.sleep(1.0)  # a few start attempts time out meanwhile
            await create(good, configmap("unaffected"))
            await until(lambda: ("good", "unaffected") in seen)
            assert "hung" not in fleet.clusters
            t0 = time.monotonic()
            await asyncio.wait_for(provider.fleet.disengage("hung"), BOUND)
            assert time.monotonic() - t0 < 3.0
            await until(lambda: len(asyncio.all_tasks()) <= baseline)
            await until(lambda: silent.open == 0)  # every connection to it was closed
        finally:
            stop.set()
            await asyncio.wait_for(run, BOUND)


def kubeconfig_secret(name: str, server: str, token: str) -> dict[str, Any]:
    text = yaml.safe_dump(
        {
            "clusters": [{"name": "c", "cluster": {"server": server}}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
    )
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"{name}-kubeconfig", "namespace": "fleet"},
        "data": {"value": base64.b64encode(text.encode()).decode()},
    }


async def test_a_secret_rotated_deleted_and_recreated_in_a_burst_ends_engaged_once_with_the_last() -> None:
    hub = FakeCluster()
    api = hub.client(namespace="fleet")
    engaged: list[tuple[str, str | None]] = []

    class Recorder:
        running: dict[str, str] = {}

        async def engage(self, name: str, config: ClientConfig, **_: Any) -> None:
            engaged.append((name, config.token))
            self.running[name] = str(config.token)

        async def disengage(self, name: str) -> None:
            engaged.append((name, None))
            self.running.pop(name, None)

    recorder = Recorder()
    stop = asyncio.Event()
    await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fleet"}})
    run = asyncio.create_task(
        KubeconfigSecrets("fleet", label_selector="", hub=api).run(recorder, stop)  # type: ignore[arg-type]
    )
    try:
        for i in range(10):
            await api.create(kubeconfig_secret("east", "https://east:6443", f"t{i}-a"))
            rotated = kubeconfig_secret("east", "https://east:6443", f"t{i}-b")
            await api.patch(SECRETS, "east-kubeconfig", {"data": rotated["data"]}, namespace="fleet")
            await api.delete(SECRETS, "east-kubeconfig", namespace="fleet")
        await api.create(kubeconfig_secret("east", "https://east:6443", "final"))
        await until(lambda: recorder.running.get("east") == "final")
        await asyncio.sleep(0.3)  # nothing more comes
        assert recorder.running == {"east": "final"}
        assert engaged[-1] == ("east", "final")
        # never engaged twice in a row without a disengage or a new token between
        assert all(a != b for a, b in itertools.pairwise(engaged))
    finally:
        stop.set()
        await asyncio.wait_for(run, BOUND)
        await api.close()


async def test_a_cluster_whose_credentials_expire_is_retried_alone_and_resumes() -> None:
    east, west = FakeCluster(), FakeCluster()
    seen: list[tuple[str, str]] = []
    fleet = Fleet(Fakes({"east": east, "west": west}))
    fleet.add(labeller(seen))
    async with in_background(fleet.start):
        await fleet.wait_engaged("east", BOUND)
        await fleet.wait_engaged("west", BOUND)
        west.fail("PATCH", CM, code=401, times=None)  # its token expired: every write refused
        await create(west, configmap("refused"))
        await until(lambda: ("west", "refused") in seen)
        # east is not held up while west's reconciles fail and back off
        for i in range(5):
            t0 = time.monotonic()
            await create(east, configmap(f"e{i}"))
            await until(lambda i=i: ("east", f"e{i}") in seen)  # type: ignore[misc]
            assert time.monotonic() - t0 < 1.0
        west.heal()  # credentials back: its key converges on a retry
        async with asyncio.timeout(BOUND):
            while True:
                async with west.client() as api:
                    obj = await api.get(CM, "refused", namespace="default")
                if (obj.get("data") or {}).get("cluster") == "west":
                    break
                await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def _disengaged_mid_reconcile(
    fake: FakeCluster,
    name: str,
    reconcile: Callable[[Request, Context], None],
    started: threading.Event,
    release: threading.Event,
) -> AsyncIterator[None]:
    """A fleet of ``fake`` ("edge") running ``reconcile`` (a sync one, in its thread) as
    controller ``name``; once it has ``started``, "edge" is disengaged, then ``release`` is set
    and the block runs; the fleet stops after it (bounded)."""
    provider = Fakes({"edge": fake})
    fleet = Fleet(provider, runtime=Runtime(graceful_shutdown_timeout=0.3))
    fleet.add(Controller.for_(CM).named(name).reconcile(reconcile))
    stop = asyncio.Event()
    run = asyncio.create_task(fleet.start(stop))
    try:
        await until(started.is_set)
        assert provider.fleet is not None
        await asyncio.wait_for(provider.fleet.disengage("edge"), BOUND)
        release.set()
        yield
    finally:
        release.set()
        stop.set()
        await asyncio.wait_for(run, BOUND)
