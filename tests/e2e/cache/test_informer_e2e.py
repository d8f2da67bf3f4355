"""Informers on the real API server: sync through pages and streams, handlers, indices, resyncs."""

from __future__ import annotations

from typing import Any

import pytest

from kubeop.cache import (
    FuncHandler,
    Informer,
    ListWatch,
    SharedInformerFactory,
    WatcherConfig,
    label_index,
    object_key,
)
from kubeop.client import Client
from kubeop.core import ApiResource

from .e2e_cache_support import CM, configmap, create_many, eventually, install_crd

pytestmark = pytest.mark.controlplane

WIDGETS = ApiResource("cache.e2e.kubeop.dev", "v1", "widgets", kind="Widget")
WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.cache.e2e.kubeop.dev"},
    "spec": {
        "group": "cache.e2e.kubeop.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                        },
                    }
                },
            }
        ],
    },
}


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any, Any]] = []

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        self.events.append(("add", obj, is_in_initial_list))

    def on_update(self, old: Any, new: Any) -> None:
        self.events.append(("update", old, new))

    def on_delete(self, obj: Any) -> None:
        self.events.append(("delete", obj, None))

    def of(self, kind: str) -> list[tuple[str, Any, Any]]:
        return [e for e in self.events if e[0] == kind]


# In a full cluster kube-controller-manager publishes this ConfigMap into every namespace; the
# tests count only their own objects.
NOT_ROOT_CA = "metadata.name!=kube-root-ca.crt"


def cached(informer: Informer) -> dict[str, str]:
    return {object_key(o): o["metadata"]["resourceVersion"] for o in informer.store.list()}


async def server_state(client: Client, namespace: str, resource: ApiResource = CM) -> dict[str, str]:
    selector = NOT_ROOT_CA if resource == CM else None
    listed = await client.list_all(resource, namespace=namespace, field_selector=selector)
    return {object_key(o): o["metadata"]["resourceVersion"] for o in listed.items}


async def test_initial_sync_of_2000_objects_through_pagination(client: Client, namespace: str) -> None:
    await create_many(client, [configmap(f"cm-{i:04d}", namespace, k=str(i)) for i in range(2000)])
    config = WatcherConfig(streaming_list=False, consistent_list=True, page_size=500)
    paged = Informer(ListWatch(client, CM, namespace=namespace), config=config)
    streamed = Informer(ListWatch(client, CM, namespace=namespace))
    initial = Recorder()
    paged.add_event_handler(initial)
    paged.start()
    streamed.start()
    try:
        assert await paged.wait_for_sync(60) and await streamed.wait_for_sync(60)
        listed = await client.list_all(CM, namespace=namespace)
        expected = {object_key(o): o["metadata"]["resourceVersion"] for o in listed.items}
        own = [k for k in expected if k.split("/")[1].startswith("cm-")]
        assert len(own) == 2000  # plus kube-root-ca.crt in a full cluster
        assert cached(paged) == expected and cached(streamed) == expected
        pages = -(-len(expected) // 500)  # 2,000 objects (+ the root CA) in pages of 500
        assert paged.watcher.stats.list_requests == pages
        assert streamed.watcher.stats.list_requests == 0 and streamed.watcher.stats.watch_requests == 1
        assert len(initial.events) == len(expected) and all(e[0] == "add" and e[2] for e in initial.events)
        assert all("managedFields" not in o["metadata"] for o in paged.store.list())
    finally:
        await paged.stop()
        await streamed.stop()


async def test_handlers_see_add_update_delete_and_late_handlers_get_a_replay(
    client: Client, namespace: str
) -> None:
    await create_many(client, [configmap(f"pre-{i}", namespace, k="0") for i in range(3)])
    async with SharedInformerFactory(client) as factory:
        informer = factory.informer(CM, namespace=namespace, field_selector=NOT_ROOT_CA)
        early = Recorder()
        informer.add_event_handler(early)
        assert await factory.wait_for_cache_sync(timeout=30)
        assert [(e[0], e[2]) for e in early.events] == [("add", True)] * 3
        early.events.clear()

        await client.create(configmap("new", namespace, k="1"))
        await client.patch(CM, "pre-0", {"data": {"k": "changed"}}, namespace=namespace)
        await client.delete(CM, "pre-1", namespace=namespace)
        await eventually(lambda: len(early.events) == 3, what="three events")
        (add, new, initial), (update, old, cur), (delete, gone, _) = early.events
        assert (add, new["metadata"]["name"], initial) == ("add", "new", False)
        assert update == "update" and old["data"]["k"] == "0" and cur["data"]["k"] == "changed"
        assert int(cur["metadata"]["resourceVersion"]) > int(old["metadata"]["resourceVersion"])
        assert (delete, gone["metadata"]["name"]) == ("delete", "pre-1")

        late = Recorder()
        registration = informer.add_event_handler(late)
        assert registration.has_synced()
        assert sorted(e[1]["metadata"]["name"] for e in late.events) == ["new", "pre-0", "pre-2"]
        assert all(e[0] == "add" and e[2] for e in late.events)
        assert cached(informer) == await server_state(client, namespace)


async def test_label_index_answers_like_a_label_selector(client: Client, namespace: str) -> None:
    objects = [configmap(f"cm-{i}", namespace, {"tier": ("web", "db", "cache")[i % 3]}) for i in range(30)]
    await create_many(client, objects)
    async with SharedInformerFactory(client) as factory:
        informer = factory.informer(CM, namespace=namespace, field_selector=NOT_ROOT_CA)
        informer.add_indexers({"tier": label_index("tier")})
        assert await factory.wait_for_cache_sync(timeout=30)
        await client.patch(CM, "cm-0", {"metadata": {"labels": {"tier": "db"}}}, namespace=namespace)
        for tier in ("web", "db", "cache"):
            want = await client.list(CM, namespace=namespace, label_selector={"tier": tier})
            names = sorted(o["metadata"]["name"] for o in want.items)
            await eventually(
                lambda tier=tier, names=names: (
                    sorted(o["metadata"]["name"] for o in informer.store.by_index("tier", tier)) == names
                ),
                what=f"index tier={tier}",
            )
        assert (
            informer.store.index_keys("namespace", namespace)
            and len(informer.store.by_index("namespace", namespace)) == 30
        )


async def test_resync_delivers_updates_without_api_calls(client: Client, namespace: str) -> None:
    await create_many(client, [configmap(f"cm-{i}", namespace) for i in range(5)])
    sent: list[str] = []
    request, stream = client.transport.request, client.transport.stream

    async def counting_request(req: Any) -> Any:
        sent.append(str(req))
        return await request(req)

    def counting_stream(req: Any) -> Any:
        sent.append(str(req))
        return stream(req)

    client.transport.request = counting_request  # type: ignore[method-assign]
    client.transport.stream = counting_stream  # type: ignore[method-assign]
    async with SharedInformerFactory(client, resync_period=1.0) as factory:
        informer = factory.informer(CM, namespace=namespace, field_selector=NOT_ROOT_CA)
        rec = Recorder()
        informer.add_event_handler(rec)
        assert await factory.wait_for_cache_sync(timeout=30)
        before = list(sent)
        await eventually(lambda: len(rec.of("update")) >= 10, within=10, what="two resyncs")
        assert sent == before, "a resync must not call the API"
        assert all(old is new for _, old, new in rec.of("update"))
        assert {e[2]["metadata"]["name"] for e in rec.of("update")} == {f"cm-{i}" for i in range(5)}


async def test_metadata_only_informer(client: Client, namespace: str) -> None:
    await client.create(configmap("big", namespace, {"app": "x"}, payload="y" * 10_000))
    async with SharedInformerFactory(client) as factory:
        informer = factory.informer(CM, namespace=namespace, metadata_only=True, field_selector=NOT_ROOT_CA)
        seen: list[Any] = []
        informer.add_event_handler(FuncHandler(on_update=lambda old, new: seen.append(new)))
        assert await factory.wait_for_cache_sync(timeout=30)
        (obj,) = informer.store.list()
        assert set(obj) == {"apiVersion", "kind", "metadata"}
        assert (obj["apiVersion"], obj["kind"]) == ("v1", "ConfigMap")
        assert obj["metadata"]["labels"] == {"app": "x"} and "managedFields" not in obj["metadata"]
        await client.patch(CM, "big", {"metadata": {"labels": {"app": "z"}}}, namespace=namespace)
        await eventually(lambda: seen, what="a metadata update")
        assert set(seen[0]) == {"apiVersion", "kind", "metadata"} and seen[0]["metadata"]["labels"] == {
            "app": "z"
        }


async def test_custom_resources_and_selectors(client: Client, namespace: str) -> None:
    await install_crd(client, WIDGET_CRD)
    widgets = [
        {
            "apiVersion": "cache.e2e.kubeop.dev/v1",
            "kind": "Widget",
            "metadata": {
                "name": f"w{i}",
                "namespace": namespace,
                "labels": {"even": str(i % 2 == 0).lower()},
            },
            "spec": {"size": i},
        }
        for i in range(10)
    ]
    for w in widgets:
        await client.create(w, resource=WIDGETS)
    async with SharedInformerFactory(client) as factory:
        informer = factory.informer(WIDGETS, namespace=namespace, label_selector={"even": "true"})
        assert await factory.wait_for_cache_sync(timeout=30)
        assert sorted(o["metadata"]["name"] for o in informer.store.list()) == ["w0", "w2", "w4", "w6", "w8"]
        assert all(o["kind"] == "Widget" for o in informer.store.list())
        # Relabelled out of the selector: a delete for this informer.
        await client.patch(WIDGETS, "w0", {"metadata": {"labels": {"even": "no"}}}, namespace=namespace)
        await eventually(
            lambda: "w0" not in {o["metadata"]["name"] for o in informer.store.list()}, what="w0 gone"
        )
