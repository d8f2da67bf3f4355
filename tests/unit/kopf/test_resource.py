"""``kopf.Resource``: what handlers get as ``resource`` and what callable selectors are given, and
the selectors of ``@kopf.index`` and ``@kopf.on.validate``/``mutate`` selecting many resources
(categories, ``kopf.EVERYTHING``), resolved at start against kubeop.testing.FakeCluster."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import kubeop.kopf as kopf
from kubeop.core.resource import ApiResource
from kubeop.kopf.admission import admission_handlers
from kubeop.kopf.running import _index_set, _resolve, build_manager, run_manager
from kubeop.kopf.selectors import Selector
from kubeop.kopf.serving import build_webhooks
from kubeop.testing import FakeCluster
from tests.support.crds import widget_crd


def crd(group: str, plural: str, kind: str, category: str) -> dict[str, Any]:
    manifest = copy.deepcopy(widget_crd(group, plural=plural, kind=kind, free_spec=True))
    manifest["spec"]["names"].update(shortNames=[plural[:3]], categories=[category])
    return manifest


def test_resource_is_kopfs_record() -> None:
    a = kopf.Resource("kopf.dev", "v1", "kopfexamples", kind="KopfExample", namespaced=True)
    assert a == kopf.Resource("kopf.dev", "v1", "kopfexamples") and hash(a) == hash(tuple(a))
    assert repr(a) == "kopfexamples.v1.kopf.dev" and list(a) == ["kopf.dev", "v1", "kopfexamples"]
    assert a.get_url(namespace="ns", name="x", subresource="status") == (
        "/apis/kopf.dev/v1/namespaces/ns/kopfexamples/x/status"
    )
    core = kopf.Resource("", "v1", "pods", namespaced=True)
    assert repr(core) == "pods.v1" and core.get_url(server="https://k/") == "https://k/api/v1/pods"
    assert a.api_resource() == ApiResource("kopf.dev", "v1", "kopfexamples", kind="KopfExample")


def test_selectors_check_kopf_resources_as_kopf_does() -> None:
    old = kopf.Resource("kopf.dev", "v1beta1", "kopfexamples", kind="KopfExample", preferred=False)
    new = kopf.Resource("kopf.dev", "v1", "kopfexamples", kind="KopfExample", categories={"kopf"})
    assert Selector("KopfExample").select([old, new]) == {new}
    assert Selector("kopf.dev", "v1beta1", "kopfexamples").select([old, new]) == {old}
    assert Selector(category="kopf").select([old, new]) == {new}
    given: list[Any] = []
    assert Selector(lambda r: given.append(r) or True).select([old, new]) == {old, new}
    assert all(isinstance(r, kopf.Resource) for r in given)


async def test_handlers_get_a_kopf_resource_and_callable_selectors_one_too() -> None:
    cluster = FakeCluster()
    reg = kopf.Registry()
    got: list[Any] = []
    offered: list[Any] = []
    done = asyncio.Event()

    def secrets_only(resource: kopf.Resource) -> bool:
        offered.append(resource)
        return resource.plural == "secrets"

    @kopf.on.create(secrets_only, registry=reg)
    async def created(resource: Any, **_: Any) -> None:
        got.append(resource)
        done.set()

    async with cluster.client() as api:
        resolved = await _resolve(reg, api)
        manager = build_manager(registry=reg, client=api, _resolved=resolved)
        stop = asyncio.Event()
        task = asyncio.create_task(run_manager(manager, stop))
        try:
            await api.create(
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1", "namespace": "default"}}
            )
            await asyncio.wait_for(done.wait(), 10)
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
    assert offered and all(isinstance(r, kopf.Resource) for r in offered)
    (resource,) = got
    assert isinstance(resource, kopf.Resource)
    assert (resource.group, resource.version, resource.plural, resource.kind) == (
        "",
        "v1",
        "secrets",
        "Secret",
    )
    assert resource.namespaced is True and resource.preferred is True


async def test_an_index_over_a_category_indexes_the_objects_of_every_resource_in_it() -> None:
    cluster = FakeCluster()
    cluster.add_crd(
        crd("idx.example.com", "apples", "Apple", "fruit"), crd("idx.example.com", "pears", "Pear", "fruit")
    )
    reg = kopf.Registry()

    @kopf.index(category="fruit", registry=reg, id="fruit")
    def fruit(name: str, resource: kopf.Resource, **_: Any) -> Any:
        return {resource.kind: name}

    async with cluster.client() as api:
        resolved = await _resolve(reg, api)
        assert sorted(r.plural for r in resolved["Selector(category='fruit')"]) == ["apples", "pears"]
        for kind in ("Apple", "Pear"):
            await api.create(
                {
                    "apiVersion": "idx.example.com/v1",
                    "kind": kind,
                    "metadata": {"name": "same", "namespace": "default"},
                    "spec": {},
                }
            )
        manager = build_manager(registry=reg, client=api, _resolved=resolved)
        indexes = _index_set(manager)
        assert indexes is not None
        assert len(indexes.indexers) == 2
        stop = asyncio.Event()
        running = asyncio.create_task(run_manager(manager, stop))
        try:
            await asyncio.wait_for(indexes.ready.wait(), 10)
        finally:
            stop.set()
            await asyncio.wait_for(running, 10)
    index = indexes.indices["fruit"]
    assert {k: list(v) for k, v in index.items()} == {"Apple": ["same"], "Pear": ["same"]}


async def test_admission_over_a_category_and_everything_has_a_rule_per_resource() -> None:
    cluster = FakeCluster()
    cluster.add_crd(
        crd("adm.example.com", "apples", "Apple", "fruit"), crd("adm.example.com", "pears", "Pear", "fruit")
    )
    reg = kopf.Registry()
    kopf.on.validate(category="fruit", registry=reg, id="fruit")(lambda **_: None)
    kopf.on.mutate(kopf.EVERYTHING, registry=reg, id="all")(lambda **_: None)
    async with cluster.client() as api:
        resolved = await _resolve(reg, api)
    handlers = admission_handlers(reg)
    fruit, everything = build_webhooks(handlers, resources=resolved, name_suffix="x.dev", client_config={})
    assert sorted(r["resources"][0] for r in fruit["rules"]) == ["apples", "pears"]
    assert all(r["apiGroups"] == ["adm.example.com"] for r in fruit["rules"])
    planned = {r["resources"][0] for r in everything["rules"]}
    assert {"apples", "pears", "secrets", "pods"} <= planned and "events" not in planned
