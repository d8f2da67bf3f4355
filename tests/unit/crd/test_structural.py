"""structural_violations: the API server's structural-schema rules, on hand-written schemas."""

from __future__ import annotations

from typing import Any

import pytest

from kubeop.crd import SchemaError, check_structural, structural_violations
from kubeop.crd.structural import pattern_problem, value_problems

OK_ROOT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": {"type": "object", "properties": {"a": {"type": "string"}}},
    },
}


def root_with(spec: dict[str, Any]) -> dict[str, Any]:
    return {**OK_ROOT, "properties": {**OK_ROOT["properties"], "spec": spec}}


def test_a_good_root_has_no_violations() -> None:
    assert structural_violations(OK_ROOT) == []


BAD: list[Any] = [
    pytest.param({"type": "object", "properties": {"a": {}}}, "spec.a: type must not be empty", id="untyped"),
    pytest.param({"$ref": "#/definitions/X"}, "spec: $ref is not supported", id="ref"),
    pytest.param(
        {"type": "object", "definitions": {}}, "spec: definitions is not supported", id="definitions"
    ),
    pytest.param({"type": "null"}, "use nullable: true instead of type null", id="type-null"),
    pytest.param({"type": "tuple"}, "type 'tuple' is not allowed", id="bad-type"),
    pytest.param({"type": "array"}, "spec: an array needs items", id="array-without-items"),
    pytest.param(
        {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "uniqueItems cannot be true",
        id="unique-items",
    ),
    pytest.param(
        {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "additionalProperties": {"type": "string"},
        },
        "additionalProperties and properties are mutually exclusive",
        id="props-and-additional",
    ),
    pytest.param(
        {"type": "object", "anyOf": [{"type": "object"}, {"type": "string"}]},
        "spec.anyOf[0]: type must not be set inside anyOf",
        id="typed-anyof",
    ),
    pytest.param(
        {"type": "object", "oneOf": [{"properties": {"metadata": {}}}]},
        "spec.oneOf[0].metadata: must not be specified in a nested context",
        id="nested-metadata",
    ),
    pytest.param(
        {"type": "string", "not": {"description": "no"}},
        "spec.not: description must not be set",
        id="described-not",
    ),
    pytest.param(
        {"type": "integer", "x-kubernetes-int-or-string": True},
        "an int-or-string node must have no type",
        id="typed-int-or-string",
    ),
    pytest.param(
        {"x-kubernetes-int-or-string": True, "x-kubernetes-preserve-unknown-fields": True},
        "must be false with x-kubernetes-int-or-string",
        id="int-or-string-preserve",
    ),
    pytest.param(
        {"type": "string", "x-kubernetes-embedded-resource": True},
        "type must be object with x-kubernetes-embedded-resource",
        id="embedded-string",
    ),
    pytest.param(
        {"type": "object", "x-kubernetes-embedded-resource": True},
        "an embedded resource needs properties or x-kubernetes-preserve-unknown-fields",
        id="embedded-empty",
    ),
    pytest.param(
        {"type": "object", "x-kubernetes-preserve-unknown-fields": False},
        "x-kubernetes-preserve-unknown-fields must be true or absent",
        id="preserve-false",
    ),
    pytest.param(
        {"type": "array", "items": {"type": "string"}, "x-kubernetes-map-type": "atomic"},
        "type must be object with x-kubernetes-map-type",
        id="map-type-on-array",
    ),
    pytest.param(
        {"type": "object", "x-kubernetes-map-type": "merge"},
        "x-kubernetes-map-type must be granular or atomic",
        id="bad-map-type",
    ),
    pytest.param(
        {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "bag"},
        "x-kubernetes-list-type must be atomic, set or map",
        id="bad-list-type",
    ),
    pytest.param(
        {"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "set"},
        "items of a set must be scalars",
        id="set-of-objects",
    ),
    pytest.param(
        {"type": "array", "items": {"type": "string", "nullable": True}, "x-kubernetes-list-type": "set"},
        "items cannot be nullable in a list of type set",
        id="set-nullable-items",
    ),
    pytest.param(
        {"type": "array", "items": {"type": "object"}, "x-kubernetes-list-type": "map"},
        "x-kubernetes-list-type map needs x-kubernetes-list-map-keys",
        id="map-without-keys",
    ),
    pytest.param(
        {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-map-keys": ["a"]},
        "x-kubernetes-list-map-keys needs x-kubernetes-list-type: map",
        id="keys-without-map",
    ),
    pytest.param(
        {
            "type": "array",
            "items": {"type": "object", "properties": {"k": {"type": "object"}}, "required": ["k"]},
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["k"],
        },
        "map key 'k' must be a scalar",
        id="object-map-key",
    ),
    pytest.param(
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"k": {"type": "string", "nullable": True}},
                "required": ["k"],
            },
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["k"],
        },
        "map key 'k' cannot be nullable",
        id="nullable-map-key",
    ),
    pytest.param(
        {"type": "string", "x-kubernetes-validations": [{"rule": ""}]},
        "needs a non-empty rule",
        id="empty-rule",
    ),
    pytest.param(
        {"type": "string", "x-kubernetes-validations": [{"rule": "a\n|| b"}]},
        "a multi-line rule needs a message",
        id="multiline-rule",
    ),
    pytest.param(
        {"type": "string", "x-kubernetes-validations": [{"rule": "true", "msg": "x"}]},
        "unknown keys ['msg']",
        id="rule-typo",
    ),
    pytest.param({"type": "string", "pattern": "(?<=a)b"}, "lookaround assertions", id="lookbehind"),
    pytest.param({"type": "string", "pattern": "(a)\\1"}, "back-references", id="backref"),
    pytest.param({"type": "string", "pattern": "a++"}, "possessive quantifiers", id="possessive"),
    pytest.param({"type": "string", "pattern": "a\\Z"}, r"\Z", id="big-z"),
    pytest.param({"type": "string", "pattern": "(a"}, "is not a regular expression", id="broken-regex"),
    pytest.param(
        {"type": "string", "propertyNames": {}}, "'propertyNames' is not an OpenAPI v3", id="unknown-key"
    ),
    pytest.param(
        {"type": "integer", "default": "1"},
        "default '1' is invalid: must be of type integer",
        id="default-type",
    ),
    pytest.param(
        {"type": "object", "properties": {"a": {"type": "string"}}, "default": {"b": 1}},
        "unknown field 'b' would be pruned",
        id="default-pruned",
    ),
    pytest.param(
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "default": {}},
        "missing required field 'a'",
        id="default-missing-required",
    ),
    pytest.param(
        {"type": "string", "enum": ["a"], "default": "b"}, "must be one of ['a']", id="default-enum"
    ),
    pytest.param({"type": "string", "default": None}, "null is not allowed", id="default-null"),
]


@pytest.mark.parametrize(("spec", "message"), BAD)
def test_each_rule_is_reported_with_its_path(spec: dict[str, Any], message: str) -> None:
    problems = structural_violations(root_with(spec))
    assert any(message in p for p in problems), problems


@pytest.mark.parametrize(
    ("root", "message"),
    [
        pytest.param({**OK_ROOT, "type": "string"}, "type must be object at the root", id="root-type"),
        pytest.param(
            {**OK_ROOT, "nullable": True}, "nullable cannot be true at the root", id="root-nullable"
        ),
        pytest.param(
            {"type": "object", "additionalProperties": {"type": "string"}},
            "additionalProperties must not be used at the root",
            id="root-additional",
        ),
        pytest.param(
            {"type": "object", "properties": {"metadata": {"type": "object", "properties": {"labels": {}}}}},
            "metadata: must not specify anything other than name and generateName",
            id="metadata-labels",
        ),
        pytest.param(
            {"type": "object", "properties": {"kind": {"type": "integer"}}},
            "openAPIV3Schema.kind: type must be string",
            id="kind-type",
        ),
        pytest.param(
            {"type": "object", "properties": {"apiVersion": {"type": "string", "default": "v1"}}},
            "defaults are not allowed in metadata, apiVersion or kind",
            id="apiversion-default",
        ),
    ],
)
def test_root_rules(root: dict[str, Any], message: str) -> None:
    problems = structural_violations(root)
    assert any(message in p for p in problems), problems


def test_metadata_may_constrain_name_and_generate_name() -> None:
    root = {
        "type": "object",
        "properties": {
            "metadata": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "maxLength": 20},
                    "generateName": {"type": "string"},
                },
            }
        },
    }
    assert structural_violations(root) == []


def test_int_or_string_pattern_and_untyped_preserve_are_allowed() -> None:
    spec = {
        "type": "object",
        "properties": {
            "port": {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "anything": {"x-kubernetes-preserve-unknown-fields": True},
            "tagged": {"type": "string", "anyOf": [{"pattern": "^a"}, {"maxLength": 3}]},
        },
    }
    assert structural_violations(root_with(spec)) == []


def test_check_structural_raises_all_problems_at_once() -> None:
    with pytest.raises(SchemaError) as info:
        check_structural(
            root_with({"type": "object", "properties": {"a": {}, "b": {"type": "array"}}}), "Thing"
        )
    message = str(info.value)
    assert "Thing would be rejected by the API server" in message
    assert "Thing.spec.a: type must not be empty" in message
    assert "Thing.spec.b: an array needs items" in message


@pytest.mark.parametrize(
    ("schema", "value", "problems"),
    [
        ({"type": "integer", "minimum": 0, "exclusiveMinimum": True}, 0, ["must be > 0"]),
        ({"type": "integer", "maximum": 3}, 4, ["must be <= 3"]),
        ({"type": "number", "multipleOf": 0.5}, 1.5, []),
        ({"type": "number", "multipleOf": 0.5}, 1.2, ["must be a multiple of 0.5"]),
        ({"type": "boolean"}, 1, ["must be of type boolean, got int"]),
        ({"type": "integer"}, True, ["must be of type integer, got bool"]),
        ({"type": "string", "minLength": 2}, "a", ["must be at least 2 characters long"]),
        (
            {"type": "array", "items": {"type": "string"}, "maxItems": 1},
            ["a", 1],
            [
                "must have at most 1 items",
                "[1]: must be of type string, got int",
            ],
        ),
        (
            {"type": "object", "additionalProperties": {"type": "integer"}},
            {"a": "x"},
            [".a: must be of type integer, got str"],
        ),
        ({"type": "object", "x-kubernetes-preserve-unknown-fields": True}, {"any": {"thing": 1}}, []),
        ({"x-kubernetes-int-or-string": True}, 1.5, ["must be an integer or a string"]),
        ({"type": "string", "nullable": True}, None, []),
    ],
)
def test_value_problems(schema: dict[str, Any], value: Any, problems: list[str]) -> None:
    assert value_problems(schema, value) == problems


def test_pattern_problem_accepts_re2_syntax() -> None:
    for ok in (r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", r"(?P<name>a)", r"\d+\.\d+", r"a{2,3}?", r"(?i)abc"):
        assert pattern_problem(ok) is None, ok
