"""Model generation from an OpenAPI v3 document (a small synthetic one)."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from kubeop.core.gvk import GroupVersionKind
from kubeop.core.model import from_dict, is_model_class, model_gvk, to_dict
from kubeop.core.openapi import ModelFactory, schema_name_for

R = "#/components/schemas/"
DOC: dict[str, Any] = {
    "components": {
        "schemas": {
            "ex.v1.Thing": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "ex.io", "version": "v1", "kind": "Thing"}],
                "properties": {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"default": {}, "allOf": [{"$ref": R + "meta.ObjectMeta"}]},
                    "spec": {"allOf": [{"$ref": R + "ex.v1.ThingSpec"}]},
                },
            },
            "meta.ObjectMeta": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "creationTimestamp": {"allOf": [{"$ref": R + "meta.Time"}]},
                },
            },
            "meta.Time": {"type": "string", "format": "date-time"},
            "meta.IntOrString": {
                "format": "int-or-string",
                "oneOf": [{"type": "integer"}, {"type": "string"}],
            },
            "ex.v1.ThingSpec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer"},
                    "port": {"allOf": [{"$ref": R + "meta.IntOrString"}]},
                    "continue": {"type": "boolean"},
                    "x-extra": {"type": "number"},
                    "schema": {"allOf": [{"$ref": R + "ex.v1.Node"}]},
                    "raw": {"x-kubernetes-preserve-unknown-fields": True},
                    "inline": {"type": "object", "properties": {"a": {"type": "string"}}},
                },
            },
            "ex.v1.Node": {
                "type": "object",
                "properties": {
                    "value": {"type": "string"},
                    "children": {"type": "array", "items": {"allOf": [{"$ref": R + "ex.v1.Node"}]}},
                },
            },
        }
    }
}

GVK = GroupVersionKind("ex.io", "v1", "Thing")


def test_builds_a_model_that_round_trips() -> None:
    assert schema_name_for(DOC, GVK) == "ex.v1.Thing"
    Thing: Any = ModelFactory(DOC).model_for(GVK)
    assert is_model_class(Thing) and model_gvk(Thing) == GVK
    wire = {
        "apiVersion": "ex.io/v1",
        "kind": "Thing",
        "metadata": {"name": "t", "labels": {"a": "b"}, "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {
            "size": 1,
            "port": "http",
            "continue": True,
            "x-extra": 1.5,
            "schema": {"value": "root", "children": [{"value": "leaf", "children": []}]},
            "raw": {"anything": [1, {"x": None}]},
            "inline": {"a": "z"},
            "newerField": "kept",
        },
    }
    thing = from_dict(Thing, wire)
    assert thing.spec.port == "http" and thing.spec.continue_ is True and thing.spec.x_extra_ == 1.5
    assert thing.spec.schema_.children[0].value == "leaf"
    assert thing.metadata.creationTimestamp == "2024-01-01T00:00:00Z"  # strings stay strings
    assert to_dict(thing) == wire


def test_defaults_and_validation() -> None:
    Thing: Any = ModelFactory(DOC).model_for(GVK)
    minimal = Thing(metadata={"name": "m"})
    # apiVersion/kind are filled; schema defaults like metadata: {} are not invented.
    assert to_dict(minimal) == {"apiVersion": "ex.io/v1", "kind": "Thing", "metadata": {"name": "m"}}
    assert Thing(spec={"size": 2, "port": 8080}).spec.port == 8080
    with pytest.raises(pydantic.ValidationError):
        Thing(spec={"port": 1})  # size is required
    with pytest.raises(pydantic.ValidationError):
        Thing(spec={"size": "big"})


def test_unknown_kind() -> None:
    with pytest.raises(LookupError, match="no schema"):
        ModelFactory(DOC).model_for(GroupVersionKind("ex.io", "v1", "Other"))
