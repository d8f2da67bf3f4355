"""GVK parsing, keys and references, metadata helpers over dicts."""

from __future__ import annotations

from typing import Any, ClassVar

import pydantic
import pytest

from kubeop.core import meta
from kubeop.core.gvk import GroupVersionKind, GroupVersionResource, split_api_version
from kubeop.core.keys import ObjectKey, ObjectRef, key_of, parse_key, ref_of
from kubeop.core.model import from_dict, is_model_class, model_gvk, model_resource, to_dict
from kubeop.core.resource import ApiResource


@pytest.mark.parametrize(
    ("api_version", "expected"),
    [("v1", ("", "v1")), ("apps/v1", ("apps", "v1")), ("a.b.io/v1beta1", ("a.b.io", "v1beta1"))],
)
def test_split_api_version(api_version: str, expected: tuple[str, str]) -> None:
    assert split_api_version(api_version) == expected


@pytest.mark.parametrize("bad", ["", "/v1", "apps/", "a/b/c"])
def test_split_api_version_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        split_api_version(bad)


def test_gvk_of_object() -> None:
    gvk = GroupVersionKind.of({"apiVersion": "apps/v1", "kind": "Deployment"})
    assert gvk == GroupVersionKind("apps", "v1", "Deployment")
    assert gvk.api_version == "apps/v1"
    assert str(gvk) == "apps/v1, Kind=Deployment"
    assert GroupVersionResource("", "v1", "pods").api_version == "v1"
    with pytest.raises(ValueError, match="no kind"):
        GroupVersionKind.of({"apiVersion": "v1", "metadata": {"name": "x"}})


def test_api_resource_names() -> None:
    res = ApiResource("apps", "v1", "deployments", kind="Deployment")
    assert res.display_name == "deployments.apps"
    assert res.gvr == GroupVersionResource("apps", "v1", "deployments")
    assert ApiResource("", "v1", "pods").display_name == "pods"


def test_keys() -> None:
    assert str(key_of({"metadata": {"name": "a", "namespace": "ns"}})) == "ns/a"
    assert str(key_of({"metadata": {"name": "n1"}})) == "n1"
    assert parse_key("ns/a") == ObjectKey("ns", "a")
    assert parse_key("n1") == ObjectKey("", "n1")
    for bad in ("", "/a", "a/", "a/b/c"):
        with pytest.raises(ValueError):
            parse_key(bad)
    with pytest.raises(ValueError):
        key_of({"metadata": {}})


def test_ref_of() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns", "uid": "u"}}
    ref = ref_of(obj)
    assert ref == ObjectRef("v1", "ConfigMap", "a", "ns", "u")
    assert ref.to_dict() == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "a",
        "namespace": "ns",
        "uid": "u",
    }
    assert str(ref) == "ConfigMap ns/a"


def test_meta_readers_tolerate_missing_fields() -> None:
    obj: dict[str, Any] = {}
    assert meta.name(obj) == "" and meta.labels(obj) == {} and meta.generation(obj) == 0
    assert meta.finalizers(obj) == [] and not meta.is_being_deleted(obj) and meta.controller_of(obj) is None


def test_finalizers_report_changes() -> None:
    obj: dict[str, Any] = {}
    assert meta.add_finalizer(obj, "x/y")
    assert not meta.add_finalizer(obj, "x/y")
    assert meta.has_finalizer(obj, "x/y")
    assert meta.remove_finalizer(obj, "x/y")
    assert not meta.remove_finalizer(obj, "x/y")
    assert obj == {"metadata": {"finalizers": []}}


def test_labels_annotations() -> None:
    obj: dict[str, Any] = {"metadata": {}}
    assert meta.set_label(obj, "a", "1") and not meta.set_label(obj, "a", "1")
    assert meta.set_annotation(obj, "b", "2")
    assert meta.labels(obj) == {"a": "1"} and meta.annotations(obj) == {"b": "2"}


def test_owner_references() -> None:
    owner = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns", "uid": "u1"},
    }
    child: dict[str, Any] = {"kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "ns"}}
    assert meta.set_owner_reference(owner, child, controller=True)
    assert not meta.set_owner_reference(owner, child, controller=True)
    assert meta.controller_of(child) == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "d",
        "uid": "u1",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    other = {"apiVersion": "v1", "kind": "X", "metadata": {"name": "o", "namespace": "ns", "uid": "u2"}}
    with pytest.raises(ValueError, match="already controlled"):
        meta.set_owner_reference(other, child, controller=True)
    assert meta.set_owner_reference(other, child)
    assert len(meta.owner_references(child)) == 2
    elsewhere = {"metadata": {"name": "o", "namespace": "other", "uid": "u3"}}
    with pytest.raises(ValueError, match="cross-namespace"):
        meta.set_owner_reference(elsewhere, child)


# -- typed models -------------------------------------------------------------------------------


class Widget(pydantic.BaseModel):
    api_version: ClassVar[str] = "example.com/v1"
    kind: ClassVar[str] = "Widget"
    resource: ClassVar[ApiResource] = ApiResource("example.com", "v1", "widgets", kind="Widget")

    metadata: dict[str, Any] = {}
    spec: dict[str, Any] | None = None


class FieldStyle(pydantic.BaseModel):
    apiVersion: str = "v1"
    kind: str = "ConfigMap"
    metadata: dict[str, Any] = {}


class Plain:
    api_version = "v1"
    kind = "Secret"

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plain:
        return cls(data)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


def test_model_protocol_forms() -> None:
    assert is_model_class(Widget) and is_model_class(FieldStyle) and is_model_class(Plain)
    assert not is_model_class(dict) and not is_model_class(Widget(metadata={}))
    assert model_gvk(Widget) == GroupVersionKind("example.com", "v1", "Widget")
    assert model_gvk(FieldStyle) == GroupVersionKind("", "v1", "ConfigMap")
    assert model_resource(Widget) is Widget.resource and model_resource(Plain) is None


def test_model_conversion() -> None:
    w = Widget(metadata={"name": "w"}, spec={"size": 1})
    assert to_dict(w) == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": 1},
    }
    assert to_dict(Widget(metadata={"name": "w"})) == {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
    }
    back = from_dict(Widget, {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}})
    assert back.metadata == {"name": "w"}
    assert to_dict(FieldStyle())["kind"] == "ConfigMap"
    p = from_dict(Plain, {"metadata": {"name": "s"}})
    assert to_dict(p) == {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}
    d = {"a": 1}
    assert to_dict(d) is d  # dicts pass through untouched: no copy on the hot path
    with pytest.raises(TypeError):
        to_dict(object())
