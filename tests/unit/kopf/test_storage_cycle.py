"""The handling cycle with kopf's storages, on kubeop.testing.FakeCluster: a creation kopf left
half done continues without re-running what is done, what kubeop.kopf leaves is in kopf's formats
(annotations, or kopf's status formats when the cycle's write is status-only), the record of
earlier kubeop.kopf releases is read and removed, and storages set in the settings are used."""

from __future__ import annotations

import json
from typing import Any

import kubeop.kopf as kopf
from kubeop.client import Client
from kubeop.core.resource import ApiResource
from kubeop.kopf.processing import ObjectLogger, Processor, objects_log
from kubeop.kopf.settings import reset_settings, use_settings
from kubeop.testing import FakeCluster

CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
WIDGETS = ApiResource("store.kubeop.dev", "v1", "widgets", kind="Widget", subresources=("status",))
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.store.kubeop.dev"},
    "spec": {
        "group": "store.kubeop.dev",
        "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}
LOGGER = ObjectLogger(objects_log, {"object_namespace": "default", "object_name": "x"})


def creation(calls: list[str], status: bool = False) -> Processor:
    """Three creation handlers, run in order: a, b, c (each returns its name when ``status``)."""
    reg = kopf.Registry()
    res = "widgets.v1.store.kubeop.dev" if status else "configmaps"
    for name in ("a", "b", "c"):

        def fn(_name: str = name, **_: Any) -> Any:
            calls.append(_name)
            return _name if status else None

        kopf.on.create(res, registry=reg, id=name)(fn)
    return Processor(res, list(reg.changing(res)))


async def run(p: Processor, api: Client, res: ApiResource, name: str, times: int = 1) -> dict[str, Any]:
    for _ in range(times):
        await p._cycle(api, res, await api.get(res, name, namespace="default"), LOGGER)
    got: dict[str, Any] = await api.get(res, name, namespace="default")
    return got


def annotations(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


async def test_a_creation_kopf_left_half_done_continues_without_rerunning_what_is_done() -> None:
    cluster = FakeCluster()
    api = cluster.client()
    a = {"started": "2026-11-27T10:00:00.000000+00:00", "stopped": "2026-11-27T10:00:00.100000+00:00"}
    b = {"started": "2026-11-27T10:00:00.000000+00:00", "delayed": "2026-11-27T10:00:01.000000+00:00"}
    await api.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "x",
                "namespace": "default",
                "annotations": {
                    "kopf.zalando.org/a": json.dumps(
                        {**a, "purpose": "create", "retries": 1, "success": True}
                    ),
                    "kopf.zalando.org/b": json.dumps(
                        {**b, "purpose": "create", "retries": 1, "message": "no"}
                    ),
                    "kopf.zalando.org/touch-dummy": "2026-11-27T10:00:01",
                },
            },
            "data": {"k": "v"},
        }
    )
    calls: list[str] = []
    p = creation(calls)
    obj = await run(p, api, CONFIGMAPS, "x")
    assert calls == ["b", "c"]
    assert p.writes == 1
    assert annotations(obj) == {"kopf.zalando.org/last-handled-configuration": '{"data":{"k":"v"}}\n'}
    obj = await run(p, api, CONFIGMAPS, "x")  # handled: nothing runs, nothing is written
    assert calls == ["b", "c"] and p.writes == 1
    await api.close()


async def test_progress_in_kopf_annotations_while_a_handler_retries() -> None:
    cluster = FakeCluster()
    api = cluster.client()
    await api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": "v"}})
    reg = kopf.Registry()
    calls: list[str] = []

    @kopf.on.create("configmaps", registry=reg, id="a")
    def a(**_: Any) -> None:
        calls.append("a")

    @kopf.on.create("configmaps", registry=reg, id="b")
    def b(retry: int, **_: Any) -> None:
        calls.append(f"b{retry}")
        if retry == 0:
            raise kopf.TemporaryError("not yet", delay=0)

    p = Processor("configmaps", list(reg.changing("configmaps")))
    obj = await run(p, api, CONFIGMAPS, "x")
    progress = {k: json.loads(v) for k, v in annotations(obj).items()}
    assert set(progress) == {"kopf.zalando.org/a", "kopf.zalando.org/b"}
    assert (
        progress["kopf.zalando.org/a"]["success"] is True and progress["kopf.zalando.org/a"]["retries"] == 1
    )
    assert (
        "stopped" in progress["kopf.zalando.org/a"] and progress["kopf.zalando.org/a"]["purpose"] == "create"
    )
    assert (
        progress["kopf.zalando.org/b"]["retries"] == 1
        and progress["kopf.zalando.org/b"]["message"] == "not yet"
    )
    assert progress["kopf.zalando.org/b"]["success"] is False and "delayed" in progress["kopf.zalando.org/b"]
    obj = await run(p, api, CONFIGMAPS, "x")
    assert calls == ["a", "b0", "b1"]
    assert set(annotations(obj)) == {"kopf.zalando.org/last-handled-configuration"}
    await api.close()


async def test_a_status_only_write_keeps_the_state_in_kopfs_status_formats_in_one_request() -> None:
    cluster = FakeCluster()
    cluster.add_crd(CRD)
    api = cluster.client()
    await api.create(
        {"apiVersion": "store.kubeop.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"v": 1}}
    )
    calls: list[str] = []
    p = creation(calls, status=True)
    obj = await run(p, api, WIDGETS, "w")
    assert calls == ["a", "b", "c"] and p.writes == 1
    assert obj["status"]["kopf"] == {"last-handled-configuration": '{"spec":{"v":1}}'}
    assert obj["status"]["a"] == "a" and not annotations(obj)
    await api.close()


async def test_the_record_of_earlier_releases_is_read_and_removed_in_the_same_write() -> None:
    cluster = FakeCluster()
    api = cluster.client()
    legacy = json.dumps({"seq": 3, "essence": {"data": {"k": "v"}}})
    await api.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "x", "annotations": {"kopf.kubeop.dev/state": legacy}},
            "data": {"k": "v2"},
        }
    )
    reg = kopf.Registry()
    diffs: list[Any] = []

    @kopf.on.update("configmaps", registry=reg, id="u")
    def u(diff: Any, **_: Any) -> None:
        diffs.append(tuple(diff))

    p = Processor("configmaps", list(reg.changing("configmaps")))
    obj = await run(p, api, CONFIGMAPS, "x")
    assert diffs == [(("change", ("data", "k"), "v", "v2"),)]
    assert p.writes == 1
    assert annotations(obj) == {"kopf.zalando.org/last-handled-configuration": '{"data":{"k":"v2"}}\n'}
    await api.close()


async def test_storages_set_in_the_settings_are_used_as_kopf_uses_them() -> None:
    cluster = FakeCluster()
    cluster.add_crd(CRD)
    api = cluster.client()
    await api.create(
        {"apiVersion": "store.kubeop.dev/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"v": 1}}
    )
    settings = kopf.OperatorSettings()
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="my-op.example.com", key="base"
    )
    settings.persistence.progress_storage = kopf.StatusProgressStorage(name="my-op")
    token = use_settings(settings)
    try:
        calls: list[str] = []
        p = creation(calls, status=True)
        obj = await run(p, api, WIDGETS, "w")
    finally:
        reset_settings(token)
    assert calls == ["a", "b", "c"]
    assert p.writes == 2, "the annotation and the status: two requests, as in kopf"
    assert annotations(obj) == {
        "my-op.example.com/base": '{"spec":{"v":1}}\n',
        "my-op.example.com/kopf-managed": "yes",
    }
    assert "my-op" not in obj["status"] and "kopf" not in obj["status"]
    await api.close()


async def test_an_object_kopf_handled_keeps_kopfs_annotations_even_on_a_status_only_write() -> None:
    cluster = FakeCluster()
    cluster.add_crd(CRD)
    api = cluster.client()
    base = '{"spec":{"v":1}}\n'
    await api.create(
        {
            "apiVersion": "store.kubeop.dev/v1",
            "kind": "Widget",
            "metadata": {"name": "w", "annotations": {"kopf.zalando.org/last-handled-configuration": base}},
            "spec": {"v": 2},
        }
    )
    reg = kopf.Registry()

    @kopf.on.update("widgets.v1.store.kubeop.dev", registry=reg, id="u")
    def u(old: Any, new: Any, **_: Any) -> Any:
        return f"{old['spec']['v']}->{new['spec']['v']}"

    p = Processor("widgets.v1.store.kubeop.dev", list(reg.changing("widgets.v1.store.kubeop.dev")))
    obj = await run(p, api, WIDGETS, "w")
    assert obj["status"] == {"u": "1->2"}
    assert annotations(obj) == {"kopf.zalando.org/last-handled-configuration": '{"spec":{"v":2}}\n'}
    assert p.writes == 2, "the annotation (kopf reads it) and the status"
    await api.close()


class Pruning:
    """The FakeCluster's client, with status.kopf dropped from status writes as an API server
    drops fields a structural schema does not declare (FakeCluster itself does not prune)."""

    def __init__(self, api: Client) -> None:
        self.api = api

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        return await self.api.get(*args, **kwargs)

    async def patch(self, res: Any, name: str, body: Any, **kwargs: Any) -> Any:
        if kwargs.get("subresource") == "status":
            body = {"status": {k: v for k, v in body["status"].items() if k != "kopf"}}
        return await self.api.patch(res, name, body, **kwargs)


async def test_a_status_that_drops_kopfs_fields_sends_the_state_to_the_annotations() -> None:
    cluster = FakeCluster()
    cluster.add_crd(CRD)
    api = cluster.client()
    for name in ("w1", "w2"):
        await api.create(
            {
                "apiVersion": "store.kubeop.dev/v1",
                "kind": "Widget",
                "metadata": {"name": name},
                "spec": {"v": 1},
            }
        )
    calls: list[str] = []
    p = creation(calls, status=True)
    pruning: Any = Pruning(api)
    obj = await run(p, pruning, WIDGETS, "w1")
    assert p.writes == 2 and "kopf" not in obj["status"]
    assert annotations(obj) == {"kopf.zalando.org/last-handled-configuration": '{"spec":{"v":1}}\n'}
    obj = await run(p, pruning, WIDGETS, "w2")  # known now: the annotation and the status at once
    assert p.writes == 4 and annotations(obj) == annotations(
        await api.get(WIDGETS, "w1", namespace="default")
    )
    assert calls == ["a", "b", "c"] * 2
    await api.close()
