"""The reconciler client's parts, each alone: write policy, write ledger, cache reader, finalizer
patches; the facade's deprecated setters; and one watch for two namings of one kind in a Manager."""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kubeop.controller import Controller, ReconcilerClient, Request, WritePolicy
from kubeop.controller._cache_reader import CacheReader, InformerRegistry
from kubeop.controller._finalizers import finalizers_patch, finalizers_verb
from kubeop.controller._write_ledger import WriteLedger, object_key
from kubeop.core.resource import ApiResource
from kubeop.kinds import ConfigMap
from kubeop.manager import Manager, Serving
from kubeop.testing import FakeCluster
from kubeop.testing.fake import FakeTransport

from .fakes import APPS, CONFIGMAPS, ClusterApi, FakeFactory, FakeInformer

NODES = ApiResource("", "v1", "nodes", kind="Node", namespaced=False)


def _cm(name: str, rv: str, ns: str = "default") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "resourceVersion": rv},
    }


# -- WritePolicy ---------------------------------------------------------------------------------
def test_an_empty_policy_lets_every_write_through_unchanged() -> None:
    policy = WritePolicy()
    policy.fence()
    body = _cm("c", "1")
    assert policy.labelled(CONFIGMAPS, body) is body


def test_the_guard_refuses_by_raising() -> None:
    def refuse() -> None:
        raise PermissionError("not the leader")

    with pytest.raises(PermissionError, match="not the leader"):
        WritePolicy(guard=refuse).fence()


def test_labels_are_added_to_a_copy_and_only_when_they_change_something() -> None:
    policy = WritePolicy(labels=lambda res, body: {"shard": "1"} if res is CONFIGMAPS else None)
    body = _cm("c", "1")
    labelled = policy.labelled(CONFIGMAPS, body)
    assert labelled["metadata"]["labels"] == {"shard": "1"} and "labels" not in body["metadata"]
    assert policy.labelled(CONFIGMAPS, labelled) is labelled  # already there: no copy
    assert policy.labelled(APPS, body) is body  # no labels for this kind


def test_a_policy_is_immutable() -> None:
    policy = WritePolicy()
    with pytest.raises(AttributeError):
        policy.guard = lambda: None  # type: ignore[misc]


# -- WriteLedger ---------------------------------------------------------------------------------
def test_object_keys_are_the_store_keys() -> None:
    assert object_key(CONFIGMAPS, "c", "ns") == "ns/c"
    assert object_key(NODES, "n", "ns") == "n"


def test_a_remembered_write_is_read_until_the_cache_applied_it() -> None:
    informer = FakeInformer()
    ledger = WriteLedger(lambda res: informer)
    ledger.remember(CONFIGMAPS, _cm("c", "5"))
    assert len(ledger) == 1
    older = _cm("c", "4")
    assert ledger.read(CONFIGMAPS, "default/c", older, informer)["metadata"]["resourceVersion"] == "5"
    assert ledger.read(CONFIGMAPS, "default/c", None, informer) is not None  # not in the cache yet
    informer.applied_rv = 5  # the watch delivered it
    assert ledger.read(CONFIGMAPS, "default/c", older, informer) is older
    assert len(ledger) == 0, "forgotten once the cache caught up"


def test_a_newer_cached_object_wins_over_a_remembered_write() -> None:
    informer = FakeInformer()
    ledger = WriteLedger(lambda res: informer)
    ledger.remember(CONFIGMAPS, _cm("c", "5"))
    newer = _cm("c", "7")
    assert ledger.read(CONFIGMAPS, "default/c", newer, informer) is newer
    assert ledger.known(CONFIGMAPS, "default/c") is None


def test_the_ledger_sweeps_what_the_cache_applied_and_kinds_without_an_informer() -> None:
    informer = FakeInformer()
    ledger = WriteLedger(lambda res: informer if res is CONFIGMAPS else None)
    for i in range(600):
        ledger.remember(CONFIGMAPS, _cm(f"c{i}", str(i + 1)))
        ledger.remember(APPS, {"metadata": {"name": f"a{i}", "namespace": "default", "resourceVersion": "1"}})
    informer.applied_rv = 300
    ledger.remember(CONFIGMAPS, _cm("last", "601"))  # the 1,201st entry: past the first sweep mark
    assert len(ledger) < 1201
    assert ledger.known(CONFIGMAPS, "default/c599") is not None  # not applied: kept
    assert ledger.known(APPS, "default/a0") is None


# -- InformerRegistry and CacheReader ------------------------------------------------------------
def test_the_first_informer_serves_a_kind_and_a_later_one_its_namespace() -> None:
    registry = InformerRegistry()
    first, other, cluster = FakeInformer(), FakeInformer(), FakeInformer()
    registry.use(CONFIGMAPS, first, "a")
    registry.use(CONFIGMAPS, other, "b")
    registry.use(NODES, cluster)
    registry.use(NODES, FakeInformer(), "b")  # cluster-scoped: no namespaces
    assert registry.get(CONFIGMAPS) is first and registry.in_namespace(CONFIGMAPS, "b") is other
    assert registry.in_namespace(CONFIGMAPS, "a") is None and registry.scoped
    assert registry.in_namespace(NODES, "b") is None
    assert registry.add(CONFIGMAPS, FakeInformer()) is first


async def test_the_reader_resolves_every_naming_to_one_canonical_resource() -> None:
    api = ClusterApi()
    reader = CacheReader(api.client, FakeFactory())  # type: ignore[arg-type]
    discovered = await reader.resolve("configmaps")
    assert await reader.resolve(CONFIGMAPS) is discovered  # the first one seen is canonical
    assert await reader.resolve(ConfigMap) is discovered
    assert await reader.resolve({"apiVersion": "v1", "kind": "ConfigMap"}) is discovered
    assert await reader.resolve(ConfigMap(metadata={"name": "x"})) is discovered
    with pytest.raises(ValueError, match="apiVersion/kind"):
        await reader.resolve({"metadata": {}})


async def test_a_read_of_an_unwatched_kind_starts_a_cluster_wide_informer_once() -> None:
    factory = FakeFactory()
    reader = CacheReader(ClusterApi().client, factory)  # type: ignore[arg-type]
    informer = await reader.informer(CONFIGMAPS)
    assert await reader.informer(CONFIGMAPS, "ns") is informer
    assert reader.informers.get(CONFIGMAPS) is informer and list(factory.informers) == [CONFIGMAPS]


# -- finalizer patches ---------------------------------------------------------------------------
def test_finalizer_patches_test_the_list_they_replace() -> None:
    assert finalizers_patch(None, ["f"]) == [{"op": "add", "path": "/metadata/finalizers", "value": ["f"]}]
    assert finalizers_patch(["a"], ["a", "f"]) == [
        {"op": "test", "path": "/metadata/finalizers", "value": ["a"]},
        {"op": "replace", "path": "/metadata/finalizers", "value": ["a", "f"]},
    ]
    assert finalizers_verb(["a"], ["a", "f"]) == "added finalizer f to"
    assert finalizers_verb(["a", "f"], ["a"]) == "removed finalizer f from"
    assert finalizers_verb(["a", "f"], ["f", "a"]) == "patched the finalizers of"


# -- the facade ----------------------------------------------------------------------------------
async def test_the_policy_given_at_construction_fences_and_labels_every_write() -> None:
    api = ClusterApi()
    allowed = [True]

    def guard() -> None:
        if not allowed[0]:
            raise PermissionError("fenced")

    policy = WritePolicy(guard=guard, labels=lambda res, body: {"shard": "0"})
    client = ReconcilerClient(api.client, FakeFactory(), policy=policy)  # type: ignore[arg-type]
    client._resources[("v1", "ConfigMap")] = CONFIGMAPS
    created = await client.create(_cm("c", ""))
    assert created["metadata"]["labels"] == {"shard": "0"} and client.policy is policy
    allowed[0] = False
    with pytest.raises(PermissionError):
        await client.create_or_update(_cm("d", ""))
    assert len(api.writes) == 1


def test_setting_the_guard_or_labels_is_deprecated_and_still_works() -> None:
    client = ReconcilerClient(None, None)  # type: ignore[arg-type]

    def guard() -> None:
        pass

    with pytest.warns(DeprecationWarning, match=r"policy=WritePolicy\(guard=\.\.\.\)"):
        client.write_guard = guard
    with pytest.warns(DeprecationWarning, match=r"policy=WritePolicy\(labels=\.\.\.\)"):
        client.write_labels = None
    assert client.write_guard is guard and client.policy.guard is guard and client.write_labels is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert client.write_guard is guard  # reading is not deprecated


# -- one watch for two namings of one kind, in a Manager on the fake cluster -----------------------
async def _eventually(probe: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not await probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout} s")
        await asyncio.sleep(0.001)


async def test_controllers_and_reads_naming_one_kind_differently_share_one_watch() -> None:
    cluster = FakeCluster()
    api = cluster.client()
    transport = api.transport
    assert isinstance(transport, FakeTransport)
    seen: dict[str, set[str]] = {"by-name": set(), "by-model": set()}
    found: list[Any] = []

    async def by_name(req: Request, ctx: Any) -> None:
        seen["by-name"].add(req.name)
        found.append(await ctx.client.get("cm", req.name, namespace=req.namespace))

    async def by_model(req: Request, ctx: Any) -> None:
        seen["by-model"].add(req.name)
        found.append(await ctx.client.get(CONFIGMAPS, req.name, namespace=req.namespace))

    manager = Manager(
        api, clock=cluster.clock, name="t", serving=Serving(metrics_address=None, health_address=None)
    )
    manager.add(Controller.for_("configmaps").named("by-name").reconcile(by_name))
    manager.add(Controller.for_(ConfigMap).named("by-model").reconcile(by_model))
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    writer = cluster.client()
    try:
        await writer.create(_cm("one", "") | {"metadata": {"name": "one", "namespace": "default"}})

        async def both() -> bool:
            return all("one" in names for names in seen.values())

        await _eventually(both)
    finally:
        stop.set()
        await task
        await writer.close()
        await api.close()
    assert all(obj is not None for obj in found)
    watches = [r for r in transport.sent if r.path.endswith("/configmaps") and ("watch", "true") in r.query]
    assert len(watches) == 1, [str(r) for r in watches]
