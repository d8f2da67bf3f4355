"""Schema markers: ``Annotated`` metadata that adds Kubernetes extensions to a field's schema.

These are the Python counterparts of kubebuilder's ``// +kubebuilder:...`` markers::

    class Port(CamelModel):
        name: str
        port: int = Field(ge=1, le=65535)

    class Spec(CamelModel):
        ports: Annotated[list[Port], ListType("map", keys=("name",))] = []
        labels: Annotated[dict[str, str], MapType("atomic")] = {}
        template: Annotated[dict[str, Any], EmbeddedResource()] = {}
        config: Annotated[Config, Schemaless()]          # stored as-is, not validated by the server
        replicas: Annotated[int, ValidationRule("self % 2 == 1", message="must be odd")] = 1

Markers change only the generated schema, never how pydantic validates in Python. Each checks
its own arguments when it is created, so a typo fails at import time.

:class:`ValidationRule` also decorates a model class, for rules that span several fields::

    @ValidationRule("self.min <= self.max", message="min must not exceed max")
    class Range(CamelModel):
        min: int
        max: int
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, TypeAlias, TypeVar, cast

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic_core import CoreSchema

from kubeop.crd.errors import DeclarationError

__all__ = [
    "QUANTITY_PATTERN",
    "EmbeddedResource",
    "Format",
    "IntOrString",
    "ListType",
    "MapType",
    "PreserveUnknownFields",
    "Quantity",
    "Schema",
    "Schemaless",
    "ValidationRule",
    "class_validation_rules",
]

JsonSchema = dict[str, Any]
T = TypeVar("T", bound=type)

_RULES_ATTR = "__kubeop_validation_rules__"

# The formats the API server validates (apiextensions-apiserver's list); any other format on a
# string is silently stripped by the server, so an explicit Format("...") outside it is an error.
STRING_FORMATS = frozenset(
    {
        "bsonobjectid", "uri", "email", "hostname", "ipv4", "ipv6", "cidr", "mac", "uuid", "uuid3",
        "uuid4", "uuid5", "isbn", "isbn10", "isbn13", "creditcard", "ssn", "hexcolor", "rgbcolor",
        "byte", "password", "date", "duration", "datetime", "date-time", "k8s-short-name",
        "k8s-long-name",
    }
)  # fmt: skip
INTEGER_FORMATS = frozenset({"int32", "int64"})
NUMBER_FORMATS = frozenset({"float", "double"})

_REASONS = ("FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired", "FieldValueDuplicate")


class _Marker:
    """Base of the markers: they change the JSON schema of what they annotate, never validation."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        # pydantic records an annotation's JSON-schema hook in the metadata of the schema it
        # annotates. For a recursive model that schema is shared (a definition-ref), so without
        # this copy a marker on one field would leak into every other use of the model.
        schema = handler(source)
        return cast(CoreSchema, {**schema, "metadata": dict(schema.get("metadata") or {})})


def _add_rule(js: JsonSchema, rule: Mapping[str, Any]) -> None:
    js["x-kubernetes-validations"] = [*js.get("x-kubernetes-validations", ()), dict(rule)]


@dataclass(frozen=True)
class ValidationRule(_Marker):
    """A CEL rule the API server evaluates (``x-kubernetes-validations``).

    ``self`` is the value of the annotated field (or model). ``message`` is shown when the rule
    fails; ``message_expression`` computes one in CEL; ``field_path`` (``.spec.image`` style,
    relative to the annotated node) names the field the error points at; ``reason`` is one of
    FieldValueInvalid (default), FieldValueForbidden, FieldValueRequired, FieldValueDuplicate.
    Rules that use ``oldSelf`` are transition rules and only run on updates, unless
    ``optional_old_self`` is set.

    Caveat: the server estimates each rule's cost from the schema; a rule that iterates a list,
    map or string without ``max_length`` / ``maxItems`` bounds may be rejected as too expensive.
    """

    rule: str
    message: str | None = None
    message_expression: str | None = None
    reason: str | None = None
    field_path: str | None = None
    optional_old_self: bool | None = None

    def __post_init__(self) -> None:
        if not self.rule.strip():
            raise DeclarationError("ValidationRule needs a CEL expression, got an empty rule")
        if self.message is not None and (not self.message.strip() or "\n" in self.message):
            raise DeclarationError(f"ValidationRule message must be one non-empty line, got {self.message!r}")
        if "\n" in self.rule and not self.message and not self.message_expression:
            raise DeclarationError(
                f"ValidationRule {self.rule!r} spans several lines: give it a message= (the server "
                "requires one for multi-line rules)"
            )
        if self.reason is not None and self.reason not in _REASONS:
            raise DeclarationError(
                f"ValidationRule reason {self.reason!r} must be one of {', '.join(_REASONS)}"
            )
        if self.field_path is not None and not re.match(
            r"^(\.[A-Za-z_][A-Za-z0-9_]*|\['[^']*'\]|\[\d+\])+$", self.field_path
        ):
            raise DeclarationError(
                f"ValidationRule field_path {self.field_path!r} must be a path like '.spec.image' "
                "or \".labels['app']\" relative to the annotated field"
            )

    def to_schema(self) -> dict[str, Any]:
        """The entry of ``x-kubernetes-validations`` for this rule."""
        out: dict[str, Any] = {"rule": self.rule}
        if self.message is not None:
            out["message"] = self.message
        if self.message_expression is not None:
            out["messageExpression"] = self.message_expression
        if self.reason is not None:
            out["reason"] = self.reason
        if self.field_path is not None:
            out["fieldPath"] = self.field_path
        if self.optional_old_self is not None:
            out["optionalOldSelf"] = self.optional_old_self
        return out

    def __get_pydantic_json_schema__(self, core: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchema:
        js = dict(handler(core))
        _add_rule(js, self.to_schema())
        return js

    def __call__(self, cls: T) -> T:
        """Use the rule as a class decorator: it then applies to every object of that model."""
        own = cls.__dict__.get(_RULES_ATTR, ())
        setattr(cls, _RULES_ATTR, (self, *own))  # decorators apply bottom-up; keep source order
        return cls


def class_validation_rules(cls: type) -> list[ValidationRule]:
    """The rules declared with ``@ValidationRule(...)`` on ``cls`` and its bases, bases first."""
    rules: list[ValidationRule] = []
    for klass in reversed(cls.__mro__):
        rules.extend(klass.__dict__.get(_RULES_ATTR, ()))
    return rules


@dataclass(frozen=True)
class ListType(_Marker):
    """``x-kubernetes-list-type``: how server-side apply merges a list.

    ``atomic`` (the default) replaces the whole list; ``set`` treats scalar items as a set;
    ``map`` merges object items by ``keys`` (each key must be a required item field or have a
    default). ``set[X]`` fields become ``set`` lists automatically.
    """

    kind: Literal["atomic", "set", "map"]
    keys: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.kind not in ("atomic", "set", "map"):
            raise DeclarationError(f"ListType must be 'atomic', 'set' or 'map', got {self.kind!r}")
        if isinstance(self.keys, str):
            object.__setattr__(self, "keys", (self.keys,))
        if self.kind == "map" and not self.keys:
            raise DeclarationError("ListType('map') needs keys=(...): the item fields that identify an item")
        if self.kind != "map" and self.keys:
            raise DeclarationError(f"ListType({self.kind!r}) takes no keys; keys are for ListType('map')")
        if len(set(self.keys)) != len(self.keys):
            raise DeclarationError(f"ListType('map') keys must be unique, got {self.keys}")

    def __get_pydantic_json_schema__(self, core: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchema:
        js = dict(handler(core))
        js["x-kubernetes-list-type"] = self.kind
        if self.keys:
            js["x-kubernetes-list-map-keys"] = list(self.keys)
        return js


@dataclass(frozen=True)
class MapType(_Marker):
    """``x-kubernetes-map-type``: ``granular`` (merge per key, the default) or ``atomic``."""

    kind: Literal["granular", "atomic"]

    def __post_init__(self) -> None:
        if self.kind not in ("granular", "atomic"):
            raise DeclarationError(f"MapType must be 'granular' or 'atomic', got {self.kind!r}")

    def __get_pydantic_json_schema__(self, core: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchema:
        js = dict(handler(core))
        js["x-kubernetes-map-type"] = self.kind
        return js


@dataclass(frozen=True)
class PreserveUnknownFields(_Marker):
    """Keep fields the schema does not list (``x-kubernetes-preserve-unknown-fields``).

    Known fields are still validated. Models with ``extra="allow"`` and ``dict[str, Any]``
    fields get this automatically.
    """

    def __get_pydantic_json_schema__(self, core: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchema:
        js = dict(handler(core))
        js["x-kubernetes-preserve-unknown-fields"] = True
        return js


@dataclass(frozen=True)
class Schemaless(_Marker):
    """Store the field as-is: no schema below it, the server neither validates nor prunes it.

    The way to keep a recursive model (a tree) or a union the schema cannot express; pydantic
    still validates it in Python.
    """

    def __get_pydantic_json_schema__(self, core: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchema:
        js = handler(core)
        target = handler.resolve_ref_schema(js) if "$ref" in js else js
        out: JsonSchema = {"x-kubernetes-preserve-unknown-fields": True}
        if target.get("type") == "object":
            out["type"] = "object"
        for key in ("description", "default"):
            if key in js:
                out[key] = js[key]
        return out


@dataclass(frozen=True)
class EmbeddedResource(_Marker):
    """The field holds a whole Kubernetes object (apiVersion, kind, metadata are validated).

    Use on ``dict[str, Any]`` (any object, for example a pod template) or on a model with
    ``api_version``/``kind``/``metadata`` fields.
    """

    def __get_pydantic_json_schema__(self, core: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchema:
        js = dict(handler(core))
        js["x-kubernetes-embedded-resource"] = True
        return js


@dataclass(frozen=True)
class Format(_Marker):
    """A format the API server validates: on strings ``hostname``, ``cidr``, ``date-time``,
    ``duration`` ...; on integers ``int32`` / ``int64``; on numbers ``float`` / ``double``.

    A plain ``int`` field has no format (any integer the JSON carries); ``Format("int32")`` is
    what Go's ``int32`` gives, for fields that end up in a 32-bit Kubernetes field, such as a
    Deployment's replicas::

        from typing import Annotated
        from pydantic import Field
        from kubeop.crd import CamelModel, Format

        class MemcachedSpec(CamelModel):
            size: Annotated[int, Format("int32")] = Field(1, ge=1, le=5)
            container_port: Annotated[int, Format("int32")] = 11211
            last_backup: Annotated[str, Format("date-time")] | None = None

    A format the server does not know (it would silently drop it) is refused when the model is
    defined, with the list of those it knows.
    """

    name: str

    def __post_init__(self) -> None:
        if self.name not in STRING_FORMATS | INTEGER_FORMATS | NUMBER_FORMATS:
            raise DeclarationError(
                f"format {self.name!r} is not one the API server validates; choose from "
                f"{', '.join(sorted(STRING_FORMATS | INTEGER_FORMATS | NUMBER_FORMATS))}"
            )

    def __get_pydantic_json_schema__(self, core: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchema:
        js = dict(handler(core))
        js["format"] = self.name
        return js


# Keys a raw Schema(...) may set: value validations and Kubernetes extensions, nothing structural.
RAW_KEYS = frozenset(
    {
        "description", "default", "example", "nullable", "enum", "format", "pattern",
        "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties",
        "x-kubernetes-validations", "x-kubernetes-list-type", "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type", "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource", "x-kubernetes-int-or-string",
    }
)  # fmt: skip


@dataclass(frozen=True)
class Schema(_Marker):
    """Raw OpenAPI keys merged into a field's schema, for what no other marker covers.

    ``Annotated[dict[str, str], Schema({"maxProperties": 16})]``. Only value validations and
    ``x-kubernetes-*`` extensions are accepted; types come from the Python annotation.
    """

    values: Mapping[str, Any]

    def __post_init__(self) -> None:
        unknown = sorted(set(self.values) - RAW_KEYS)
        if unknown:
            raise DeclarationError(
                f"Schema() cannot set {', '.join(unknown)}: only value validations and x-kubernetes-* "
                f"extensions are allowed ({', '.join(sorted(RAW_KEYS))}); types come from the annotation"
            )

    def __get_pydantic_json_schema__(self, core: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchema:
        js = dict(handler(core))
        for key, value in self.values.items():
            if key == "x-kubernetes-validations":
                for rule in value:
                    _add_rule(js, rule)
            else:
                js[key] = value
        return js


# Kubernetes' resource.Quantity ("500m", "1Gi", 2): an int-or-string with the quantity grammar.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

#: An integer or a string (``x-kubernetes-int-or-string``), like a port number or name.
IntOrString: TypeAlias = int | str
#: A Kubernetes quantity such as ``"500m"``, ``"1Gi"`` or ``2``; the server checks the grammar.
Quantity: TypeAlias = Annotated[int | str, Schema({"pattern": QUANTITY_PATTERN})]
