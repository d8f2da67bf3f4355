"""The CRD of a Helm operator's kind: an open spec, or one derived from the chart's values schema.

:func:`crd_for_chart` is what ``kubeop create api --helm-chart`` writes. Without a
``values.schema.json`` the spec accepts any values (``x-kubernetes-preserve-unknown-fields``), as
operator-sdk's Helm CRDs do. With one, its JSON Schema (draft 4 to 2020-12 keywords) is turned
into a structural OpenAPI v3 schema, so the API server checks a resource's values when it is
created and ``kubectl explain`` documents them:

- local ``$ref`` s (``#/definitions/...``, ``#/$defs/...``) are inlined; a recursive one
  becomes an open node;
- ``type: [x, "null"]`` becomes ``nullable``, ``[integer, string]`` int-or-string, any other
  union an open node; ``const`` becomes a one-value ``enum``; numeric ``exclusiveMinimum`` /
  ``exclusiveMaximum`` become OpenAPI's boolean forms;
- ``additionalProperties: false`` is dropped (a CRD cannot say it; unknown fields are pruned
  anyway), ``true`` or a schema next to ``properties`` keeps unknown fields; ``patternProperties``,
  ``allOf`` / ``anyOf`` / ``oneOf`` / ``not``, tuple ``items``, ``default`` and annotations
  (``title``, ``examples``, ``$comment``) are dropped: Helm still checks the full schema when
  it renders;
- ``required`` keeps only the keys the chart's values.yaml does not default: Helm validates the
  merged values, the API server only the spec, so a key with a chart default is optional here.

If the result is still not structural, the open schema is used instead (never a CRD the server
would refuse).
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from kubeop.core.yaml_input import load_yaml
from kubeop.crd import check_group, check_kind, check_version, guess_plural, structural_violations

__all__ = [
    "HelmChartError",
    "crd_for_chart",
    "open_spec_schema",
    "schema_from_values_schema",
    "status_schema",
]

log = logging.getLogger("kubeop.helm")

_FORMATS = frozenset({"int32", "int64", "float", "double", "byte", "date", "date-time", "password"})
_COPY = ("description", "enum", "minimum", "maximum", "minLength", "maxLength", "pattern", "minItems")
_COPY2 = ("maxItems", "multipleOf", "minProperties", "maxProperties", "nullable")
_MAX_DEPTH = 64


class HelmChartError(ValueError):
    """The chart directory is missing or not a chart, or its values files are unreadable."""


def open_spec_schema(kind: str, chart: str = "") -> dict[str, Any]:
    """The schema of a spec that takes any values (``x-kubernetes-preserve-unknown-fields``): for a chart
    without values.schema.json.
    """
    what = f" of chart {chart}" if chart else ""
    return {
        "type": "object",
        "description": f"Spec defines the desired state of {kind}: the values{what}.",
        "x-kubernetes-preserve-unknown-fields": True,
    }


def status_schema(kind: str) -> dict[str, Any]:
    """The status a Helm operator writes (conditions and deployedRelease)."""
    return {
        "type": "object",
        "description": f"Status defines the observed state of {kind}, written by the Helm operator.",
        "properties": {
            "conditions": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
                "items": {
                    "type": "object",
                    "required": ["type", "status"],
                    "properties": {
                        "type": {"type": "string"},
                        "status": {"type": "string"},
                        "reason": {"type": "string"},
                        "message": {"type": "string"},
                        "lastTransitionTime": {"type": "string", "format": "date-time"},
                        "observedGeneration": {"type": "integer", "format": "int64"},
                    },
                },
            },
            "deployedRelease": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "manifest": {"type": "string"}},
            },
        },
    }


def crd_for_chart(
    chart_path: str | Path,
    group: str,
    version: str,
    kind: str,
    *,
    plural: str | None = None,
    scope: str = "Namespaced",
) -> dict[str, Any]:
    """The CustomResourceDefinition for ``kind`` served from ``chart_path`` (see module docs).

    Raises :class:`HelmChartError` when ``chart_path`` is not a chart, and
    :class:`~kubeop.crd.errors.DeclarationError` for an invalid group, version or kind.
    """
    check_group(group)
    check_version(version)
    check_kind(kind)
    if scope not in ("Namespaced", "Cluster"):
        raise ValueError(f"scope must be Namespaced or Cluster, got {scope!r}")
    chart = Path(chart_path)
    chart_meta = _chart_yaml(chart)
    plural = plural or guess_plural(kind)
    chart_name = str(chart_meta.get("name") or chart.name)
    spec = open_spec_schema(kind, chart_name)
    schema_file = chart / "values.schema.json"
    if schema_file.is_file():
        try:
            values_schema = json.loads(schema_file.read_text())
        except (OSError, ValueError) as e:
            raise HelmChartError(f"{schema_file}: not valid JSON: {e}") from None
        derived = schema_from_values_schema(values_schema, _values_yaml(chart), kind=kind)
        spec = derived if derived is not None else spec
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "scope": scope,
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Release", "type": "string", "jsonPath": ".status.deployedRelease.name"},
                        {
                            "name": "Deployed",
                            "type": "string",
                            "jsonPath": '.status.conditions[?(@.type=="Deployed")].status',
                        },
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": f"{kind} is a release of the Helm chart {chart_name}.",
                            "properties": {
                                "apiVersion": {"type": "string"},
                                "kind": {"type": "string"},
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": status_schema(kind),
                            },
                        }
                    },
                }
            ],
        },
    }


def _chart_yaml(chart: Path) -> Mapping[str, Any]:
    if not chart.is_dir():
        raise HelmChartError(f"{chart} is not a directory")
    path = chart / "Chart.yaml"
    if not path.is_file():
        raise HelmChartError(f"{chart} is not a Helm chart: Chart.yaml is missing")
    try:
        data = load_yaml(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise HelmChartError(f"{path}: cannot read it: {e}") from None
    return data if isinstance(data, Mapping) else {}


def _values_yaml(chart: Path) -> Any:
    path = chart / "values.yaml"
    if not path.is_file():
        return {}
    try:
        return load_yaml(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise HelmChartError(f"{path}: cannot read it: {e}") from None


def schema_from_values_schema(
    schema: Mapping[str, Any], defaults: Any = None, *, kind: str = "the resource"
) -> dict[str, Any] | None:
    """A structural spec schema from a chart's JSON Schema, or None if none can be made."""
    if not isinstance(schema, Mapping):
        return None
    converter = _Converter(schema)
    spec = converter.node(schema, defaults if defaults is not None else {}, 0)
    if spec.get("type") != "object" or "x-kubernetes-int-or-string" in spec:
        return None
    spec.pop("nullable", None)
    spec.setdefault("description", f"Spec defines the desired state of {kind}: the chart's values.")
    wrapper = {"type": "object", "properties": {"spec": spec}}
    problems = structural_violations(wrapper)
    if problems:
        log.warning(
            "values.schema.json is not expressible as a CRD schema (%s); using an open spec", problems[0]
        )
        return None
    return spec


def _json_type(values: list[Any]) -> str | None:
    """The one JSON type all ``values`` share, if they do."""
    types = set()
    for v in values:
        if isinstance(v, bool):
            types.add("boolean")
        elif isinstance(v, int):
            types.add("integer")
        elif isinstance(v, float):
            types.add("number")
        elif isinstance(v, str):
            types.add("string")
        else:
            return None
    if types == {"integer", "number"}:
        return "number"
    return types.pop() if len(types) == 1 else None


class _Converter:
    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root

    def _resolve(
        self, node: Mapping[str, Any], seen: tuple[str, ...]
    ) -> tuple[Mapping[str, Any] | None, tuple[str, ...]]:
        """Inline local ``$ref`` s (keywords beside a ``$ref`` win); None for a cycle or a
        reference this schema cannot resolve."""
        while isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in seen or not ref.startswith("#/"):
                return None, seen
            seen = (*seen, ref)
            target: Any = self.root
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, Mapping) or part not in target:
                    return None, seen
                target = target[part]
            if not isinstance(target, Mapping):
                return None, seen
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return node, seen

    def node(self, node: Any, defaults: Any, depth: int, seen: tuple[str, ...] = ()) -> dict[str, Any]:
        if node is True or not isinstance(node, Mapping) or depth > _MAX_DEPTH:
            return {"x-kubernetes-preserve-unknown-fields": True}
        resolved, seen = self._resolve(node, seen)
        if resolved is None:
            return {"x-kubernetes-preserve-unknown-fields": True}
        node = resolved
        out: dict[str, Any] = {}
        t = node.get("type")
        if isinstance(t, list):
            kinds = [x for x in t if x != "null"]
            if len(kinds) < len(t):
                out["nullable"] = True
            if sorted(kinds) == ["integer", "string"]:
                out["x-kubernetes-int-or-string"] = True
                out.update({k: node[k] for k in ("description",) if k in node})
                return out
            t = kinds[0] if len(kinds) == 1 else None
            if t is None:
                return {**({"description": node["description"]} if "description" in node else {}),
                        "x-kubernetes-preserve-unknown-fields": True}  # fmt: skip
        if t == "null":
            return {"x-kubernetes-preserve-unknown-fields": True}
        if t is None and ("const" in node or "enum" in node):
            t = _json_type([node["const"]] if "const" in node else node.get("enum") or [])
        if t is None:
            if "properties" in node or "additionalProperties" in node:
                t = "object"
            elif "items" in node:
                t = "array"
            else:
                out_any: dict[str, Any] = {"x-kubernetes-preserve-unknown-fields": True}
                if "description" in node:
                    out_any["description"] = node["description"]
                return out_any
        out["type"] = t
        for key in (*_COPY, *_COPY2):
            if key in node:
                out[key] = copy.deepcopy(node[key])
        if "const" in node and "enum" not in out:
            out["enum"] = [copy.deepcopy(node["const"])]
        if node.get("format") in _FORMATS:
            out["format"] = node["format"]
        for bound, flag in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            value = node.get(bound)
            if isinstance(value, bool):
                if value and flag in out:
                    out[bound] = True
            elif isinstance(value, int | float):
                out[flag] = value
                out[bound] = True
        if t == "object":
            self._object(node, out, defaults, depth, seen)
        elif t == "array":
            items = node.get("items")
            item_defaults = defaults[0] if isinstance(defaults, list) and defaults else None
            out["items"] = (
                self.node(items, item_defaults, depth + 1, seen)
                if isinstance(items, Mapping)
                else {"x-kubernetes-preserve-unknown-fields": True}
            )
        return out

    def _object(
        self, node: Mapping[str, Any], out: dict[str, Any], defaults: Any, depth: int, seen: tuple[str, ...]
    ) -> None:
        props = node.get("properties")
        extra = node.get("additionalProperties")
        own_defaults = defaults if isinstance(defaults, Mapping) else {}
        if isinstance(props, Mapping) and props:
            out["properties"] = {
                str(name): self.node(sub, own_defaults.get(name), depth + 1, seen)
                for name, sub in props.items()
            }
            if extra is not False:
                # JSON Schema allows keys it does not list unless additionalProperties is false.
                out["x-kubernetes-preserve-unknown-fields"] = True
        elif isinstance(extra, Mapping) and "patternProperties" not in node:
            out["additionalProperties"] = self.node(extra, None, depth + 1, seen)
        elif extra is not False or "patternProperties" in node:
            out["x-kubernetes-preserve-unknown-fields"] = True
        required = node.get("required")
        if isinstance(required, list) and "properties" in out:
            keep = [
                r for r in required if isinstance(r, str) and r in out["properties"] and r not in own_defaults
            ]
            if keep:
                out["required"] = keep
