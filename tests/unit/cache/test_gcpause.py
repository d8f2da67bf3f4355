"""Informers pause the cyclic garbage collector while they load a list (kubeop.cache.gcpause),
and the default transform shares repeated strings (kubeop.cache.transform.compact)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from kubeop.cache import FuncHandler, Informer, WatcherConfig, compact, gcpause
from kubeop.cache import transform as transform_module
from kubeop.cache.gcpause import GcPause

from .fakes import FakeListWatch
from .test_informer import CONFIG, eventually, filled, running


@pytest.fixture(autouse=True)
def gc_enabled() -> Iterator[None]:
    gc.enable()
    gc.unfreeze()
    gcpause._frozen_at = None
    yield
    gc.enable()
    gc.unfreeze()
    gcpause._frozen_at = None


async def test_pause_is_reference_counted_and_release_is_idempotent() -> None:
    first, second = GcPause(), GcPause()
    assert not gc.isenabled()
    first.release()
    first.release()  # a second release must not let go of the other holder's pause
    assert not gc.isenabled()
    second.release()
    assert gc.isenabled() and first.released and second.released


async def test_pause_ends_by_itself_after_max_seconds() -> None:
    pause = GcPause(max_seconds=0.05)
    assert not gc.isenabled()
    await asyncio.sleep(0.1)
    assert gc.isenabled() and pause.released


async def test_a_collector_turned_off_by_the_application_stays_off() -> None:
    gc.disable()
    GcPause().release()
    assert not gc.isenabled() and gc.get_freeze_count() == 0


async def test_the_end_of_a_pause_freezes_what_was_loaded_and_the_next_pause_thaws_it() -> None:
    pause = GcPause()
    loaded = [{"metadata": {"name": f"cm-{i}"}} for i in range(100)]
    assert gc.get_freeze_count() == 0  # nothing frozen while the pause holds
    pause.release()
    frozen = gc.get_freeze_count()
    assert frozen >= len(loaded) and gc.isenabled()
    relist = GcPause()  # a relist replaces the cache: what was frozen is collectable again
    assert gc.get_freeze_count() == 0
    relist.release()
    assert gc.get_freeze_count() >= len(loaded)


class Cycle:
    def __init__(self) -> None:
        self.me = self


async def test_a_relist_collects_the_cycles_that_died_while_frozen(monkeypatch: pytest.MonkeyPatch) -> None:
    cycle = Cycle()
    alive = weakref.ref(cycle)
    GcPause().release()
    del cycle
    gc.collect()
    assert alive() is not None  # frozen: a collection does not see it
    monkeypatch.setattr(gcpause, "THAW_COLLECT_AFTER", 0.0)
    relist = GcPause()
    assert alive() is None
    relist.release()


async def test_a_freeze_made_by_the_application_is_left_alone() -> None:
    gc.freeze()
    frozen = gc.get_freeze_count()
    pause = GcPause()
    assert gc.get_freeze_count() == frozen
    [{"i": i} for i in range(100)]
    pause.release()
    assert gc.get_freeze_count() == frozen  # neither thawed nor frozen further


async def test_informer_pauses_the_collector_while_it_loads_a_list() -> None:
    server = filled(50)
    during: list[bool] = []
    informer = Informer(FakeListWatch(server), config=CONFIG)
    informer.add_event_handler(FuncHandler(on_add=lambda obj, initial: during.append(gc.isenabled())))
    async with running(informer):
        assert await informer.wait_for_sync(2)
        assert during == [False] * 50  # initial adds are delivered while the pause holds
        await eventually(gc.isenabled)
        during.clear()
        server.create("after")  # a watch event: no pause
        await eventually(lambda: len(during) == 1)
        assert during == [True]
        server.go_down()  # the relist pauses again, and resumes once its objects are applied
        server.create("while-down")
        server.compact()  # the watch cannot resume: relist
        server.down = False
        await eventually(lambda: informer.watcher.stats.lists_completed >= 2)
        await eventually(gc.isenabled)


async def test_a_failed_list_resumes_the_collector() -> None:
    server = filled(5)
    server.go_down()  # every list fails
    informer = Informer(FakeListWatch(server), config=CONFIG)
    async with running(informer):
        await asyncio.sleep(0.1)
        assert not informer.has_synced()
        assert gc.isenabled()
    assert gc.isenabled()


async def test_no_pause_when_configured_off() -> None:
    server = filled(5)
    during: list[bool] = []
    informer = Informer(FakeListWatch(server), config=WatcherConfig(stall_timeout=0, gc_pause=0))
    informer.add_event_handler(FuncHandler(on_add=lambda obj, initial: during.append(gc.isenabled())))
    async with running(informer):
        assert await informer.wait_for_sync(2)
    assert during == [True] * 5


def decoded(i: int) -> dict[str, Any]:
    """A ConfigMap as the JSON decoder returns it: every string a new object."""
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"cm{i}",
            "namespace": "prod",
            "creationTimestamp": "2026-11-24T08:00:00Z",
            "labels": {"app": "web", "id": str(i)},
            "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Widget", "name": f"w{i}"}],
            "managedFields": [{"manager": "kubectl"}],
        },
        "data": {"k": "v"},
    }
    result: dict[str, Any] = orjson.loads(orjson.dumps(obj))
    return result


def test_compact_drops_managed_fields_and_shares_repeated_strings() -> None:
    one, two = compact(decoded(1)), compact(decoded(2))
    assert one == {
        **decoded(1),
        "metadata": {k: v for k, v in decoded(1)["metadata"].items() if k != "managedFields"},
    }
    m1, m2 = one["metadata"], two["metadata"]
    assert one["apiVersion"] is two["apiVersion"] and one["kind"] is two["kind"]
    assert m1["namespace"] is m2["namespace"] and m1["creationTimestamp"] is m2["creationTimestamp"]
    assert m1["labels"]["app"] is m2["labels"]["app"]
    o1, o2 = m1["ownerReferences"][0], m2["ownerReferences"][0]
    assert o1["apiVersion"] is o2["apiVersion"] and o1["kind"] is o2["kind"]
    assert m1["name"] == "cm1" and m2["labels"]["id"] == "2"


def test_compact_takes_odd_objects_as_they_are() -> None:
    assert compact({"kind": "Status"}) == {"kind": "Status"}
    odd: dict[str, Any] = {
        "apiVersion": 1,
        "metadata": {"labels": None, "ownerReferences": ["x", {"kind": 2}]},
    }
    assert compact(odd) == {
        "apiVersion": 1,
        "metadata": {"labels": None, "ownerReferences": ["x", {"kind": 2}]},
    }


def test_the_table_of_shared_strings_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transform_module, "SHARED_STRINGS_MAX", 8)
    for i in range(100):
        obj = decoded(i)
        obj["metadata"]["creationTimestamp"] = f"2026-11-24T08:00:{i:02d}Z"
        compact(obj)
        assert len(transform_module._shared) <= 8
