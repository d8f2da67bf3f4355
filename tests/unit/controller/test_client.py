"""The reconciler client: compare before write, read-your-writes, finalizers (FakeCluster, fake cache)."""

from __future__ import annotations

from typing import Any

import pytest

from kubeop.controller import ReconcilerClient
from kubeop.core.resource import ApiResource

from .fakes import APPS, CONFIGMAPS, ClusterApi, FakeFactory, app


def _cm(value: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "c", "namespace": "default"}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": {"v": value}}


def _client() -> tuple[ReconcilerClient, ClusterApi, FakeFactory]:
    api, factory = ClusterApi(), FakeFactory()
    client = ReconcilerClient(api.client, factory)  # type: ignore[arg-type]
    # The fake factory keys informers by ApiResource: name the kinds as the tests do.
    client._resources[("v1", "ConfigMap")] = CONFIGMAPS
    client._resources[("example.com/v1", "App")] = APPS
    return client, api, factory


async def test_create_then_unchanged_then_update() -> None:
    client, api, factory = _client()
    action, created = await client.create_or_update(_cm("1"))
    assert action == "created" and [w[0] for w in api.writes] == ["POST"]
    # The cache has not seen the create yet: the client still knows (read-your-writes).
    remembered = await client.get(CONFIGMAPS, "c", namespace="default")
    assert remembered["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    action, _ = await client.create_or_update(_cm("1"))
    assert action == "unchanged" and len(api.writes) == 1
    # The cache catches up with an object carrying a foreign label.
    cached = dict(created, metadata={**created["metadata"], "labels": {"theirs": "x"}})
    factory.informer(CONFIGMAPS).store.objects["default/c"] = cached
    action, updated = await client.create_or_update(_cm("2", labels={"mine": "y"}))
    assert action == "updated" and api.writes[-1][0] == "PUT"
    assert updated["metadata"]["labels"] == {"theirs": "x", "mine": "y"}
    assert cached["data"] == {"v": "1"}, "the cached object must not be mutated"


async def test_a_delete_seen_by_the_cache_beats_a_remembered_write() -> None:
    client, _api, factory = _client()
    await client.create_or_update(_cm("1"))
    assert await client.get(CONFIGMAPS, "c", namespace="default") is not None
    # The store applied a later event (the object's delete): the cache is the truth again.
    created = await client.get(CONFIGMAPS, "c", namespace="default")
    deleted = {**created, "metadata": {**created["metadata"], "resourceVersion": "500"}}
    factory.informer(CONFIGMAPS).add(deleted)
    factory.informer(CONFIGMAPS).delete(deleted)
    assert await client.get(CONFIGMAPS, "c", namespace="default") is None


async def test_writes_are_remembered_however_the_kind_is_named() -> None:
    client, _api, _ = _client()
    from_discovery = ApiResource("", "v1", "configmaps", kind="ConfigMap", verbs=("get", "list"))
    client._resources[("v1", "ConfigMap")] = from_discovery  # what resolving an object's kind returns
    await client.create_or_update(_cm("1"))
    assert await client.get(CONFIGMAPS, "c", namespace="default") is not None


async def test_create_meeting_already_exists_is_not_an_error() -> None:
    client, api, _ = _client()
    await api.seed(_cm("1"))  # created by someone else; the cache has not seen it yet
    action, obj = await client.create_or_update(_cm("1"))
    assert action == "unchanged" and obj["data"] == {"v": "1"}
    assert [w[0] for w in api.writes] == ["POST"]  # refused with AlreadyExists, then read


async def test_update_conflict_rereads_and_retries_once() -> None:
    client, api, factory = _client()
    stale = await api.seed(_cm("1"))
    factory.informer(CONFIGMAPS).store.objects["default/c"] = stale
    await api.seed_update(_cm("changed elsewhere"))
    action, obj = await client.create_or_update(_cm("2"))
    assert action == "updated" and obj["data"] == {"v": "2"}
    assert [w[0] for w in api.writes] == ["PUT", "PUT"]  # 409 on the cache's version, then again


async def test_create_or_patch_sends_a_merge_patch() -> None:
    client, api, factory = _client()
    factory.informer(CONFIGMAPS).store.objects["default/c"] = await api.seed(_cm("1"))
    action, obj = await client.create_or_patch(_cm("2"))
    assert action == "updated" and obj["data"] == {"v": "2"}
    assert api.writes[-1] == (
        "PATCH",
        {"metadata": {"name": "c", "namespace": "default"}, "data": {"v": "2"}},
    )


async def test_patch_status_writes_only_differences() -> None:
    client, api, _ = _client()
    obj = await api.seed(app("a"))
    obj["status"] = {"observedGeneration": 1, "ready": True}
    assert not await client.patch_status(obj, {"observedGeneration": 1})
    assert api.writes == []
    assert await client.patch_status(obj, {"observedGeneration": 2})
    assert api.writes == [("PATCH/status", {"status": {"observedGeneration": 2}})]


async def test_finalize_adds_then_cleans_up_and_removes() -> None:
    client, api, _ = _client()
    live = await api.seed(app("a"))
    cleaned: list[str] = []

    async def cleanup(obj: Any) -> None:
        cleaned.append(obj["metadata"]["name"])

    assert await client.finalize(live, "example.com/cleanup", cleanup) is False
    assert api.writes[-1] == (
        "PATCH",
        [{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/cleanup"]}],
    )
    with_finalizer = await client.get(APPS, "a", namespace="default")
    assert with_finalizer["metadata"]["finalizers"] == ["example.com/cleanup"]
    assert await client.finalize(with_finalizer, "example.com/cleanup", cleanup) is False
    assert len(api.writes) == 1
    await api.seed_update(
        {
            **with_finalizer,
            "metadata": {**with_finalizer["metadata"], "finalizers": ["other", "example.com/cleanup"]},
        }
    )
    async with api.cluster.client() as other:
        await other.delete(APPS, "a", namespace="default")  # finalizers hold it
    deleting = await client.api.get(APPS, "a", namespace="default")
    assert deleting["metadata"]["deletionTimestamp"]
    assert await client.finalize(deleting, "example.com/cleanup", cleanup) is True
    assert cleaned == ["a"]
    assert api.writes[-1][1] == [
        {"op": "test", "path": "/metadata/finalizers", "value": ["other", "example.com/cleanup"]},
        {"op": "replace", "path": "/metadata/finalizers", "value": ["other"]},
    ]
    assert (await client.api.get(APPS, "a", namespace="default"))["metadata"]["finalizers"] == ["other"]


async def test_failed_cleanup_keeps_the_finalizer() -> None:
    client, api, _ = _client()
    deleting = app("a")
    deleting["metadata"].update(deletionTimestamp="x", finalizers=["f"])

    async def cleanup(obj: Any) -> None:
        raise RuntimeError("external system down")

    with pytest.raises(RuntimeError):
        await client.finalize(deleting, "f", cleanup)
    assert api.writes == []


async def test_remembered_writes_the_cache_has_applied_are_swept() -> None:
    """Writes to keys never read back (objects created and later deleted) do not pile up: once
    the map has doubled, entries the cache has applied, or of kinds without an informer, go."""
    client, _api, factory = _client()
    informer = factory.informer(CONFIGMAPS)
    client.use_informer(CONFIGMAPS, informer)
    for i in range(5000):
        created = await client.create(dict(_cm("1"), metadata={"name": f"c{i}", "namespace": "default"}))
        informer.applied_rv = int(created["metadata"]["resourceVersion"])  # the watch delivered it
    assert client.remembered_writes < 1024
    # Writes the cache has not seen are kept, however many there are (the watch stalls here).
    for i in range(3000):
        await client.create(dict(_cm("1"), metadata={"name": f"d{i}", "namespace": "default"}))
    assert client.remembered_writes >= 3000
    latest = await client.get(CONFIGMAPS, "d2999", namespace="default")
    assert latest is not None and latest["metadata"]["name"] == "d2999"
    # A kind nobody reads through this client: nothing to keep its writes for.
    for i in range(3000):
        await client.create(app(f"a{i}"))
    assert client.remembered_writes <= 2 * 3000
