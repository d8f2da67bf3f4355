"""The reconciler client on models: writes given a model answer with a model of its class, reads
hand out fresh instances (a change to one reaches neither the cache nor the next reader), and
owner references between models keep what was there."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import Field

from kubeop.controller import OwnershipError, ReconcilerClient, set_controller_reference, set_owner_reference
from kubeop.crd import CamelModel, CustomResource
from kubeop.kinds import ConfigMap
from kubeop.kinds.meta_v1 import ObjectMeta, OwnerReference

from .fakes import APPS, CONFIGMAPS, ClusterApi, FakeFactory, app


class AppSpec(CamelModel):
    replicas: int | None = None


class App(CustomResource, group="example.com", version="v1"):
    spec: AppSpec = Field(default_factory=AppSpec)
    status: dict[str, Any] | None = None


def _client() -> tuple[ReconcilerClient, ClusterApi, FakeFactory]:
    api, factory = ClusterApi(), FakeFactory()
    client = ReconcilerClient(api.client, factory)  # type: ignore[arg-type]
    for key in (("v1", "ConfigMap"), ConfigMap):
        client._resources[key] = CONFIGMAPS
    for key in (("example.com/v1", "App"), App):
        client._resources[key] = APPS
    return client, api, factory


def _cm(value: str) -> ConfigMap:
    return ConfigMap(metadata=ObjectMeta(name="c", namespace="default"), data={"v": value})


async def test_create_or_update_answers_a_model_with_a_model_and_a_dict_with_a_dict() -> None:
    client, api, _ = _client()
    action, created = await client.create_or_update(_cm("1"))
    assert action == "created" and isinstance(created, ConfigMap)
    assert created.metadata.uid and created.data == {"v": "1"}
    action, same = await client.create_or_update(_cm("1"))
    assert action == "unchanged" and isinstance(same, ConfigMap) and same == created
    action, updated = await client.create_or_update(_cm("2"))
    assert action == "updated" and isinstance(updated, ConfigMap) and updated.data == {"v": "2"}
    assert [w[0] for w in api.writes] == ["POST", "PUT"]
    # A change to a returned model stays in it.
    updated.data["v"] = "mine"  # type: ignore[index]
    assert (await client.get(CONFIGMAPS, "c", namespace="default"))["data"] == {"v": "2"}
    action, as_dict = await client.create_or_update(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "default"},
            "data": {"v": "2"},
        }
    )
    assert action == "unchanged" and type(as_dict) is dict


async def test_every_read_is_a_fresh_model_and_changes_do_not_leak() -> None:
    client, _api, factory = _client()
    cached = app("a", generation=3, rv="5")
    factory.informer(APPS).add(cached)
    first = await client.get(App, "a", namespace="default")
    second = await client.get(App, "a", namespace="default")
    assert isinstance(first, App) and first == second and first is not second
    first.metadata.generation = 99
    first.spec.replicas = 7
    first.metadata.labels = {"x": "y"}
    third = await client.get(App, "a", namespace="default")
    assert third.metadata.generation == 3 and third.spec.replicas == second.spec.replicas
    assert cached["metadata"]["generation"] == 3 and "labels" not in cached["metadata"]
    # A new resourceVersion in the cache is what the next read sees.
    factory.informer(APPS).update(app("a", generation=4, rv="6"))
    fourth = await client.get(App, "a", namespace="default")
    assert (fourth.metadata.generation, fourth.metadata.resource_version) == (4, "6")
    listed = await client.list(App, namespace="default")
    assert listed == [fourth] and listed[0] is not fourth


def _owner(name: str, uid: str) -> App:
    return App.model_validate(
        {
            "apiVersion": "example.com/v1",
            "kind": "App",
            "metadata": {"name": name, "namespace": "default", "uid": uid},
        }
    )


def test_owner_references_between_models() -> None:
    owner = _owner("a", "u1")
    cm = _cm("1")
    assert set_controller_reference(owner, cm)
    (ref,) = cm.metadata.owner_references or []
    assert isinstance(ref, OwnerReference)
    assert ref == OwnerReference(
        api_version="example.com/v1",
        kind="App",
        name="a",
        uid="u1",
        controller=True,
        block_owner_deletion=True,
    )
    assert not set_controller_reference(owner, cm)  # already there: no change
    # A second, non-controller owner is added; the first reference is kept as it was.
    assert set_owner_reference(_owner("b", "u2"), cm)
    first, second = cm.metadata.owner_references or []
    assert first is ref and (second.name, second.controller) == ("b", None)
    with pytest.raises(OwnershipError, match="already controlled by App 'a'"):
        set_controller_reference(_owner("b", "u2"), cm)
    # The reference to the same owner is replaced, not duplicated.
    assert set_owner_reference(owner, cm)
    assert [(r.uid, r.controller) for r in cm.metadata.owner_references or []] == [("u1", None), ("u2", None)]


def test_owner_reference_on_a_custom_resource_keeps_dicts() -> None:
    child = App.model_validate({"metadata": {"name": "child", "namespace": "default"}})
    assert set_controller_reference(_owner("a", "u1"), child)
    assert child.metadata.owner_references == [
        {
            "apiVersion": "example.com/v1",
            "kind": "App",
            "name": "a",
            "uid": "u1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    other_ns = _cm("1")
    other_ns.metadata.namespace = "elsewhere"  # type: ignore[union-attr]
    with pytest.raises(OwnershipError, match="cross-namespace"):
        set_controller_reference(_owner("a", "u1"), other_ns)


async def test_every_write_answers_a_model_with_a_model() -> None:
    client, api, _ = _client()
    created = await client.create(_cm("1"))
    assert isinstance(created, ConfigMap) and created.metadata.resource_version
    created.data = {"v": "2"}
    updated = await client.update(created)
    assert isinstance(updated, ConfigMap) and updated.data == {"v": "2"}
    # A patch is not an object: its answer is the server's dict, however the kind is named.
    patched = await client.patch(ConfigMap, "c", {"data": {"v": "3"}}, namespace="default")
    assert type(patched) is dict and patched["data"] == {"v": "3"}
    as_dict = await client.patch(CONFIGMAPS, "c", {"data": {"v": "4"}}, namespace="default")
    assert type(as_dict) is dict and as_dict["data"] == {"v": "4"}
    # What the client remembers for read-your-writes is the server's dict, not the model.
    remembered = await client.get(CONFIGMAPS, "c", namespace="default")
    assert type(remembered) is dict and remembered["data"] == {"v": "4"}
    assert [w[0] for w in api.writes] == ["POST", "PUT", "PATCH", "PATCH"]


async def test_a_change_deep_in_a_written_model_stays_out_of_read_your_writes() -> None:
    """A field typed ``dict[str, Any]`` holds what it was given: the model answered by a write is
    built from a copy of the server's dict, which the client remembers for the next read."""
    client, _api, _ = _client()
    given = await client.create(_owner("a", "u1"))
    given.status = {"conditions": [{"type": "Ready", "status": "True"}]}
    created = await client.update_status(given)
    assert isinstance(created, App)
    created.status["conditions"][0]["status"] = "False"  # type: ignore[index]
    created.status["conditions"].append({"type": "Mine"})  # type: ignore[index]
    remembered = await client.get(APPS, "a", namespace="default")
    assert remembered["status"] == {"conditions": [{"type": "Ready", "status": "True"}]}
    again = await client.get(App, "a", namespace="default")
    assert again.status == {"conditions": [{"type": "Ready", "status": "True"}]}
