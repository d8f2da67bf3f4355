"""DeltaFIFO keeps client-go's contract (cases after k8s.io/client-go/tools/cache/delta_fifo_test.go)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeop.cache import (
    DeletedFinalStateUnknown,
    Delta,
    DeltaFIFO,
    DeltaType,
    FIFOClosed,
    Indexer,
    object_key,
)

ADDED, UPDATED, DELETED, REPLACED, SYNC = (
    DeltaType.ADDED,
    DeltaType.UPDATED,
    DeltaType.DELETED,
    DeltaType.REPLACED,
    DeltaType.SYNC,
)


def obj(name: str, value: int = 0) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(value)}, "v": value}


def types(deltas: list[Delta]) -> list[DeltaType]:
    return [d.type for d in deltas]


def pop(fifo: DeltaFIFO) -> tuple[list[Delta], bool]:
    item = fifo.pop_nowait()
    assert item is not None
    assert item.key == object_key(item.deltas[-1].object)
    return item.deltas, item.is_in_initial_list


def test_deltas_accumulate_per_key_and_pop_in_first_dirty_order() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a", 1))
    fifo.add(obj("b", 1))
    fifo.update(obj("a", 2))
    fifo.delete(obj("a", 3))
    assert fifo.list_keys() == ["ns/a", "ns/b"] and len(fifo) == 2
    deltas, _ = pop(fifo)
    assert types(deltas) == [ADDED, UPDATED, DELETED]
    assert [d.object["v"] for d in deltas] == [1, 2, 3]
    assert fifo.list() == [obj("b", 1)]
    deltas, _ = pop(fifo)
    assert types(deltas) == [ADDED]
    assert fifo.pop_nowait() is None


def test_delete_of_an_unknown_key_is_ignored() -> None:
    fifo = DeltaFIFO()
    fifo.delete(obj("never"))
    assert len(fifo) == 0
    known = Indexer()
    known.add(obj("k"))
    fifo = DeltaFIFO(known_objects=known)
    fifo.delete(obj("never"))
    fifo.delete(obj("k"))
    assert fifo.list_keys() == ["ns/k"]


def test_consecutive_deletions_collapse_keeping_the_real_object() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a"))
    fifo.delete(DeletedFinalStateUnknown("ns/a", obj("a")))
    fifo.delete(obj("a", 9))
    deltas = fifo.get("ns/a")
    assert deltas is not None and types(deltas) == [ADDED, DELETED]
    assert deltas[-1].object == obj("a", 9)
    fifo.delete(DeletedFinalStateUnknown("ns/a", None))  # a tombstone never replaces a real object
    assert fifo.get("ns/a")[-1].object == obj("a", 9)  # type: ignore[index]


def test_replace_reports_vanished_objects_as_tombstones() -> None:
    known = Indexer()
    known.add(obj("stored-and-listed"))
    known.add(obj("stored-only", 4))
    fifo = DeltaFIFO(known_objects=known)
    fifo.update(obj("queued-only", 7))
    fifo.replace([obj("stored-and-listed", 2), obj("new", 1)], "10")
    assert types(fifo.get("ns/stored-and-listed") or []) == [REPLACED]
    assert types(fifo.get("ns/new") or []) == [REPLACED]
    queued = fifo.get("ns/queued-only") or []
    assert types(queued) == [UPDATED, DELETED]
    assert queued[-1].object == DeletedFinalStateUnknown("ns/queued-only", obj("queued-only", 7))
    stored = fifo.get("ns/stored-only") or []
    assert types(stored) == [DELETED] and stored[0].object == DeletedFinalStateUnknown(
        "ns/stored-only", obj("stored-only", 4)
    )


def test_replace_unwraps_a_queued_tombstone() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a", 1))
    fifo.replace([], "1")
    fifo.replace([], "2")
    deltas = fifo.get("ns/a") or []
    assert types(deltas) == [ADDED, DELETED]  # the second tombstone collapsed into the first
    assert deltas[-1].object == DeletedFinalStateUnknown("ns/a", obj("a", 1))


def test_replace_can_emit_sync_for_old_consumers() -> None:
    fifo = DeltaFIFO(emit_delta_type_replaced=False)
    fifo.replace([obj("a")], "1")
    assert types(fifo.get("ns/a") or []) == [SYNC]


def test_has_synced_after_the_first_replace_is_popped() -> None:
    fifo = DeltaFIFO()
    assert not fifo.has_synced()
    fifo.replace([obj("a"), obj("b")], "1")
    assert not fifo.has_synced()
    _, initial = pop(fifo)
    assert initial and not fifo.has_synced()
    fifo.add(obj("c"))  # later changes do not count towards the initial population
    _, initial = pop(fifo)
    assert initial and fifo.has_synced()
    _, initial = pop(fifo)
    assert not initial


def test_has_synced_counts_initial_deletions() -> None:
    known = Indexer()
    known.add(obj("gone"))
    fifo = DeltaFIFO(known_objects=known)
    fifo.replace([obj("a")], "1")
    pop(fifo)
    assert not fifo.has_synced()
    pop(fifo)
    assert fifo.has_synced()


def test_has_synced_immediately_for_an_empty_list_or_an_early_add() -> None:
    fifo = DeltaFIFO()
    fifo.replace([], "1")
    assert fifo.has_synced()
    fifo = DeltaFIFO()
    fifo.add(obj("a"))
    assert fifo.has_synced()


def test_resync_queues_known_objects_that_have_nothing_queued() -> None:
    known = Indexer()
    a, b = obj("a", 1), obj("b", 1)
    known.add(a)
    known.add(b)
    fifo = DeltaFIFO(known_objects=known)
    fifo.update(obj("a", 2))
    fifo.resync()
    assert types(fifo.get("ns/a") or []) == [UPDATED]  # not an older Sync after a newer Update
    sync = fifo.get("ns/b") or []
    assert types(sync) == [SYNC] and sync[0].object is b
    DeltaFIFO().resync()  # without known objects: nothing to do


def test_add_if_not_present_requeues_popped_deltas() -> None:
    fifo = DeltaFIFO()
    fifo.add(obj("a"))
    deltas, _ = pop(fifo)
    fifo.add_if_not_present(deltas)
    fifo.add_if_not_present([Delta(ADDED, obj("a", 5))])  # already queued: ignored
    assert fifo.get("ns/a") == deltas
    assert fifo.key_of(deltas) == "ns/a"
    with pytest.raises(ValueError):
        fifo.key_of([])


async def test_pop_waits_and_close_ends_it() -> None:
    fifo = DeltaFIFO()
    waiter = asyncio.create_task(fifo.pop())
    await asyncio.sleep(0)
    fifo.add(obj("a"))
    popped = await asyncio.wait_for(waiter, 1)
    assert popped.key == "ns/a" and types(popped.deltas) == [ADDED] and not popped.is_in_initial_list
    fifo.add(obj("b"))
    fifo.close()
    assert fifo.closed
    assert types((await fifo.pop()).deltas) == [ADDED]  # queued items are still handed out
    with pytest.raises(FIFOClosed):
        await fifo.pop()
    blocked = DeltaFIFO()
    waiter = asyncio.create_task(blocked.pop())
    await asyncio.sleep(0)
    blocked.close()
    with pytest.raises(FIFOClosed):
        await asyncio.wait_for(waiter, 1)


def test_a_replace_in_parts_is_popped_while_it_arrives_and_syncs_at_its_end() -> None:
    store = Indexer()
    fifo = DeltaFIFO(known_objects=store)
    fifo.begin_replace()
    fifo.replace_add(obj("a"))
    deltas, initial = pop(fifo)
    assert types(deltas) == [REPLACED] and initial
    store.add(deltas[-1].object)
    assert not fifo.has_synced()  # more may come
    fifo.replace_add(obj("b"))
    fifo.end_replace("1")
    assert not fifo.has_synced()
    deltas, initial = pop(fifo)
    assert types(deltas) == [REPLACED] and initial and fifo.has_synced()


def test_a_relist_in_parts_tombstones_what_it_did_not_list() -> None:
    store = Indexer()
    for name in "abc":
        store.add(obj(name))
    fifo = DeltaFIFO(known_objects=store)
    fifo.begin_replace()
    fifo.replace_add(obj("a", 2))
    store.add(pop(fifo)[0][-1].object)  # applied while the list is still arriving
    fifo.end_replace("2")
    gone = [fifo.pop_nowait() for _ in range(2)]
    assert [(p.key, types(p.deltas)) for p in gone if p] == [("ns/b", [DELETED]), ("ns/c", [DELETED])]
    assert fifo.pop_nowait() is None


def test_an_unfinished_replace_is_dropped_by_the_next_one() -> None:
    fifo = DeltaFIFO(known_objects=Indexer())
    fifo.begin_replace()
    fifo.replace_add(obj("a"))  # the list broke here; it starts over without "a"
    fifo.begin_replace()
    fifo.replace_add(obj("b"))
    fifo.end_replace("3")
    deltas, _ = pop(fifo)
    assert types(deltas) == [REPLACED, DELETED]  # what "a" was listed as, then its tombstone
    assert isinstance(deltas[-1].object, DeletedFinalStateUnknown)
    assert types(pop(fifo)[0]) == [REPLACED]
    assert fifo.has_synced()


def test_replace_parts_without_a_beginning_are_refused() -> None:
    fifo = DeltaFIFO()
    with pytest.raises(RuntimeError, match="without begin_replace"):
        fifo.replace_add(obj("a"))
    with pytest.raises(RuntimeError, match="without begin_replace"):
        fifo.end_replace()


async def test_a_cancelled_pop_loses_nothing() -> None:
    fifo = DeltaFIFO()
    waiter = asyncio.create_task(fifo.pop())
    await asyncio.sleep(0)
    waiter.cancel()
    await asyncio.sleep(0)
    fifo.add(obj("a"))
    assert types((await asyncio.wait_for(fifo.pop(), 1)).deltas) == [ADDED]
    await fifo.wait_synced()


# -- property: popping and applying every delta reproduces the producer's truth ------------------

operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from("abcd")),
        st.tuples(st.just("update"), st.sampled_from("abcd")),
        st.tuples(st.just("delete"), st.sampled_from("abcd")),
        st.tuples(st.just("replace"), st.sets(st.sampled_from("abcd"))),
        st.tuples(st.just("replace_parts"), st.sets(st.sampled_from("abcd"))),
        st.tuples(st.just("resync"), st.none()),
        st.tuples(st.just("pop"), st.integers(1, 3)),
    ),
    max_size=50,
)


@settings(max_examples=200, deadline=None)
@given(operations)
def test_consumer_store_converges_to_the_truth(ops: list[tuple[str, Any]]) -> None:
    """The informer's processing (client-go processDeltas) over any interleaving of producer
    calls and pops ends with exactly the producer's latest state, and every delete it sees is
    of something it held."""
    store = Indexer()
    fifo = DeltaFIFO(known_objects=store)
    truth: dict[str, dict[str, Any]] = {}
    version = 0

    def consume(n: int) -> None:
        for _ in range(n):
            item = fifo.pop_nowait()
            if item is None:
                return
            for delta in item.deltas:
                if delta.type is DELETED:
                    key = object_key(delta.object)
                    assert key in store, "a deletion of something the consumer never had"
                    store.delete(delta.object)
                else:
                    store.add(delta.object)

    for op, arg in ops:
        version += 1
        if op in ("add", "update"):
            name = f"ns/{arg}"
            if op == "add" and name in truth:
                continue  # the server never adds what exists
            if op == "update" and name not in truth:
                continue
            o = obj(arg, version)
            truth[name] = o
            fifo.add(o) if op == "add" else fifo.update(o)
        elif op == "delete":
            name = f"ns/{arg}"
            if name in truth:
                fifo.delete(obj(arg, version))
                del truth[name]
        elif op == "replace":
            listed = [obj(n, version) for n in sorted(arg)]
            truth = {object_key(o): o for o in listed}
            fifo.replace(listed, str(version))
        elif op == "replace_parts":  # the consumer pops while the list arrives
            listed = [obj(n, version) for n in sorted(arg)]
            truth = {object_key(o): o for o in listed}
            fifo.begin_replace()
            for o in listed:
                fifo.replace_add(o)
                consume(1)
            fifo.end_replace(str(version))
        elif op == "resync":
            fifo.resync()
        else:
            consume(arg)
    consume(10_000)
    assert {k: store.get(k) for k in store.list_keys()} == truth
