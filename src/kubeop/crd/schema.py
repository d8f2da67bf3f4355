"""Structural OpenAPI v3 schemas from pydantic models.

:func:`openapi_schema` turns a model into the schema a CRD version carries; :func:`resource_schema`
adds the object's root (``apiVersion``, ``kind``, ``metadata``) for a CustomResource.

pydantic writes JSON Schema 2020-12 (``$defs`` and ``$ref``, ``anyOf`` with ``null`` for
``Optional``, numeric ``exclusiveMinimum``); the API server wants OpenAPI v3 in *structural*
form: every node typed, no references, no type inside ``anyOf``/``oneOf``. The conversion:

- ``$ref`` is inlined (sibling keys such as ``default`` and markers win over the definition);
- ``X | None`` becomes ``X`` with ``nullable: true``; ``int | str`` becomes int-or-string
  (``x-kubernetes-int-or-string``); ``int | float`` becomes ``number``;
- ``Literal`` and ``Enum`` become ``enum``; ``gt``/``lt`` become ``exclusiveMinimum: true`` etc.;
- ``set[X]`` becomes a list with ``x-kubernetes-list-type: set`` (``uniqueItems`` is forbidden);
- ``dict[str, Any]``, ``Any`` and ``extra="allow"`` models preserve unknown fields;
- formats the server does not know are dropped (it would strip them anyway), and ``timedelta``
  is a plain string (pydantic writes ISO 8601, which the server's Go-style ``duration`` rejects);
- ``title``, ``examples``, ``readOnly``, ``writeOnly`` and ``deprecated`` are dropped.

What the server would reject is a :class:`~kubeop.crd.errors.SchemaError` naming the model and
field: a union of different types, a recursive model, a tuple, constrained dict keys, a regular
expression Go cannot compile, a default that does not match its own schema. The result is
checked once more with :func:`~kubeop.crd.structural.check_structural`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.errors import PydanticInvalidForJsonSchema, PydanticUserError
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from kubeop.crd.errors import SchemaError
from kubeop.crd.markers import INTEGER_FORMATS, NUMBER_FORMATS, STRING_FORMATS, class_validation_rules
from kubeop.crd.names import class_name
from kubeop.crd.structural import check_structural, pattern_problem

__all__ = ["openapi_schema", "resource_schema"]

Node = dict[str, Any]

_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
_DROPPED = frozenset({"title", "examples", "readOnly", "writeOnly", "deprecated", "$comment", "$schema"})
_COMMON = ("description", "default", "enum", "nullable", "x-kubernetes-validations", "example")
_STRING = ("pattern", "minLength", "maxLength", "format")
_NUMBER = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "format")
_BY_TYPE: dict[str, tuple[str, ...]] = {
    "string": _STRING,
    "integer": _NUMBER,
    "number": _NUMBER,
    "boolean": (),
    "array": (
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
    ),
    "object": (
        "properties",
        "required",
        "additionalProperties",
        "minProperties",
        "maxProperties",
        "propertyNames",
        "x-kubernetes-map-type",
        "x-kubernetes-embedded-resource",
    ),
}
_EXTENSIONS = ("x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string")
_KNOWN_STRING_FORMATS = frozenset(f.replace("-", "") for f in STRING_FORMATS)

# Output key order, for manifests that read like hand-written ones.
_ORDER = {
    k: i
    for i, k in enumerate(
        (
            "description", "type", "format", "enum", "default", "nullable", "pattern", "minLength",
            "maxLength", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf",
            "items", "minItems", "maxItems", "properties", "required", "additionalProperties",
            "minProperties", "maxProperties", "anyOf", "x-kubernetes-int-or-string",
            "x-kubernetes-embedded-resource", "x-kubernetes-preserve-unknown-fields",
            "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
            "x-kubernetes-validations",
        )
    )
}  # fmt: skip


class _Generator(GenerateJsonSchema):
    """pydantic's generator plus class-level ValidationRules and a plain-string timedelta."""

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        js = super().model_schema(schema)
        rules = [r.to_schema() for r in class_validation_rules(schema["cls"])]
        if rules:
            js["x-kubernetes-validations"] = [*js.get("x-kubernetes-validations", ()), *rules]
        return js

    def timedelta_schema(self, schema: core_schema.TimedeltaSchema) -> JsonSchemaValue:
        return {"type": "string"}


def _pydantic_schema(model: type[BaseModel]) -> Node:
    try:
        return model.model_json_schema(by_alias=True, mode="validation", schema_generator=_Generator)
    except PydanticInvalidForJsonSchema as e:
        raise SchemaError(f"cannot generate a schema for {class_name(model)}: {e}") from None
    except PydanticUserError as e:
        raise SchemaError(f"cannot generate a schema for {class_name(model)}: {e}") from None


def openapi_schema(model: type[BaseModel]) -> Node:
    """The structural schema of one pydantic model's objects (the model's own node).

    Raises :class:`~kubeop.crd.errors.SchemaError` for constructs a CRD cannot express.
    """
    raw = _pydantic_schema(model)
    name = class_name(model)
    schema = _Converter(name, raw.pop("$defs", {})).convert(raw, name)
    check_structural(schema, name, root=False)
    return schema


def resource_schema(model: type[BaseModel], validations: list[dict[str, Any]] | None = None) -> Node:
    """The ``openAPIV3Schema`` of a resource: ``apiVersion``, ``kind``, ``metadata`` and the fields.

    ``metadata`` is always the bare ``{type: object}`` the server requires at the root (it
    validates ObjectMeta itself); ``validations`` are extra root-level CEL rules.
    """
    name = class_name(model)
    raw = _pydantic_schema(model)
    defs = raw.pop("$defs", {})
    if "$ref" in raw:  # pydantic refers to the root only when the model contains itself
        raise SchemaError(
            f"cannot generate a CRD schema for {name}: it contains itself, which a structural schema "
            "cannot express; break the cycle, or annotate the field with Schemaless()"
        )
    props = dict(raw.get("properties", {}))
    for reserved in ("apiVersion", "kind", "metadata"):
        props.pop(reserved, None)
    raw["properties"] = props
    raw["required"] = [r for r in raw.get("required", ()) if r in props]
    if not raw["required"]:
        del raw["required"]
    if validations:
        raw["x-kubernetes-validations"] = [*validations, *raw.get("x-kubernetes-validations", ())]
    body = _Converter(name, defs).convert(raw, name)
    root: Node = {}
    if "description" in body:
        root["description"] = body["description"]
    root["type"] = "object"
    root["properties"] = {
        "apiVersion": {
            "description": "The versioned schema of this object (group/version); the server rejects "
            "versions it does not serve.",
            "type": "string",
        },
        "kind": {"description": "The kind of this object, in CamelCase.", "type": "string"},
        "metadata": {"type": "object"},
        **body.get("properties", {}),
    }
    for key in ("required", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-validations"):
        if key in body:
            root[key] = body[key]
    check_structural(root, name, root=True)
    return root


class _Converter:
    """One pass over pydantic's JSON schema, producing structural OpenAPI v3."""

    def __init__(self, model: str, defs: Mapping[str, Node]) -> None:
        self.model = model
        self.defs = defs
        self.expanding: list[str] = []  # definitions being inlined, to catch recursion

    def fail(self, path: str, problem: str) -> SchemaError:
        return SchemaError(f"cannot generate a CRD schema for {self.model}: {path}: {problem}")

    def convert(self, node: Node, path: str) -> Node:
        node = dict(node)
        if "$ref" in node:
            return self._ref(node, path)
        if "allOf" in node:
            parts = node.pop("allOf")
            if len(parts) != 1:
                raise self.fail(path, "allOf with several schemas is not supported; use one model")
            return self.convert(_merge(parts[0], node), path)
        if "oneOf" in node or "anyOf" in node:
            return self._union(node, path)
        if "const" in node:
            node["enum"] = [node.pop("const")]
        if isinstance(node.get("type"), list):
            types = [t for t in node["type"] if t != "null"]
            if len(types) != len(node["type"]):
                node["nullable"] = True
            if len(types) != 1:
                raise self.fail(path, f"several types {types} in one field; a structural schema has one type")
            node["type"] = types[0]
        if "enum" in node:
            self._enum(node, path)
        return _ordered(self._typed(node, path))

    def _ref(self, node: Node, path: str) -> Node:
        name = node.pop("$ref").rsplit("/", 1)[-1]
        target = self.defs.get(name)
        if target is None:
            raise self.fail(path, f"unresolvable reference {name!r}")
        title = target.get("title", name)
        if name in self.expanding:
            raise self.fail(
                path,
                f"model {title} is recursive (it contains itself), which a structural schema cannot "
                "express; break the cycle, or annotate the field with Schemaless() to store it unvalidated",
            )
        self.expanding.append(name)
        try:
            return self.convert(_merge(target, node), path)
        finally:
            self.expanding.pop()

    def _union(self, node: Node, path: str) -> Node:
        key = "oneOf" if "oneOf" in node else "anyOf"
        branches: list[Node] = node.pop(key)
        if "discriminator" in node:
            raise self.fail(
                path,
                "a discriminated union cannot be expressed in a structural schema (one type per field); "
                "use one model with optional fields and a ValidationRule that allows exactly one, "
                "or annotate the field with Schemaless()",
            )
        rest = [b for b in branches if b.get("type") != "null"]
        nullable = len(rest) != len(branches)
        if nullable:
            node["nullable"] = True
        if not rest:
            raise self.fail(path, "the field can only be null; give it a type")
        if len(rest) == 1:
            return self.convert(_merge(rest[0], node), path)
        types = sorted(str(b.get("type")) for b in rest)
        plain = all(set(b) == {"type"} for b in rest)
        if types == ["integer", "string"] and plain:
            node["x-kubernetes-int-or-string"] = True
            return self.convert(node, path)
        if types == ["integer", "number"] and plain:
            node["type"] = "number"
            return self.convert(node, path)
        described = " | ".join(_describe(b, self.defs) for b in rest)
        raise self.fail(
            path,
            f"a union of different types ({described}) cannot be expressed in a structural schema, "
            "which allows one type per field; use one type (a model with optional fields and a "
            "ValidationRule), int | str for int-or-string, or annotate the field with Schemaless()",
        )

    def _enum(self, node: Node, path: str) -> None:
        values = list(node["enum"])
        if None in values:
            values = [v for v in values if v is not None]
            node["nullable"] = True
        kinds = {_json_type(v) for v in values}
        if len(kinds) != 1:
            raise self.fail(
                path, f"enum values {values!r} mix types; a structural schema has one type per field"
            )
        node["enum"] = values
        node.setdefault("type", kinds.pop())

    def _typed(self, node: Node, path: str) -> Node:
        t = node.get("type")
        if t == "null":
            raise self.fail(path, "the field can only be null; give it a type")
        if t is not None and t not in _BY_TYPE:
            raise self.fail(path, f"type {t!r} is not an OpenAPI type")
        # Untyped nodes (Any, int-or-string) may carry the scalar validations (Quantity's pattern).
        typed_keys = _BY_TYPE[t] if t is not None else (*_STRING, *_NUMBER)
        allowed = {*_COMMON, *_EXTENSIONS, *typed_keys}
        for key in node:
            if key in allowed or key in _DROPPED or key == "type":
                continue
            if key == "prefixItems":
                raise self.fail(
                    path, "tuples (positional item types) cannot be expressed; use list[X] or a model"
                )
            if key == "patternProperties":
                raise self.fail(path, "patternProperties is not supported; use dict[str, X]")
            fits = [name for name, keys in _BY_TYPE.items() if key in keys]
            if fits:
                raise self.fail(
                    path, f"{key} applies to {' or '.join(fits)} fields, not to {t or 'untyped'} ones"
                )
            raise self.fail(path, f"the JSON schema keyword {key!r} has no CRD equivalent")
        out: Node = {k: v for k, v in node.items() if k in allowed}
        if t is not None:
            out["type"] = t
        if "description" in out and not (isinstance(out["description"], str) and out["description"].strip()):
            del out["description"]
        if out.get("default", ...) is None:
            del out["default"]  # "no value" is the absence of the field, not a stored null
        if out.get("nullable") is False:
            del out["nullable"]
        if "x-kubernetes-validations" in out:  # pydantic sorts keys; put "rule" first again
            out["x-kubernetes-validations"] = [_rule_order(r) for r in out["x-kubernetes-validations"]]
        if "format" in out:
            self._format(out)
        if "pattern" in out:
            self._pattern(out["pattern"], path)
        if t in ("integer", "number"):
            _exclusive_bounds(out)
        if t == "object":
            self._object(out, path)
        elif t == "array":
            self._array(out, path)
        elif t is None and not out.get("x-kubernetes-int-or-string"):
            out["x-kubernetes-preserve-unknown-fields"] = True  # Any: any JSON value
        if out.get("x-kubernetes-int-or-string"):
            out["anyOf"] = [dict(b) for b in _INT_OR_STRING]
        return out

    def _format(self, out: Node) -> None:
        fmt, t = out["format"], out.get("type")
        keep = (
            (t in ("string", None) and str(fmt).replace("-", "") in _KNOWN_STRING_FORMATS)
            or (t == "integer" and fmt in INTEGER_FORMATS)
            or (t == "number" and fmt in NUMBER_FORMATS)
        )
        if not keep:
            del out["format"]

    def _pattern(self, pattern: str, path: str) -> None:
        problem = pattern_problem(pattern)
        if problem:
            raise self.fail(path, problem)

    def _object(self, out: Node, path: str) -> None:
        props = out.get("properties")
        extra = out.pop("additionalProperties", None)
        names = out.pop("propertyNames", None)
        if names not in (None, {}, {"type": "string"}):
            raise self.fail(
                path,
                "constrained dict keys (Literal, Enum or patterned keys) cannot be expressed; use "
                "dict[str, X] with a ValidationRule such as \"self.all(k, k in ['a', 'b'])\"",
            )
        if props is not None:
            out["properties"] = {k: self.convert(v, f"{path}.{k}") for k, v in props.items()}
            if not out["properties"]:
                del out["properties"]
            if extra is True or extra == {}:
                out["x-kubernetes-preserve-unknown-fields"] = True  # extra="allow"
            elif isinstance(extra, dict):
                raise self.fail(
                    path,
                    "typed extra fields (a model with both fields and typed __pydantic_extra__) "
                    "cannot be expressed; move the extra values into a dict[str, X] field",
                )
        elif extra is True or extra == {}:
            out["x-kubernetes-preserve-unknown-fields"] = True  # dict[str, Any]
        elif isinstance(extra, dict):
            out["additionalProperties"] = self.convert(extra, f"{path}[key]")
        if not out.get("required"):
            out.pop("required", None)
        if out.get("x-kubernetes-embedded-resource") and "properties" not in out:
            out["x-kubernetes-preserve-unknown-fields"] = True

    def _array(self, out: Node, path: str) -> None:
        items = out.get("items")
        if isinstance(items, list):
            raise self.fail(
                path, "tuples (positional item types) cannot be expressed; use list[X] or a model"
            )
        out["items"] = self.convert(items if isinstance(items, dict) else {}, f"{path}[*]")
        if out.pop("uniqueItems", False):
            out.setdefault("x-kubernetes-list-type", "set")
        if out.get("x-kubernetes-list-type") == "set" and out["items"].get("type") in ("object", "array"):
            raise self.fail(
                path,
                "a set of objects or lists cannot be expressed (set lists hold scalars); use a list "
                "with ListType('map', keys=(...)) to key objects by some of their fields",
            )


def _merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> Node:
    """``base`` with ``overlay``'s keys on top; CEL rules from both are kept (base first)."""
    merged = {**base, **overlay}
    rules = [*base.get("x-kubernetes-validations", ()), *overlay.get("x-kubernetes-validations", ())]
    if rules:
        merged["x-kubernetes-validations"] = rules
    return merged


def _exclusive_bounds(out: Node) -> None:
    # JSON Schema 2020-12 has numeric exclusive bounds; OpenAPI v3.0 has booleans next to min/max.
    low = out.pop("exclusiveMinimum", None)
    if isinstance(low, int | float) and not isinstance(low, bool):
        if "minimum" not in out or low >= out["minimum"]:
            out["minimum"], out["exclusiveMinimum"] = low, True
    elif low is True:
        out["exclusiveMinimum"] = True
    high = out.pop("exclusiveMaximum", None)
    if isinstance(high, int | float) and not isinstance(high, bool):
        if "maximum" not in out or high <= out["maximum"]:
            out["maximum"], out["exclusiveMaximum"] = high, True
    elif high is True:
        out["exclusiveMaximum"] = True


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _describe(branch: Node, defs: Mapping[str, Node]) -> str:
    if "$ref" in branch:
        name = str(branch["$ref"]).rsplit("/", 1)[-1]
        return str(defs.get(name, {}).get("title", name))
    if branch.get("type") == "array":
        return f"list[{_describe(branch.get('items') or {}, defs)}]"
    if branch.get("type") == "object" and isinstance(branch.get("additionalProperties"), dict):
        return f"dict[str, {_describe(branch['additionalProperties'], defs)}]"
    return str(branch.get("type", "any"))


_RULE_ORDER = ("rule", "message", "messageExpression", "reason", "fieldPath", "optionalOldSelf")


def _rule_order(rule: Mapping[str, Any]) -> Node:
    return dict(sorted(rule.items(), key=lambda kv: _RULE_ORDER.index(kv[0]) if kv[0] in _RULE_ORDER else 99))


def _ordered(node: Node) -> Node:
    return dict(sorted(node.items(), key=lambda kv: _ORDER.get(kv[0], len(_ORDER))))
