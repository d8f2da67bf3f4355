"""kopf's event dispatchers, indexes and admission serving are the Manager's Runnables, and the index
and admission handlers live in the Registry."""

from __future__ import annotations

import asyncio
from typing import Any

import kubeop.kopf as kopf
from kubeop.kopf.indexing import Indexers, indexing_handlers
from kubeop.kopf.running import build_manager, dispatchers
from kubeop.manager import Phase, Runnable
from kubeop.testing import FakeCluster


def test_build_manager_adds_the_dispatchers_indexes_and_admission_as_runnables_in_their_phases() -> None:
    reg = kopf.Registry()
    kopf.on.event("pods", registry=reg, id="seen")(lambda **_: None)
    kopf.index("pods", registry=reg, id="names")(lambda name, **_: name)
    kopf.on.validate("pods", registry=reg, id="check")(lambda **_: None)
    settings = kopf.OperatorSettings()
    settings.admission.server = kopf.WebhookServer(port=1234)
    manager = build_manager(registry=reg, client=FakeCluster().client(), settings=settings)
    phases = {getattr(r, "name", None): (r.phase, r.needs_leader) for r in manager.runnables}
    assert phases == {
        "kopf events pods": (Phase.CACHES, False),
        "kopf indices": (Phase.CACHES, False),
        "kopf admission": (Phase.SERVERS, False),
    }
    assert all(isinstance(r, Runnable) for r in manager.runnables)
    assert [d.resource for d in dispatchers(manager)] == ["pods"]


def test_the_registry_holds_the_index_and_admission_handlers() -> None:
    reg, other = kopf.Registry(), kopf.Registry()
    kopf.index("pods", registry=reg, id="names")(lambda **_: None)
    kopf.on.mutate("pods", registry=reg, id="fix")(lambda **_: None)
    assert [h.id for h in reg.indexing()] == ["names"] == [h.id for h in indexing_handlers(reg)]
    assert [h.id for h in reg.admission()] == ["fix"]
    assert other.indexing() == [] and other.admission() == []


async def test_indexers_drain_without_polling() -> None:
    reg = kopf.Registry()
    kopf.index("pods", registry=reg, id="names")(lambda name, **_: name)
    indexers = Indexers(indexing_handlers(reg), {})
    handler = indexers.informer_handler()
    for name in ("a", "b"):
        obj: dict[str, Any] = {"metadata": {"namespace": "ns", "name": name, "uid": name}}
        handler.on_add(obj, True)
    running = asyncio.create_task(indexers.run())
    try:
        await asyncio.wait_for(indexers.drained(), 5)
        assert sorted(indexers.indices["names"][None]) == ["a", "b"] and not indexers.pending()
    finally:
        running.cancel()
