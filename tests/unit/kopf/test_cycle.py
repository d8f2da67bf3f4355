"""The handling cycle against an in-memory object store: writes per change, and the event of the
cycle's own status write, which is a no-op (skipped unless something of it may depend on status)."""

from __future__ import annotations

import copy
from types import SimpleNamespace
from typing import Any, cast

import pytest

import kubeop.kopf as kopf
from kubeop.controller import Request
from kubeop.core.resource import ApiResource
from kubeop.kopf.processing import Processor
from kubeop.kopf.settings import PersistenceSettings
from kubeop.kopf.state import State, storages_of

RESOURCE = "widgets.v1.bench.kubeop.dev"
WIDGETS = ApiResource("bench.kubeop.dev", "v1", "widgets", kind="Widget", subresources=("status",))


class Store:
    """The cache and the API server in one: a patch changes the object and its resourceVersion."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.rv = 1
        self.obj: dict[str, Any] = {
            "apiVersion": "bench.kubeop.dev/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "namespace": "ns", "uid": "u", "generation": 1, "resourceVersion": "1"},
            "spec": spec,
        }
        self.writes: list[tuple[str | None, dict[str, Any]]] = []

    async def resource(self, what: Any) -> ApiResource:
        return WIDGETS

    async def get(self, res: Any, name: str, namespace: str | None = None) -> Any:
        return copy.deepcopy(self.obj)

    async def patch(self, res: Any, name: str, body: Any, namespace: str | None = None, **kw: Any) -> Any:
        sub = kw.get("subresource")
        self.writes.append((sub, body))
        for key, value in body.items():
            if key == "metadata":
                md = self.obj["metadata"]
                md["annotations"] = {**(md.get("annotations") or {}), **value.get("annotations", {})}
            else:
                self.obj[key] = {**(self.obj.get(key) or {}), **value}
        self.change_rv()
        return copy.deepcopy(self.obj)

    def change_rv(self) -> None:
        self.rv += 1
        self.obj["metadata"]["resourceVersion"] = str(self.rv)

    def change_spec(self, **spec: Any) -> None:
        self.obj["spec"] = spec
        self.obj["metadata"]["generation"] += 1
        self.change_rv()


async def cycle(processor: Processor, store: Store) -> None:
    ctx: Any = SimpleNamespace(client=store, recorder=None)
    await processor.reconcile(Request("ns", "w"), ctx)


def processor(when: bool = False) -> tuple[Processor, list[str]]:
    calls: list[str] = []
    reg = kopf.Registry()
    options: dict[str, Any] = {"registry": reg}
    if when:
        options["when"] = lambda status, **_: calls.append(f"when {status.get('done')}") or True

    @kopf.on.create(RESOURCE, **options)
    async def create(patch: Any, spec: Any, **_: Any) -> None:
        calls.append(f"create {spec['value']}")
        patch.status["done"] = spec["value"]

    @kopf.on.update(RESOURCE, field="spec", **options)
    async def update(patch: Any, spec: Any, **_: Any) -> None:
        calls.append(f"update {spec['value']}")
        patch.status["done"] = spec["value"]

    return Processor(RESOURCE, list(reg.changing(RESOURCE))), calls


async def test_one_status_write_per_change_and_none_for_its_own_event(monkeypatch: Any) -> None:
    p, calls = processor()
    store = Store({"value": "one"})
    await cycle(p, store)  # create
    with monkeypatch.context() as m:  # the event of its own status write: skipped, not even read
        m.setattr(State, "of", lambda *_, **__: pytest.fail("the state of its own write was read"))
        await cycle(p, store)
    assert calls == ["create one"]
    assert [sub for sub, _ in store.writes] == ["status"]
    state = State.of(store.obj, storages_of(PersistenceSettings()), p._handler_ids, now=0.0)
    assert state is not None and state.essence == {"spec": {"value": "one"}} and not state.progress

    store.change_spec(value="two")
    await cycle(p, store)
    await cycle(p, store)
    assert calls == ["create one", "update two"]
    assert [sub for sub, _ in store.writes] == ["status", "status"]
    assert store.obj["status"]["done"] == "two"


async def test_a_change_after_its_own_write_is_handled() -> None:
    """The skip is for the object exactly as the cycle wrote it: any later version is handled."""
    p, calls = processor()
    store = Store({"value": "one"})
    await cycle(p, store)
    store.change_spec(value="two")  # before the operator sees the event of its own write
    await cycle(p, store)
    assert calls == ["create one", "update two"]
    store.change_rv()  # the same essence, another version: a full no-op cycle, no write
    await cycle(p, store)
    assert calls == ["create one", "update two"] and len(store.writes) == 2


async def test_filters_that_see_status_are_evaluated_on_its_own_write_too() -> None:
    p, calls = processor(when=True)
    store = Store({"value": "one"})
    await cycle(p, store)
    await cycle(p, store)
    assert calls == ["when None", "when None", "create one", "when one"]
    assert len(store.writes) == 1


async def test_what_a_processor_remembers_of_an_object_goes_with_it() -> None:
    proc, calls = processor()
    store = Store({"value": 1})
    await cycle(proc, store)
    assert calls == ["create 1"] and proc._handled_once == {("", "ns", "w"): "u"}
    store.obj = cast(Any, None)  # deleted: the cycle is told of an object that is gone
    await cycle(proc, store)
    assert proc._handled_once == {} and proc._memos == {}
    store.obj = Store({"value": 2}).obj
    store.obj["metadata"]["uid"] = "u2"  # made anew under the same name: its first cycle again
    await cycle(proc, store)
    assert calls == ["create 1", "create 2"] and proc._handled_once == {("", "ns", "w"): "u2"}
