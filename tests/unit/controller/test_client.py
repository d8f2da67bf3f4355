"""The reconciler client: compare before write, read-your-writes, finalizers (fake API, fake cache)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubeop.controller import ReconcilerClient
from kubeop.core.errors import AlreadyExists, Conflict
from kubeop.core.patch import PatchType
from kubeop.core.resource import ApiResource

from .fakes import APPS, CONFIGMAPS, FakeFactory, app


class FakeApi:
    """Records writes; objects live in a dict, resourceVersions count up."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, Any]] = []
        self.rv = 100
        self.fail_create_exists = False
        self.conflicts = 0

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        obj["metadata"].setdefault("uid", "uid-" + obj["metadata"]["name"])
        self.objects[(obj["kind"], obj["metadata"]["name"])] = obj
        return obj

    async def resource(self, what: Any) -> ApiResource:
        return what  # type: ignore[no-any-return]

    async def create(self, obj: dict[str, Any], *, resource: ApiResource, **kw: Any) -> dict[str, Any]:
        self.writes.append(("create", obj["metadata"]["name"]))
        if self.fail_create_exists:
            raise AlreadyExists("exists")
        return self._stamp(obj)

    async def get(self, res: ApiResource, name: str, *, namespace: str | None = None) -> dict[str, Any]:
        return copy.deepcopy(self.objects[(res.kind, name)])

    async def update(self, obj: dict[str, Any], *, resource: ApiResource, **kw: Any) -> dict[str, Any]:
        self.writes.append(("update", obj["metadata"]["name"]))
        if self.conflicts:
            self.conflicts -= 1
            raise Conflict("stale")
        return self._stamp(obj)

    async def patch(
        self,
        res: ApiResource,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        **kw: Any,
    ) -> dict[str, Any]:
        self.writes.append((f"patch{'/' + subresource if subresource else ''}", body))
        obj = copy.deepcopy(
            self.objects.get((res.kind, name)) or {"kind": res.kind, "metadata": {"name": name}}
        )
        if type is PatchType.JSON:
            for op in body:
                if op["op"] in ("add", "replace"):
                    obj["metadata"]["finalizers"] = op["value"]
        else:
            for k, v in body.items():
                if isinstance(v, dict):
                    obj.setdefault(k, {}).update(v)
                else:
                    obj[k] = v
        return self._stamp(obj)


def _cm(value: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "c", "namespace": "default"}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": {"v": value}}


def _client() -> tuple[ReconcilerClient, FakeApi, FakeFactory]:
    api, factory = FakeApi(), FakeFactory()
    client = ReconcilerClient(api, factory)  # type: ignore[arg-type]
    client._resources[("v1", "ConfigMap")] = CONFIGMAPS
    client._resources[("example.com/v1", "App")] = APPS
    return client, api, factory


async def test_create_then_unchanged_then_update() -> None:
    client, api, factory = _client()
    action, created = await client.create_or_update(_cm("1"))
    assert action == "created" and api.writes == [("create", "c")]
    # The cache has not seen the create yet: the client still knows (read-your-writes).
    assert (await client.get(CONFIGMAPS, "c", namespace="default"))["metadata"]["resourceVersion"] == "101"
    action, _ = await client.create_or_update(_cm("1"))
    assert action == "unchanged" and len(api.writes) == 1
    # The cache catches up with an object carrying a foreign label.
    cached = dict(created, metadata={**created["metadata"], "labels": {"theirs": "x"}})
    factory.informer(CONFIGMAPS).store.objects["default/c"] = cached
    action, updated = await client.create_or_update(_cm("2", labels={"mine": "y"}))
    assert action == "updated" and api.writes[-1] == ("update", "c")
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
    api._stamp(_cm("1"))
    api.fail_create_exists = True
    action, obj = await client.create_or_update(_cm("1"))
    assert action == "unchanged" and obj["data"] == {"v": "1"}
    assert api.writes == [("create", "c")]


async def test_update_conflict_rereads_and_retries_once() -> None:
    client, api, factory = _client()
    stale = api._stamp(_cm("1"))
    factory.informer(CONFIGMAPS).store.objects["default/c"] = stale
    api.conflicts = 1
    action, obj = await client.create_or_update(_cm("2"))
    assert action == "updated" and obj["data"] == {"v": "2"}
    assert [w[0] for w in api.writes] == ["update", "update"]


async def test_create_or_patch_sends_a_merge_patch() -> None:
    client, api, factory = _client()
    factory.informer(CONFIGMAPS).store.objects["default/c"] = api._stamp(_cm("1"))
    action, _ = await client.create_or_patch(_cm("2"))
    assert action == "updated"
    assert api.writes[-1] == (
        "patch",
        {"metadata": {"name": "c", "namespace": "default"}, "data": {"v": "2"}},
    )


async def test_patch_status_writes_only_differences() -> None:
    client, api, _ = _client()
    obj = app("a")
    obj["status"] = {"observedGeneration": 1, "ready": True}
    assert not await client.patch_status(obj, {"observedGeneration": 1})
    assert api.writes == []
    assert await client.patch_status(obj, {"observedGeneration": 2})
    assert api.writes == [("patch/status", {"status": {"observedGeneration": 2}})]


async def test_finalize_adds_then_cleans_up_and_removes() -> None:
    client, api, _ = _client()
    live = app("a")
    api.objects[("App", "a")] = copy.deepcopy(live)
    cleaned: list[str] = []

    async def cleanup(obj: Any) -> None:
        cleaned.append(obj["metadata"]["name"])

    assert await client.finalize(live, "example.com/cleanup", cleanup) is False
    assert api.writes[-1] == (
        "patch",
        [{"op": "add", "path": "/metadata/finalizers", "value": ["example.com/cleanup"]}],
    )
    assert (
        await client.finalize(
            {**live, "metadata": {**live["metadata"], "finalizers": ["example.com/cleanup"]}},
            "example.com/cleanup",
            cleanup,
        )
        is False
    )
    assert len(api.writes) == 1
    deleting = copy.deepcopy(live)
    deleting["metadata"].update(
        deletionTimestamp="2026-01-01T00:00:00Z", finalizers=["other", "example.com/cleanup"]
    )
    assert await client.finalize(deleting, "example.com/cleanup", cleanup) is True
    assert cleaned == ["a"]
    assert api.writes[-1][1] == [
        {"op": "test", "path": "/metadata/finalizers", "value": ["other", "example.com/cleanup"]},
        {"op": "replace", "path": "/metadata/finalizers", "value": ["other"]},
    ]


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
        await client.create(dict(_cm("1"), metadata={"name": f"c{i}", "namespace": "default"}))
        informer.applied_rv = 100 + i + 1  # the watch delivered the create
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
