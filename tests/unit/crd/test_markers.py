"""Markers check their arguments when created, and never change validation in Python."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from kubeop.crd import (
    DeclarationError,
    Format,
    ListType,
    MapType,
    Schema,
    Schemaless,
    ValidationRule,
    openapi_schema,
)
from kubeop.crd.markers import class_validation_rules


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ValidationRule(""), "needs a CEL expression"),
        (lambda: ValidationRule("true", message=""), "message must be one non-empty line"),
        (lambda: ValidationRule("true", message="a\nb"), "message must be one non-empty line"),
        (lambda: ValidationRule("a ||\nb"), "spans several lines: give it a message="),
        (lambda: ValidationRule("true", reason="Bad"), "reason 'Bad' must be one of FieldValueInvalid"),
        (lambda: ValidationRule("true", field_path="spec.x"), "field_path 'spec.x' must be a path like"),
        (lambda: ListType("bag"), "ListType must be 'atomic', 'set' or 'map'"),  # type: ignore[arg-type]
        (lambda: ListType("map"), r"ListType\('map'\) needs keys="),
        (lambda: ListType("set", keys=("a",)), r"ListType\('set'\) takes no keys"),
        (lambda: ListType("map", keys=("a", "a")), "keys must be unique"),
        (lambda: MapType("merge"), "MapType must be 'granular' or 'atomic'"),  # type: ignore[arg-type]
        (lambda: Format("time"), "format 'time' is not one the API server validates"),
        (lambda: Schema({"type": "string"}), "Schema\\(\\) cannot set type"),
        (lambda: Schema({"$ref": "#/x"}), "cannot set \\$ref"),
    ],
)
def test_bad_marker_arguments_fail_at_creation(make: Any, message: str) -> None:
    with pytest.raises(DeclarationError, match=message):
        make()


def test_list_type_accepts_a_single_key_string() -> None:
    assert ListType("map", keys="name").keys == ("name",)  # type: ignore[arg-type]


def test_validation_rule_full_form() -> None:
    rule = ValidationRule(
        "self.x == oldSelf.x",
        message="x is immutable",
        message_expression="'x was ' + oldSelf.x",
        reason="FieldValueForbidden",
        field_path=".x",
        optional_old_self=True,
    )
    assert rule.to_schema() == {
        "rule": "self.x == oldSelf.x",
        "message": "x is immutable",
        "messageExpression": "'x was ' + oldSelf.x",
        "reason": "FieldValueForbidden",
        "fieldPath": ".x",
        "optionalOldSelf": True,
    }


def test_rule_decorators_keep_source_order_and_inherit() -> None:
    @ValidationRule("a")
    @ValidationRule("b")
    class Base(BaseModel):
        x: int = 0

    @ValidationRule("c")
    class Child(Base):
        pass

    assert [r.rule for r in class_validation_rules(Base)] == ["a", "b"]
    assert [r.rule for r in class_validation_rules(Child)] == ["a", "b", "c"]


def test_markers_do_not_change_python_validation() -> None:
    class M(BaseModel):
        n: Annotated[int, ValidationRule("self > 100"), Schema({"maximum": 1})] = 0

    assert M(n=5).n == 5  # the server checks these, pydantic does not


def test_a_marker_on_one_field_does_not_leak_into_other_uses_of_a_recursive_model() -> None:
    class Node(BaseModel):
        children: list[Node] = []

    class Holder(BaseModel):
        tree: Annotated[Node, Schemaless()]

    class Plain(BaseModel):
        tree: Node

    assert openapi_schema(Holder)["properties"]["tree"] == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
    }
    assert "$ref" in Plain.model_json_schema()["properties"]["tree"]
