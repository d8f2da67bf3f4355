"""openapi_schema: each Python construct -> its structural schema fragment, and the constructs
a CRD cannot express -> a SchemaError naming model and field.

Every model in ``VALID`` is also installed on the real API server by
tests/e2e/crd/test_generated_crds_e2e.py, so "the server accepts what we generate" is checked,
not assumed. Keep invalid models inside test functions (or in ``INVALID``).
"""

from __future__ import annotations

import datetime
import enum
import ipaddress
import uuid
from collections.abc import Callable
from typing import Annotated, Any, Literal

import pytest
from pydantic import AnyUrl, BaseModel, ConfigDict, Field, create_model

from kubeop.crd import (
    CamelModel,
    EmbeddedResource,
    Format,
    IntOrString,
    ListType,
    MapType,
    PreserveUnknownFields,
    Quantity,
    Schema,
    SchemaError,
    Schemaless,
    ValidationRule,
    openapi_schema,
    structural_violations,
)


class Color(enum.Enum):
    """A color."""

    RED = "red"
    BLUE = "blue"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Port(BaseModel):
    name: str
    port: int = Field(ge=1, le=65535)
    protocol: Literal["TCP", "UDP"] = "TCP"


PORT = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        "protocol": {"type": "string", "enum": ["TCP", "UDP"], "default": "TCP"},
    },
    "required": ["name", "port"],
}


class CamelSpec(CamelModel):
    cron_spec: str
    max_retries: int = 3


class Aliased(BaseModel):
    the_field: str = Field(alias="renamedField")


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    known: int = 0


class Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")
    known: int = 0


class Tree(BaseModel):
    value: int
    children: list[Tree] = []


class Documented(BaseModel):
    """What a documented model says about itself."""

    size: Annotated[int, Field(description="how big")] = 1


@ValidationRule("self.low <= self.high", message="low must not exceed high")
class Range(BaseModel):
    low: int
    high: int


@ValidationRule("self.high - self.low < 100", message="range too wide")
class NarrowRange(Range):
    pass


def case(annotation: Any, default: Any = ...) -> type[BaseModel]:
    """A model with one field ``x`` of the given type (and default)."""
    return create_model("Case", x=(annotation, default))


def x_of(model: type[BaseModel]) -> dict[str, Any]:
    return dict(openapi_schema(model)["properties"]["x"])


_P = pytest.param
VALID: list[Any] = [
    _P(case(str), {"type": "string"}, id="str"),
    _P(case(int), {"type": "integer"}, id="int"),
    _P(case(float), {"type": "number"}, id="float"),
    _P(case(bool), {"type": "boolean"}, id="bool"),
    _P(case(int, 3), {"type": "integer", "default": 3}, id="default"),
    _P(case(bool, False), {"type": "boolean", "default": False}, id="default-false"),
    _P(case(int | None, None), {"type": "integer", "nullable": True}, id="optional"),
    _P(case(int | None, 5), {"type": "integer", "default": 5, "nullable": True}, id="optional-with-default"),
    _P(case(Literal["a", "b"]), {"type": "string", "enum": ["a", "b"]}, id="literal"),
    _P(case(Literal["only"]), {"type": "string", "enum": ["only"]}, id="literal-one-value"),
    _P(case(Literal[1, 2]), {"type": "integer", "enum": [1, 2]}, id="literal-int"),
    _P(
        case(Literal["a", None], None), {"type": "string", "enum": ["a"], "nullable": True}, id="literal-none"
    ),
    _P(case(Color), {"description": "A color.", "type": "string", "enum": ["red", "blue"]}, id="enum"),
    _P(case(Level, Level.LOW), {"type": "integer", "enum": [1, 2], "default": 1}, id="int-enum"),
    _P(
        case(Annotated[int, Field(ge=0, le=10)]), {"type": "integer", "minimum": 0, "maximum": 10}, id="ge-le"
    ),
    _P(
        case(Annotated[float, Field(gt=0, lt=1)]),
        {"type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1, "exclusiveMaximum": True},
        id="gt-lt",
    ),
    _P(
        case(Annotated[int, Field(ge=5, gt=1)]),
        {"type": "integer", "minimum": 5},
        id="ge-stronger-than-gt",
    ),
    _P(case(Annotated[int, Field(multiple_of=5)]), {"type": "integer", "multipleOf": 5}, id="multiple-of"),
    _P(
        case(Annotated[str, Field(min_length=1, max_length=63)]),
        {"type": "string", "minLength": 1, "maxLength": 63},
        id="lengths",
    ),
    _P(
        case(Annotated[str, Field(pattern=r"^[a-z]+$")]),
        {"type": "string", "pattern": "^[a-z]+$"},
        id="pattern",
    ),
    _P(case(datetime.datetime), {"type": "string", "format": "date-time"}, id="datetime"),
    _P(case(datetime.date), {"type": "string", "format": "date"}, id="date"),
    _P(case(uuid.UUID), {"type": "string", "format": "uuid"}, id="uuid"),
    _P(case(AnyUrl), {"type": "string", "format": "uri", "minLength": 1}, id="url"),
    _P(case(ipaddress.IPv4Address), {"type": "string", "format": "ipv4"}, id="ipv4"),
    _P(case(datetime.timedelta), {"type": "string"}, id="timedelta-no-go-duration-format"),
    _P(case(bytes), {"type": "string"}, id="bytes-no-binary-format"),
    _P(case(datetime.time), {"type": "string"}, id="time-unknown-format-dropped"),
    _P(
        case(Annotated[str, Format("hostname")]), {"type": "string", "format": "hostname"}, id="format-marker"
    ),
    _P(case(Annotated[int, Format("int32")]), {"type": "integer", "format": "int32"}, id="format-int32"),
    _P(
        case(int | str),
        {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True},
        id="int-or-string",
    ),
    _P(
        case(IntOrString | None, None),
        {
            "nullable": True,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
        },
        id="int-or-string-optional",
    ),
    _P(case(int | float), {"type": "number"}, id="int-or-float"),
    _P(case(list[str]), {"type": "array", "items": {"type": "string"}}, id="list"),
    _P(
        case(Annotated[list[int], Field(min_length=1, max_length=3)]),
        {"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3},
        id="list-bounds",
    ),
    _P(
        case(list[int | None]),
        {"type": "array", "items": {"type": "integer", "nullable": True}},
        id="list-nullable-items",
    ),
    _P(
        case(set[str], set()),
        {"type": "array", "default": [], "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        id="set",
    ),
    _P(
        case(frozenset[int]),
        {"type": "array", "items": {"type": "integer"}, "x-kubernetes-list-type": "set"},
        id="frozenset",
    ),
    _P(
        case(Annotated[list[str], ListType("atomic")]),
        {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "atomic"},
        id="list-atomic",
    ),
    _P(
        case(Annotated[list[Port], ListType("map", keys=("name",))]),
        {
            "type": "array",
            "items": PORT,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
        id="list-map",
    ),
    _P(
        case(Annotated[list[Port], ListType("map", keys=("name", "protocol"))]),
        {
            "type": "array",
            "items": PORT,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name", "protocol"],
        },
        id="list-map-defaulted-key",
    ),
    _P(
        case(dict[str, int]),
        {"type": "object", "additionalProperties": {"type": "integer"}},
        id="dict",
    ),
    _P(
        case(dict[str, list[Port]]),
        {"type": "object", "additionalProperties": {"type": "array", "items": PORT}},
        id="dict-of-models",
    ),
    _P(
        case(dict[str, Any], {}),
        {"type": "object", "default": {}, "x-kubernetes-preserve-unknown-fields": True},
        id="dict-any",
    ),
    _P(
        case(Annotated[dict[str, str], MapType("atomic")]),
        {"type": "object", "additionalProperties": {"type": "string"}, "x-kubernetes-map-type": "atomic"},
        id="map-atomic",
    ),
    _P(case(Any, None), {"x-kubernetes-preserve-unknown-fields": True}, id="any"),
    _P(
        case(list[Any]),
        {"type": "array", "items": {"x-kubernetes-preserve-unknown-fields": True}},
        id="list-any",
    ),
    _P(case(Port), PORT, id="model"),
    _P(case(Port | None, None), {**PORT, "nullable": True}, id="model-optional"),
    _P(
        case(Port, Port(name="http", port=80)),
        {**PORT, "default": {"name": "http", "port": 80, "protocol": "TCP"}},
        id="model-default",
    ),
    _P(
        case(CamelSpec),
        {
            "type": "object",
            "properties": {"cronSpec": {"type": "string"}, "maxRetries": {"type": "integer", "default": 3}},
            "required": ["cronSpec"],
        },
        id="camel-case-aliases",
    ),
    _P(
        case(CamelSpec, CamelSpec(cron_spec="* * * * *")),
        {
            "type": "object",
            "default": {"cronSpec": "* * * * *", "maxRetries": 3},
            "properties": {"cronSpec": {"type": "string"}, "maxRetries": {"type": "integer", "default": 3}},
            "required": ["cronSpec"],
        },
        id="camel-case-default",
    ),
    _P(
        case(Aliased),
        {"type": "object", "properties": {"renamedField": {"type": "string"}}, "required": ["renamedField"]},
        id="explicit-alias",
    ),
    _P(
        case(Open),
        {
            "type": "object",
            "properties": {"known": {"type": "integer", "default": 0}},
            "x-kubernetes-preserve-unknown-fields": True,
        },
        id="extra-allow",
    ),
    _P(
        case(Closed),
        {"type": "object", "properties": {"known": {"type": "integer", "default": 0}}},
        id="extra-forbid",
    ),
    _P(
        case(Annotated[Port, PreserveUnknownFields()]),
        {**PORT, "x-kubernetes-preserve-unknown-fields": True},
        id="preserve-unknown-fields",
    ),
    _P(
        case(Annotated[Tree, Schemaless()]),
        {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        id="schemaless-recursive-model",
    ),
    _P(
        case(Annotated[int | list[str], Schemaless()]),
        {"x-kubernetes-preserve-unknown-fields": True},
        id="schemaless-union",
    ),
    _P(
        case(Annotated[dict[str, Any], EmbeddedResource()]),
        {
            "type": "object",
            "x-kubernetes-embedded-resource": True,
            "x-kubernetes-preserve-unknown-fields": True,
        },
        id="embedded-resource",
    ),
    _P(
        case(Annotated[int, ValidationRule("self % 2 == 1", message="must be odd")]),
        {
            "type": "integer",
            "x-kubernetes-validations": [{"rule": "self % 2 == 1", "message": "must be odd"}],
        },
        id="cel-on-field",
    ),
    _P(
        case(
            Annotated[
                str,
                ValidationRule(
                    "self == oldSelf",
                    message_expression="'x is immutable, was ' + oldSelf",
                    reason="FieldValueForbidden",
                ),
            ]
        ),
        {
            "type": "string",
            "x-kubernetes-validations": [
                {
                    "rule": "self == oldSelf",
                    "messageExpression": "'x is immutable, was ' + oldSelf",
                    "reason": "FieldValueForbidden",
                }
            ],
        },
        id="cel-transition-rule",
    ),
    _P(
        case(Range),
        {
            "type": "object",
            "properties": {"low": {"type": "integer"}, "high": {"type": "integer"}},
            "required": ["low", "high"],
            "x-kubernetes-validations": [
                {"rule": "self.low <= self.high", "message": "low must not exceed high"}
            ],
        },
        id="cel-on-model",
    ),
    _P(
        case(Annotated[NarrowRange, ValidationRule("self.low >= 0", field_path=".low")]),
        {
            "type": "object",
            "properties": {"low": {"type": "integer"}, "high": {"type": "integer"}},
            "required": ["low", "high"],
            "x-kubernetes-validations": [
                {"rule": "self.low <= self.high", "message": "low must not exceed high"},
                {"rule": "self.high - self.low < 100", "message": "range too wide"},
                {"rule": "self.low >= 0", "fieldPath": ".low"},
            ],
        },
        id="cel-inherited-and-on-field",
    ),
    _P(
        case(Annotated[dict[str, str], Schema({"maxProperties": 3})]),
        {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 3},
        id="raw-schema",
    ),
    _P(
        case(Quantity, "1Gi"),
        {
            "default": "1Gi",
            "pattern": Quantity.__metadata__[0].values["pattern"],
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True,
        },
        id="quantity",
    ),
    _P(
        case(Annotated[str, Field(description="the image")]),
        {"description": "the image", "type": "string"},
        id="desc",
    ),
    _P(
        case(Documented),
        {
            "description": "What a documented model says about itself.",
            "type": "object",
            "properties": {"size": {"description": "how big", "type": "integer", "default": 1}},
        },
        id="docstring",
    ),
]


@pytest.mark.parametrize(("model", "expected"), VALID)
def test_construct_to_schema_fragment(model: type[BaseModel], expected: dict[str, Any]) -> None:
    assert x_of(model) == expected


@pytest.mark.parametrize(("model", "expected"), VALID)
def test_every_valid_fragment_is_structural(model: type[BaseModel], expected: dict[str, Any]) -> None:
    assert structural_violations(openapi_schema(model), root=False) == []


def test_required_follows_defaults_and_nested_models_are_inlined() -> None:
    class Spec(BaseModel):
        a: str
        b: int = 1
        c: Port | None = None
        d: list[Port] = []

    schema = openapi_schema(Spec)
    assert schema["required"] == ["a"]
    assert "$ref" not in str(schema) and "$defs" not in schema
    assert schema["properties"]["d"]["items"] == PORT


def test_keys_come_in_a_readable_order() -> None:
    frag = x_of(case(Annotated[int, Field(ge=0, description="n")], 1))
    assert list(frag) == ["description", "type", "default", "minimum"]


def test_same_model_used_twice_is_not_recursion() -> None:
    class Pair(BaseModel):
        a: Port
        b: Port

    props = openapi_schema(Pair)["properties"]
    assert props["a"] == props["b"] == PORT


class Model1(BaseModel):
    a: int


class Model2(BaseModel):
    b: str


class Cat(BaseModel):
    kind: Literal["cat"]


class Dog(BaseModel):
    kind: Literal["dog"]


class FrozenPort(BaseModel):
    model_config = ConfigDict(frozen=True)
    name: str


class TypedExtra(BaseModel):
    model_config = ConfigDict(extra="allow")
    __pydantic_extra__: dict[str, int] = Field(init=False)
    a: int = 0


class PythonRegex(BaseModel):
    model_config = ConfigDict(regex_engine="python-re")
    x: str = Field(pattern=r"^(?!admin)[a-z]+$")


INVALID: list[Any] = [
    _P(
        case(Model1 | Model2),
        r"Case\.x: a union of different types \(Model1 \| Model2\)",
        id="union-of-models",
    ),
    _P(
        case(str | list[str]),
        r"Case\.x: a union of different types \(string \| list\[string\]\)",
        id="union-str-list",
    ),
    _P(
        case(Annotated[str, Field(max_length=3)] | int),
        r"union of different types",
        id="constrained-int-or-string",
    ),
    _P(
        case(Annotated[Cat | Dog, Field(discriminator="kind")]),
        r"Case\.x: a discriminated union cannot be expressed",
        id="discriminated-union",
    ),
    _P(
        case(Tree),
        r"Case\.x\.children\[\*\]: model Tree is recursive .* Schemaless\(\)",
        id="recursive-model",
    ),
    _P(case(tuple[int, str]), r"Case\.x: tuples .* use list\[X\] or a model", id="tuple"),
    _P(case(dict[Literal["a", "b"], int]), r"Case\.x: constrained dict keys", id="literal-dict-keys"),
    _P(case(Literal["a", 1]), r"Case\.x: enum values \['a', 1\] mix types", id="mixed-literal"),
    _P(case(None, None), r"Case\.x: the field can only be null", id="none-only"),
    _P(case(TypedExtra), r"Case\.x: typed extra fields", id="typed-extra"),
    _P(case(set[FrozenPort]), r"Case\.x: a set of objects", id="set-of-models"),
    _P(case(PythonRegex), r"Case\.x\.x: pattern .* lookaround .*\(Go RE2\)", id="lookahead-pattern"),
    _P(
        case(Annotated[int, Field(le=10)], 20),
        r"Case\.x: default 20 is invalid: must be <= 10",
        id="bad-default",
    ),
    _P(
        case(Annotated[str, Field(pattern="^a")], "b"),
        r"Case\.x: default 'b' is invalid: must match '\^a'",
        id="default-against-pattern",
    ),
    _P(
        case(Annotated[list[Port], ListType("map", keys=("host",))]),
        r"Case\.x: map key 'host' is not a property of the items",
        id="list-map-unknown-key",
    ),
    _P(
        case(Annotated[list[Model1 | None], ListType("map", keys=("a",))]),
        r"Case\.x\[\*\]: items cannot be nullable",
        id="list-map-nullable-items",
    ),
    _P(
        case(
            Annotated[
                list[Port], ListType("map", keys=("port",)), Schema({"x-kubernetes-map-type": "atomic"})
            ]
        ),
        r"Case\.x: x-kubernetes-map-type applies to object fields, not to array ones",
        id="map-type-on-list",
    ),
    _P(case(Callable[[], int]), r"cannot generate a schema for Case: .*Callable", id="callable"),
]


@pytest.mark.parametrize(("model", "message"), INVALID)
def test_inexpressible_constructs_are_clear_errors(model: type[BaseModel], message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        openapi_schema(model)


def test_list_map_key_must_be_required_or_defaulted() -> None:
    class Item(BaseModel):
        name: str | None = None

    with pytest.raises(SchemaError, match="map key 'name' must be required or have a default"):
        openapi_schema(case(Annotated[list[Item], ListType("map", keys=("name",))]))


def test_errors_name_the_nested_path_with_json_names() -> None:
    class Inner(CamelModel):
        the_target: Model1 | Model2

    class Outer(CamelModel):
        inner_list: list[Inner]

    with pytest.raises(SchemaError, match=r"for Outer: Outer\.innerList\[\*\]\.theTarget: a union"):
        openapi_schema(Outer)


def test_mutually_recursive_models_are_caught() -> None:
    class A(BaseModel):
        b: B | None = None

    class B(BaseModel):
        a: A | None = None

    A.model_rebuild()
    with pytest.raises(SchemaError, match=r"A\.b\.a: model A is recursive"):
        openapi_schema(A)
