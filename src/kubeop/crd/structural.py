"""Structural-schema rules: the checks the API server runs on a CRD's ``openAPIV3Schema``.

:func:`structural_violations` lists every rule a schema breaks (an empty list means the server
will accept it, CEL compilation and cost aside); :func:`check_structural` raises them as one
:class:`~kubeop.crd.errors.SchemaError`. The rules follow apiextensions-apiserver:

- every node has a type, except int-or-string and preserve-unknown-fields nodes; the root is an
  object, never nullable, without additionalProperties;
- no ``$ref``, ``definitions``, ``patternProperties``, ``dependencies``, ``additionalItems``,
  ``uniqueItems: true``, ``type: null``, or keys the schema type does not have;
- ``properties`` and ``additionalProperties`` are mutually exclusive; arrays have ``items``;
- inside ``anyOf``/``allOf``/``oneOf``/``not`` only value validations (no types, defaults,
  descriptions, nullable or extensions), except the exact int-or-string pattern;
- at the root ``metadata`` may constrain only ``name`` and ``generateName``, and ``apiVersion``
  and ``kind`` are strings;
- list and map types are consistent (set items scalar, map keys required-or-defaulted scalar
  item fields, no nullable items);
- defaults are valid values of their own schema and contain no field that pruning would drop.

:func:`value_problems` is the small validator used for defaults; it covers types, enums,
bounds, lengths, patterns, required and unknown fields, not CEL rules or formats.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from kubeop.crd.errors import SchemaError

__all__ = ["check_structural", "pattern_problem", "structural_violations", "value_problems"]

Node = Mapping[str, Any]

_TYPES = ("string", "number", "integer", "boolean", "array", "object")
_KEYS = frozenset(
    {
        "description", "type", "format", "title", "default", "maximum", "exclusiveMaximum", "minimum",
        "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems",
        "multipleOf", "enum", "maxProperties", "minProperties", "required", "items", "allOf", "oneOf",
        "anyOf", "not", "properties", "additionalProperties", "externalDocs", "example", "nullable",
        "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys", "x-kubernetes-list-type",
        "x-kubernetes-map-type", "x-kubernetes-validations",
    }
)  # fmt: skip
_UNSUPPORTED = ("$ref", "definitions", "$defs", "patternProperties", "dependencies", "additionalItems", "id")
_NESTED_FORBIDDEN = (
    "type", "default", "description", "title", "nullable", "additionalProperties",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys", "x-kubernetes-list-type",
    "x-kubernetes-map-type", "x-kubernetes-validations",
)  # fmt: skip
_RULE_KEYS = frozenset({"rule", "message", "messageExpression", "reason", "fieldPath", "optionalOldSelf"})
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
_SCALARS = ("string", "number", "integer", "boolean")

# Regular-expression syntax Python has and Go's RE2 (the server's engine) lacks.
_NOT_RE2 = (
    (re.compile(r"\(\?<?[=!]"), "lookaround assertions ((?=...), (?!...), (?<=...), (?<!...))"),
    (re.compile(r"\(\?P=|\\[1-9]"), "back-references"),
    (re.compile(r"\(\?>"), "atomic groups"),
    (re.compile(r"\(\?\("), "conditional groups"),
    (re.compile(r"(?<!\\)(\\\\)*\\Z"), r"\Z (use \z or $)"),
    (re.compile(r"[*+?}]\+"), "possessive quantifiers"),
)


def pattern_problem(pattern: str) -> str | None:
    """Why the server cannot use ``pattern`` (Python syntax Go's RE2 lacks), or None."""
    try:
        re.compile(pattern)
    except re.error as e:
        return f"pattern {pattern!r} is not a regular expression: {e}"
    for syntax, what in _NOT_RE2:
        if syntax.search(pattern):
            return (
                f"pattern {pattern!r} uses {what}, which the API server's regular expressions (Go RE2) "
                "do not support; rewrite it, or check the value in a ValidationRule"
            )
    return None


def check_structural(schema: Node, where: str, *, root: bool = True) -> None:
    """Raise SchemaError listing every rule ``schema`` breaks; ``where`` (a model name) labels paths."""
    problems = structural_violations(schema, root=root, label=where)
    if problems:
        listed = "\n  ".join(problems)
        raise SchemaError(
            f"the schema generated for {where} would be rejected by the API server:\n  {listed}"
        )


def structural_violations(schema: Node, *, root: bool = True, label: str = "openAPIV3Schema") -> list[str]:
    """Every rule ``schema`` breaks, as ``path: problem`` lines (empty when the server accepts it).

    ``root`` applies the rules for a resource's top level (``openAPIV3Schema`` itself). Paths
    start with ``label`` and use JSON field names: ``CronTab.spec.ports[*].name``, ``[key]``
    for map values.
    """
    out: list[str] = []
    _walk(schema, label, "root" if root else "field", out, in_meta=False)
    return out


def _walk(node: Any, path: str, level: str, out: list[str], *, in_meta: bool) -> None:
    if not isinstance(node, Mapping):
        out.append(f"{path}: must be a schema object, got {type(node).__name__}")
        return
    for key in node:
        if key in _UNSUPPORTED:
            out.append(f"{path}: {key} is not supported in CRD schemas")
        elif key not in _KEYS:
            out.append(f"{path}: {key!r} is not an OpenAPI v3 schema field the server knows")
    t = node.get("type")
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    embedded = node.get("x-kubernetes-embedded-resource") is True
    if preserve is not None and preserve is not True:
        out.append(f"{path}: x-kubernetes-preserve-unknown-fields must be true or absent")
    if t is not None and t not in _TYPES:
        out.append(
            f"{path}: type {t!r} is not allowed"
            + (
                "; use nullable: true instead of type null"
                if t == "null"
                else f" (one of {', '.join(_TYPES)})"
            )
        )
    if t is None and not int_or_string and not preserve:
        out.append(
            f"{path}: type must not be empty "
            "(only int-or-string and preserve-unknown-fields nodes are untyped)"
        )
    if level == "root":
        if t != "object":
            out.append(f"{path}: type must be object at the root")
        if node.get("nullable"):
            out.append(f"{path}: nullable cannot be true at the root")
        if "additionalProperties" in node:
            out.append(f"{path}: additionalProperties must not be used at the root")
    if int_or_string:
        if t is not None:
            out.append(f"{path}: an int-or-string node must have no type")
        if preserve:
            out.append(
                f"{path}: x-kubernetes-preserve-unknown-fields must be false with x-kubernetes-int-or-string"
            )
        if embedded:
            out.append(
                f"{path}: x-kubernetes-embedded-resource must be false with x-kubernetes-int-or-string"
            )
    if embedded:
        if t != "object":
            out.append(f"{path}: type must be object with x-kubernetes-embedded-resource")
        if "additionalProperties" in node:
            out.append(f"{path}: additionalProperties must not be used with x-kubernetes-embedded-resource")
        if not preserve and not node.get("properties"):
            out.append(
                f"{path}: an embedded resource needs properties or x-kubernetes-preserve-unknown-fields"
            )
        if in_meta:
            out.append(f"{path}: x-kubernetes-embedded-resource must not be used inside resource metadata")
    if node.get("uniqueItems") is True:
        out.append(
            f"{path}: uniqueItems cannot be true (quadratic to check); use x-kubernetes-list-type: set"
        )
    if t == "array" and not isinstance(node.get("items"), Mapping):
        out.append(f"{path}: an array needs items (one schema object)")
    ap = node.get("additionalProperties")
    if ap is not None and node.get("properties") and (ap is not True):
        out.append(f"{path}: additionalProperties and properties are mutually exclusive")
    _check_value_validations(node, path, out)
    _check_extensions(node, path, out)
    _check_rules(node, path, out)
    if level == "root" or embedded:
        _check_resource_meta(node, path, out, root=level == "root")
    default_forbidden = in_meta
    if "default" in node:
        if default_forbidden:
            out.append(f"{path}: defaults are not allowed in metadata, apiVersion or kind")
        else:
            problems = value_problems(node, node["default"])
            out.extend(f"{path}: default {node['default']!r} is invalid: {p}" for p in problems)
    if isinstance(node.get("pattern"), str):
        problem = pattern_problem(node["pattern"])
        if problem:
            out.append(f"{path}: {problem}")
    props = node.get("properties")
    if isinstance(props, Mapping):
        for name, sub in props.items():
            meta = in_meta or ((level == "root" or embedded) and name in ("metadata", "apiVersion", "kind"))
            if level == "root" and name == "metadata":
                continue  # checked by _check_resource_meta
            _walk(sub, f"{path}.{name}", "field", out, in_meta=meta)
    if isinstance(node.get("items"), Mapping):
        _walk(node["items"], f"{path}[*]", "item", out, in_meta=in_meta)
    if isinstance(ap, Mapping):
        _walk(ap, f"{path}[key]", "field", out, in_meta=in_meta)


def _check_value_validations(node: Node, path: str, out: list[str]) -> None:
    for key in ("anyOf", "allOf", "oneOf"):
        branches = node.get(key)
        if branches is None:
            continue
        if key == "anyOf" and node.get("x-kubernetes-int-or-string") and branches == _INT_OR_STRING:
            continue
        for i, branch in enumerate(branches):
            _nested(branch, f"{path}.{key}[{i}]", out)
    if "not" in node:
        _nested(node["not"], f"{path}.not", out)


def _nested(node: Any, path: str, out: list[str]) -> None:
    if not isinstance(node, Mapping):
        out.append(f"{path}: must be a schema object")
        return
    for key in _NESTED_FORBIDDEN:
        if key in node:
            out.append(f"{path}: {key} must not be set inside anyOf/allOf/oneOf/not to be structural")
    props = node.get("properties")
    if isinstance(props, Mapping):
        if "metadata" in props:
            out.append(f"{path}.metadata: must not be specified in a nested context")
        for name, sub in props.items():
            _nested(sub, f"{path}.{name}", out)
    if isinstance(node.get("items"), Mapping):
        _nested(node["items"], f"{path}[*]", out)


def _check_extensions(node: Node, path: str, out: list[str]) -> None:
    t = node.get("type")
    map_type = node.get("x-kubernetes-map-type")
    if map_type is not None:
        if t != "object":
            out.append(f"{path}: type must be object with x-kubernetes-map-type")
        if map_type not in ("granular", "atomic"):
            out.append(f"{path}: x-kubernetes-map-type must be granular or atomic, got {map_type!r}")
    list_type = node.get("x-kubernetes-list-type")
    keys = node.get("x-kubernetes-list-map-keys")
    if keys and list_type != "map":
        out.append(f"{path}: x-kubernetes-list-map-keys needs x-kubernetes-list-type: map")
    if list_type is None:
        return
    if t != "array":
        out.append(f"{path}: type must be array with x-kubernetes-list-type")
    if list_type not in ("atomic", "set", "map"):
        out.append(f"{path}: x-kubernetes-list-type must be atomic, set or map, got {list_type!r}")
        return
    items = node.get("items")
    if not isinstance(items, Mapping):
        return
    if list_type in ("set", "map") and items.get("nullable"):
        out.append(f"{path}[*]: items cannot be nullable in a list of type {list_type}")
    if list_type == "set" and items.get("type") in ("object", "array"):
        atomic = (
            items.get("x-kubernetes-map-type") == "atomic" or items.get("x-kubernetes-list-type") == "atomic"
        )
        if not atomic:
            out.append(f"{path}[*]: items of a set must be scalars (or atomic objects/lists)")
    if list_type == "map":
        if not keys:
            out.append(f"{path}: x-kubernetes-list-type map needs x-kubernetes-list-map-keys")
            return
        if items.get("type") != "object":
            out.append(f"{path}[*]: items of a map list must be objects")
            return
        props = items.get("properties") or {}
        required = set(items.get("required") or ())
        if len(set(keys)) != len(keys):
            out.append(f"{path}: x-kubernetes-list-map-keys must not repeat entries")
        for key in keys:
            prop = props.get(key)
            if prop is None:
                out.append(f"{path}: map key {key!r} is not a property of the items")
                continue
            if prop.get("type") not in _SCALARS:
                out.append(f"{path}: map key {key!r} must be a scalar (string, integer, number or boolean)")
            if key not in required and "default" not in prop:
                out.append(f"{path}: map key {key!r} must be required or have a default")
            if prop.get("nullable"):
                out.append(f"{path}: map key {key!r} cannot be nullable")


def _check_rules(node: Node, path: str, out: list[str]) -> None:
    rules = node.get("x-kubernetes-validations")
    if rules is None:
        return
    if not isinstance(rules, list):
        out.append(f"{path}: x-kubernetes-validations must be a list")
        return
    for i, rule in enumerate(rules):
        where = f"{path}.x-kubernetes-validations[{i}]"
        if not isinstance(rule, Mapping) or not str(rule.get("rule", "")).strip():
            out.append(f"{where}: needs a non-empty rule")
            continue
        unknown = set(rule) - _RULE_KEYS
        if unknown:
            out.append(f"{where}: unknown keys {sorted(unknown)}")
        message = rule.get("message")
        if message is not None and (not str(message).strip() or "\n" in str(message)):
            out.append(f"{where}: message must be one non-empty line")
        if "\n" in rule["rule"] and not message and not rule.get("messageExpression"):
            out.append(f"{where}: a multi-line rule needs a message")


def _check_resource_meta(node: Node, path: str, out: list[str], *, root: bool) -> None:
    props = node.get("properties")
    if not isinstance(props, Mapping):
        return
    for name in ("apiVersion", "kind"):
        if name in props and props[name].get("type") != "string":
            out.append(f"{path}.{name}: type must be string")
    meta = props.get("metadata")
    if meta is None:
        return
    if not isinstance(meta, Mapping) or meta.get("type") != "object":
        out.append(f"{path}.metadata: type must be object")
        return
    if root:
        rest = {k: v for k, v in meta.items() if k != "type"}
        inner = rest.pop("properties", {})
        if rest or set(inner) - {"name", "generateName"}:
            out.append(
                f"{path}.metadata: must not specify anything other than name and generateName "
                "(the server validates metadata itself)"
            )


def value_problems(schema: Node, value: Any, path: str = "") -> list[str]:
    """Why ``value`` does not validate against ``schema`` (empty when it does)."""
    where = path
    if value is None:
        return (
            [] if schema.get("nullable") else [_at(where, "null is not allowed (the field is not nullable)")]
        )
    problems: list[str] = []
    t = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, int | str):
            return [_at(where, "must be an integer or a string")]
        if isinstance(value, str):
            problems.extend(_string_problems(schema, value, where))
        return problems
    if t is None:
        return []
    if not _has_type(value, t):
        return [_at(where, f"must be of type {t}, got {type(value).__name__}")]
    if "enum" in schema and value not in schema["enum"]:
        problems.append(_at(where, f"must be one of {schema['enum']!r}"))
    if t == "string":
        problems.extend(_string_problems(schema, value, where))
    elif t in ("integer", "number"):
        problems.extend(_number_problems(schema, value, where))
    elif t == "array":
        if "minItems" in schema and len(value) < schema["minItems"]:
            problems.append(_at(where, f"must have at least {schema['minItems']} items"))
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            problems.append(_at(where, f"must have at most {schema['maxItems']} items"))
        items = schema.get("items") or {}
        for i, item in enumerate(value):
            problems.extend(value_problems(items, item, f"{where}[{i}]"))
    elif t == "object":
        problems.extend(_object_problems(schema, value, where))
    return problems


def _has_type(value: Any, t: str) -> bool:
    if t == "string":
        return isinstance(value, str)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if t == "array":
        return isinstance(value, list)
    return isinstance(value, dict)


def _string_problems(schema: Node, value: str, where: str) -> list[str]:
    problems = []
    if "minLength" in schema and len(value) < schema["minLength"]:
        problems.append(_at(where, f"must be at least {schema['minLength']} characters long"))
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        problems.append(_at(where, f"must be at most {schema['maxLength']} characters long"))
    pattern = schema.get("pattern")
    if isinstance(pattern, str) and pattern_problem(pattern) is None and not re.search(pattern, value):
        problems.append(_at(where, f"must match {pattern!r}"))
    return problems


def _number_problems(schema: Node, value: float, where: str) -> list[str]:
    problems = []
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and (value < low or (schema.get("exclusiveMinimum") and value == low)):
        problems.append(_at(where, f"must be {'>' if schema.get('exclusiveMinimum') else '>='} {low}"))
    if high is not None and (value > high or (schema.get("exclusiveMaximum") and value == high)):
        problems.append(_at(where, f"must be {'<' if schema.get('exclusiveMaximum') else '<='} {high}"))
    step = schema.get("multipleOf")
    if step and not math.isclose(value / step, round(value / step), abs_tol=1e-9):
        problems.append(_at(where, f"must be a multiple of {step}"))
    return problems


def _object_problems(schema: Node, value: dict[str, Any], where: str) -> list[str]:
    problems = []
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    preserve = schema.get("x-kubernetes-preserve-unknown-fields") or schema.get(
        "x-kubernetes-embedded-resource"
    )
    for name in schema.get("required") or ():
        if name not in value:
            problems.append(_at(where, f"missing required field {name!r}"))
    for name, sub in value.items():
        if name in props:
            problems.extend(value_problems(props[name], sub, f"{where}.{name}"))
        elif isinstance(extra, Mapping):
            problems.extend(value_problems(extra, sub, f"{where}.{name}"))
        elif not preserve and extra is not True:
            problems.append(_at(where, f"unknown field {name!r} would be pruned"))
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        problems.append(_at(where, f"must have at least {schema['minProperties']} entries"))
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        problems.append(_at(where, f"must have at most {schema['maxProperties']} entries"))
    return problems


def _at(where: str, problem: str) -> str:
    return f"{where}: {problem}" if where else problem
