"""kopf's change handlers in a kubeop Fleet (kubeop's extension): they run per cluster, get the
cluster's name as the ``cluster`` kwarg (``""`` on one cluster), and keep their memos per
cluster even for objects of the same name. On kubeop.testing.FakeClusters; every wait bounded."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import kubeop.kopf as kopf
from kubeop.fleet import Fleet
from kubeop.kopf.processing import Processor
from kubeop.kopf.running import build_manager, processors
from kubeop.manager import Manager, Runtime
from kubeop.testing import FakeCluster
from tests.unit.fleet._support import BOUND, CM, Fakes, create, in_background, until


@contextlib.asynccontextmanager
async def running_and_stopping_daemons(fleet: Fleet, manager: Manager) -> AsyncIterator[None]:
    """Run ``fleet`` for the block; after it, stop the daemons and timers of ``manager``'s
    processors (bounded)."""
    try:
        async with in_background(fleet.start):
            yield
    finally:
        await asyncio.wait_for(asyncio.gather(*(p.stop_all() for p in processors(manager))), BOUND)


async def test_kopf_handlers_run_per_cluster_with_the_cluster_kwarg() -> None:
    fakes = {n: FakeCluster() for n in ("east", "west")}
    for fake in fakes.values():
        await create(fake, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "same"}})
    reg = kopf.Registry()
    seen: list[tuple[str, str, int]] = []

    @kopf.on.create("configmaps", registry=reg, id="mark")
    async def mark(name: str, cluster: str, memo: Any, patch: kopf.Patch, **_: Any) -> None:
        seen.append((cluster, name, id(memo)))
        patch.setdefault("metadata", {}).setdefault("labels", {})["cluster"] = cluster

    manager = build_manager(registry=reg, client=FakeCluster().client())
    fleet = Fleet(Fakes(fakes), name="kopf-fleet")
    for controller in manager.controllers:
        fleet.add(controller)
    async with running_and_stopping_daemons(fleet, manager):
        await until(lambda: {c for c, _, _ in seen} == {"east", "west"})
        for name, fake in fakes.items():
            async with fake.client() as api:
                async with asyncio.timeout(BOUND):
                    while True:
                        obj = await api.get(CM, "same", namespace="default")
                        if (obj["metadata"].get("labels") or {}).get("cluster") == name:
                            break
                        await asyncio.sleep(0.01)
        # One object named "same" in each cluster: two memos, each handled once.
        assert sorted((c, n) for c, n, _ in seen) == [("east", "same"), ("west", "same")]
        assert len({m for _, _, m in seen}) == 2


async def test_on_one_cluster_the_cluster_kwarg_is_empty() -> None:
    from kubeop.kopf.processing import _kwargs

    kwargs = _kwargs(
        {"metadata": {"name": "x"}},
        kopf.Patch(),
        None,
        CM,
        {},
        None,
        None,
        (),  # type: ignore[arg-type]
    )
    assert kwargs["cluster"] == ""


def fleet_of(manager: Any, fakes: dict[str, FakeCluster], runtime: Runtime | None = None) -> Fleet:
    """The fleet ``kubeop.fleet.fleet_for`` makes of a kopf manager, on FakeClusters."""
    fleet = Fleet(Fakes(fakes), name="kopf-fleet", runtime=runtime)
    for controller in manager.controllers:
        fleet.add(controller)
    for runnable in manager.runnables:
        fleet.add(runnable)
    return fleet


async def test_kopf_event_handlers_run_per_cluster_with_the_cluster_kwarg() -> None:
    fakes = {n: FakeCluster() for n in ("east", "west")}
    for name, fake in fakes.items():
        await create(fake, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"in-{name}"}})
    reg = kopf.Registry()
    seen: list[tuple[str, str, str | None]] = []

    @kopf.on.event("configmaps", registry=reg, id="watch")
    async def watch(name: str, cluster: str, type: str | None, **_: Any) -> None:
        seen.append((cluster, name, type))

    manager = build_manager(registry=reg, client=FakeCluster().client())
    fleet = fleet_of(manager, fakes)
    async with in_background(fleet.start):
        await until(lambda: {(c, n) for c, n, _ in seen} == {("east", "in-east"), ("west", "in-west")})
        await create(fakes["west"], {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "later"}})
        await until(lambda: ("west", "later", "ADDED") in seen)
        # Each cluster's objects reach its own dispatch only, listed ones with type None.
        assert ("east", "in-east", None) in seen and ("west", "in-west", None) in seen
        assert not any(c == "east" and n != "in-east" for c, n, _ in seen)


async def test_on_one_cluster_event_handlers_get_an_empty_cluster_kwarg() -> None:
    from kubeop.kopf.watching import EventDispatcher, WatchingHandler

    got: list[str] = []
    handler = WatchingHandler(fn=lambda cluster, **_: got.append(cluster), id="w", resource="configmaps")
    await EventDispatcher([handler], {}).dispatch(None, {"metadata": {"name": "x"}})
    assert got == [""]


def test_fleet_for_takes_kopf_event_handlers_and_indices_and_refuses_admission(tmp_path: Path) -> None:
    from kubeop.fleet.environment import KUBECONFIGS_ENV, fleet_for

    (tmp_path / "a.yaml").write_text("")
    environ = {KUBECONFIGS_ENV: f"a={tmp_path / 'a.yaml'}"}
    reg = kopf.Registry()
    kopf.on.event("configmaps", registry=reg, id="watch")(lambda **_: None)
    kopf.index("configmaps", registry=reg, id="names")(lambda name, **_: name)
    manager = build_manager(registry=reg, client=FakeCluster().client())
    fleet = fleet_for(manager, environ)
    assert fleet is not None and fleet.per_cluster == manager.runnables
    kopf.on.validate("configmaps", registry=reg, id="check")(lambda **_: None)
    with pytest.raises(ValueError, match="this operator has webhooks, which a fleet run"):
        fleet_for(build_manager(registry=reg, client=FakeCluster().client()), environ)


async def test_kopf_indices_are_kept_per_cluster() -> None:
    fakes = {n: FakeCluster() for n in ("east", "west")}
    for name, fake in fakes.items():
        async with fake.client() as api:
            for i in range(2):
                cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-{i}"}}
                await api.create(cm)
    reg = kopf.Registry()
    seen: dict[tuple[str, str], set[str]] = {}

    @kopf.index("configmaps", registry=reg, id="names")
    def names(name: str, **_: Any) -> dict[str, str]:
        return {"all": name}

    @kopf.on.create("configmaps", registry=reg, id="look")
    def look(name: str, cluster: str, names: kopf.Index[str, str], **_: Any) -> None:
        seen[(cluster, name)] = set(names["all"])

    manager = build_manager(registry=reg, client=FakeCluster().client())
    fleet = fleet_of(manager, fakes)
    async with running_and_stopping_daemons(fleet, manager):
        await until(lambda: len(seen) == 4)
        # A handler in a cluster sees that cluster's index only (filled before its first call).
        assert seen == {
            ("east", "east-0"): {"east-0", "east-1"},
            ("east", "east-1"): {"east-0", "east-1"},
            ("west", "west-0"): {"west-0", "west-1"},
            ("west", "west-1"): {"west-0", "west-1"},
        }
        (indexes,) = [r.indexes for r in manager.runnables if hasattr(r, "indexes")]
        assert dict(indexes.of("east").indices["names"]).keys() == {"all"}
        assert not indexes.indices["names"]  # the one-cluster set is not fed in a fleet
        await fleet.disengage("east")
        with pytest.raises(LookupError, match="kopf indices of cluster 'east' are not running"):
            indexes.of("east")


async def test_a_disengaged_clusters_daemons_are_cancelled_and_the_others_run_on() -> None:
    fakes = {n: FakeCluster() for n in ("east", "west")}
    for fake in fakes.values():
        await create(fake, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "same"}})
    reg = kopf.Registry()
    running: set[str] = set()
    cancelled: list[tuple[str, bool]] = []

    @kopf.daemon("configmaps", registry=reg, id="watcher")
    async def watcher(cluster: str, stopped: kopf.DaemonStopped, **_: Any) -> None:
        running.add(cluster)
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.append((cluster, bool(stopped)))  # kopf's: the flag is set, then cancelled
            raise

    manager = build_manager(registry=reg, client=FakeCluster().client())
    fleet = fleet_of(manager, fakes)
    async with in_background(fleet.start):
        await until(lambda: running == {"east", "west"})
        loop = asyncio.get_running_loop()
        began = loop.time()
        async with asyncio.timeout(BOUND):
            await fleet.disengage("east")
        await until(lambda: ("east", True) in cancelled)
        assert loop.time() - began < 5.0
        (processor,) = processors(manager)
        assert [k[0] for k in processor._spawned] == ["west"]  # west's daemon runs on
        assert cancelled == [("east", True)]
    # The fleet's stop stopped the other cluster's daemon too.
    assert sorted(cancelled) == [("east", True), ("west", True)]
    assert not processors(manager)[0]._spawned


async def test_in_a_fleet_kopf_events_go_to_the_cluster_the_object_lives_in() -> None:
    from kubeop.controller.events import EVENTS

    fakes = {n: FakeCluster() for n in ("east", "west")}
    for name, fake in fakes.items():
        await create(fake, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"in-{name}"}})
    reg = kopf.Registry()

    @kopf.on.create("configmaps", registry=reg, id="tell")
    def tell(body: Any, cluster: str, **_: Any) -> None:  # a sync handler: posted from its thread
        kopf.info(body, reason="Seen", message=f"by {cluster}")

    @kopf.on.event("configmaps", registry=reg, id="watch")
    async def watch(body: Any, cluster: str, type: str | None, **_: Any) -> None:
        if type is None:
            kopf.info(body, reason="Listed", message=f"by {cluster}")

    async def notes(fake: FakeCluster) -> set[tuple[str, str, str]]:
        async with fake.client() as api:
            listed = await api.list(EVENTS, namespace="default")
        return {(e["regarding"]["name"], e["reason"], e["note"]) for e in listed}

    manager = build_manager(registry=reg, client=FakeCluster().client())
    fleet = fleet_of(manager, fakes)
    async with running_and_stopping_daemons(fleet, manager):
        for name, fake in fakes.items():
            want = {(f"in-{name}", "Seen", f"by {name}"), (f"in-{name}", "Listed", f"by {name}")}
            async with asyncio.timeout(BOUND):
                while not want <= (got := await notes(fake)):  # noqa: ASYNC110 - another cluster's API
                    await asyncio.sleep(0.02)
            assert {n for n, _, _ in got} == {f"in-{name}"}  # none about the other cluster's object


async def _stubborn_daemons(
    body: Callable[[Fleet, Processor, set[str]], Awaitable[None]],
    *,
    backoff: float = 0.3,
    runtime: Runtime | None = None,
) -> None:
    """A daemon per cluster that ignores its ``stopped`` flag (kopf cancels it after its
    cancellation backoff), on two clusters of a fleet; ``body`` gets the fleet, the processor and
    the clusters whose daemon runs, once both run."""
    fakes = {n: FakeCluster() for n in ("east", "west")}
    # The object as kopf's first cycle leaves it (its finalizer and last-handled state), so that
    # cycle writes nothing: no later cycle of that write could spawn a daemon the test stopped.
    settled = {
        "name": "same",
        "finalizers": ["kopf.zalando.org/KopfFinalizerMarker"],
        "annotations": {"kopf.zalando.org/last-handled-configuration": "{}\n"},
    }
    for fake in fakes.values():
        await create(fake, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(settled)})
    reg = kopf.Registry()
    running: set[str] = set()

    @kopf.daemon("configmaps", registry=reg, id="stubborn", cancellation_backoff=backoff)
    async def stubborn(cluster: str, **_: Any) -> None:
        running.add(cluster)
        try:
            await asyncio.sleep(3600)  # never looks at `stopped`
        finally:
            running.discard(cluster)

    manager = build_manager(registry=reg, client=FakeCluster().client())
    fleet = fleet_of(manager, fakes, runtime)
    async with running_and_stopping_daemons(fleet, manager):
        await until(lambda: running == {"east", "west"})
        (processor,) = processors(manager)
        await body(fleet, processor, running)
    assert not running


async def _cancelled_midway(stopping: Awaitable[None]) -> None:
    """Cancel ``stopping`` while it waits for a daemon's cancellation backoff; it raises."""
    task = asyncio.ensure_future(stopping)
    await asyncio.sleep(0.05)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, BOUND)


async def test_a_cancelled_stop_cluster_still_stops_the_daemons_it_took() -> None:
    async def body(_: Fleet, processor: Processor, running: set[str]) -> None:
        await _cancelled_midway(processor.stop_cluster("east"))
        assert not [k for k in processor._spawned if k[0] == "east"]
        await until(lambda: "east" not in running)  # cancelled after its backoff all the same
        assert running == {"west"}

    await _stubborn_daemons(body)


async def test_a_cancelled_stop_all_still_stops_every_daemon() -> None:
    async def body(_: Fleet, processor: Processor, running: set[str]) -> None:
        await _cancelled_midway(processor.stop_all())
        assert not processor._spawned
        await until(lambda: not running)

    await _stubborn_daemons(body)


async def test_stop_all_waits_for_a_cancelled_stop_cluster_to_end() -> None:
    async def body(_: Fleet, processor: Processor, running: set[str]) -> None:
        await _cancelled_midway(processor.stop_cluster("east"))
        await asyncio.wait_for(processor.stop_all(), BOUND)
        assert not running  # nothing left running once stop_all returned

    await _stubborn_daemons(body)


async def test_a_daemon_slower_to_stop_than_the_graceful_timeout_is_stopped_when_its_cluster_goes() -> None:
    # The member's graceful timeout (0.2 s) cancels the stop of east's daemons during their
    # cancellation backoff (1 s): they are cancelled after it all the same.
    async def body(fleet: Fleet, processor: Processor, running: set[str]) -> None:
        async with asyncio.timeout(BOUND):
            await fleet.disengage("east")
        await until(lambda: "east" not in running)
        assert running == {"west"}

    await _stubborn_daemons(body, backoff=1.0, runtime=Runtime(graceful_shutdown_timeout=0.2))


class _Marker:
    """What the index below holds per object (weakly referenceable, unlike a body)."""

    def __init__(self, uid: str) -> None:
        self.uid = uid


async def test_a_disengaged_clusters_kopf_indices_are_freed_without_a_full_collection() -> None:
    fakes = {n: FakeCluster() for n in ("east", "west")}
    for fake in fakes.values():
        for i in range(5):
            await create(fake, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}"}})
    reg = kopf.Registry()
    made: list[weakref.ref[_Marker]] = []

    @kopf.index("configmaps", registry=reg, id="marks")
    def marks(uid: str, **_: Any) -> dict[str, _Marker]:
        marker = _Marker(uid)
        made.append(weakref.ref(marker))
        return {"all": marker}

    manager = build_manager(registry=reg, client=FakeCluster().client())
    fleet = fleet_of(manager, fakes)
    async with running_and_stopping_daemons(fleet, manager):
        await until(lambda: len(made) == 10)
        (indexes,) = [r.indexes for r in manager.runnables if hasattr(r, "indexes")]
        held = indexes.of("east").indices["marks"]  # as by a handler still running there
        async with asyncio.timeout(BOUND):
            await fleet.disengage("east")
        with pytest.raises(RuntimeError, match="cluster 'east' are released"):
            held["all"]  # an error, not an empty index
        gc.collect()  # not of the objects frozen by a list (kubeop.cache.gcpause): those wait
        alive = {m.uid for m in (ref() for ref in made) if m is not None}
        async with fakes["west"].client() as api:
            west = {o["metadata"]["uid"] for o in await api.list(CM, namespace="default")}
        assert alive == west
