"""The CRD of a chart: open spec, or a structural schema from values.schema.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kubeop.crd.errors import DeclarationError
from kubeop.crd.structural import structural_violations
from kubeop.helm.crd import HelmChartError, crd_for_chart, schema_from_values_schema

EXAMPLE_CHART = Path(__file__).parents[3] / "examples" / "php_deployment" / "helm-charts" / "php-deployment"


def make_chart(root: Path, schema: Any = None, values: str = "") -> Path:
    chart = root / "chart"
    (chart / "templates").mkdir(parents=True, exist_ok=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text(values)
    if schema is not None:
        (chart / "values.schema.json").write_text(json.dumps(schema))
    return chart


def spec_of(crd: dict[str, Any]) -> dict[str, Any]:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]  # type: ignore[no-any-return]


def test_open_spec_without_a_values_schema(tmp_path: Path) -> None:
    crd = crd_for_chart(make_chart(tmp_path), "web.example.com", "v1", "PhpDeployment")
    assert crd["metadata"]["name"] == "phpdeployments.web.example.com"
    names = crd["spec"]["names"]
    assert (names["kind"], names["listKind"]) == ("PhpDeployment", "PhpDeploymentList")
    assert (names["plural"], names["singular"]) == ("phpdeployments", "phpdeployment")
    assert crd["spec"]["scope"] == "Namespaced"
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    assert spec_of(crd)["x-kubernetes-preserve-unknown-fields"] is True
    assert structural_violations(version["schema"]["openAPIV3Schema"]) == []
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Release", "Deployed", "Age"]


def test_options_and_name_checks(tmp_path: Path) -> None:
    chart = make_chart(tmp_path)
    crd = crd_for_chart(chart, "web.example.com", "v1beta1", "Policy", plural="policyset", scope="Cluster")
    assert crd["metadata"]["name"] == "policyset.web.example.com" and crd["spec"]["scope"] == "Cluster"
    assert crd_for_chart(chart, "web.example.com", "v1", "Policy")["spec"]["names"]["plural"] == "policies"
    with pytest.raises(DeclarationError):
        crd_for_chart(chart, "web", "v1", "Policy")
    with pytest.raises(DeclarationError):
        crd_for_chart(chart, "web.example.com", "v1", "policy")
    with pytest.raises(ValueError, match="scope"):
        crd_for_chart(chart, "web.example.com", "v1", "Policy", scope="Global")


def test_not_a_chart(tmp_path: Path) -> None:
    with pytest.raises(HelmChartError, match="not a directory"):
        crd_for_chart(tmp_path / "none", "web.example.com", "v1", "X")
    with pytest.raises(HelmChartError, match=r"Chart.yaml is missing"):
        crd_for_chart(tmp_path, "web.example.com", "v1", "X")
    chart = make_chart(tmp_path)
    (chart / "values.schema.json").write_text("{nope")
    with pytest.raises(HelmChartError, match="not valid JSON"):
        crd_for_chart(chart, "web.example.com", "v1", "X")


def test_the_example_chart_gets_a_typed_structural_spec() -> None:
    crd = crd_for_chart(EXAMPLE_CHART, "web.example.com", "v1", "PhpDeployment")
    spec = spec_of(crd)
    assert spec["properties"]["image"] == {
        "type": "string",
        "description": "The application's container image.",
    }
    assert spec["properties"]["replicas"] == {"type": "integer", "minimum": 0}
    assert spec["properties"]["service"]["properties"]["type"]["enum"] == [
        "ClusterIP",
        "NodePort",
        "LoadBalancer",
    ]
    assert structural_violations(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]) == []


def test_conversion_rules() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "Values",
        "type": "object",
        "required": ["image", "name"],
        "definitions": {"port": {"type": "integer", "minimum": 1, "maximum": 65535}},
        "properties": {
            "image": {"type": "string"},
            "name": {"type": "string", "default": "x", "examples": ["a"]},
            "port": {"$ref": "#/definitions/port", "description": "the port"},
            "tag": {"type": ["string", "null"]},
            "target": {"type": ["integer", "string"]},
            "mixed": {"type": ["boolean", "object"]},
            "mode": {"const": "fast"},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "old": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "tuple": {"type": "array", "items": [{"type": "string"}]},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "closed": {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "additionalProperties": False,
            },
            "anything": {},
            "level": {"enum": [1, 2.5]},
            "weird": {"enum": ["a", 1]},
            "choice": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "when": {"type": "string", "format": "date-time"},
            "email": {"type": "string", "format": "idn-email"},
            "pattern": {"type": "object", "patternProperties": {"^x-": {"type": "string"}}},
        },
    }
    spec = schema_from_values_schema(schema, {"image": None})
    assert spec is not None
    p = spec["properties"]
    assert spec["required"] == ["name"]  # "image" has a default in values.yaml
    assert "x-kubernetes-preserve-unknown-fields" in spec
    assert p["name"] == {"type": "string"}  # default and examples dropped
    assert p["port"] == {"type": "integer", "minimum": 1, "maximum": 65535, "description": "the port"}
    assert p["tag"] == {"type": "string", "nullable": True}
    assert p["target"] == {"x-kubernetes-int-or-string": True}
    assert p["mixed"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert p["mode"] == {"type": "string", "enum": ["fast"]}
    assert p["ratio"] == {
        "type": "number", "minimum": 0, "exclusiveMinimum": True, "maximum": 1, "exclusiveMaximum": True,
    }  # fmt: skip
    assert p["old"] == {"type": "number", "minimum": 0, "exclusiveMinimum": True}
    assert p["tags"] == {"type": "array", "items": {"type": "string"}}
    assert p["tuple"] == {"type": "array", "items": {"x-kubernetes-preserve-unknown-fields": True}}
    assert p["labels"] == {"type": "object", "additionalProperties": {"type": "string"}}
    assert p["closed"] == {"type": "object", "properties": {"a": {"type": "string"}}}
    assert p["anything"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert p["level"] == {"type": "number", "enum": [1, 2.5]}
    assert p["weird"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert p["choice"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert p["when"] == {"type": "string", "format": "date-time"}
    assert p["email"] == {"type": "string"}
    assert p["pattern"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    assert structural_violations({"type": "object", "properties": {"spec": spec}}) == []


def test_recursive_and_unresolvable_refs_become_open() -> None:
    schema = {
        "type": "object",
        "$defs": {"node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/node"}}}},
        "properties": {"tree": {"$ref": "#/$defs/node"}, "remote": {"$ref": "https://example.com/s.json"}},
    }
    spec = schema_from_values_schema(schema, {})
    assert spec is not None
    tree = spec["properties"]["tree"]
    assert tree["properties"]["child"] == {"x-kubernetes-preserve-unknown-fields": True}
    assert spec["properties"]["remote"] == {"x-kubernetes-preserve-unknown-fields": True}


def test_schemas_that_cannot_be_a_spec_give_none(tmp_path: Path) -> None:
    assert schema_from_values_schema({"type": "string"}) is None
    assert schema_from_values_schema([]) is None  # type: ignore[arg-type]
    assert (
        schema_from_values_schema(
            {"type": "object", "properties": {"p": {"type": "string", "pattern": "(?=x)"}}}
        )
        is None
    )
    # ... and crd_for_chart falls back to the open spec.
    chart = make_chart(
        tmp_path, {"type": "object", "properties": {"p": {"type": "string", "pattern": "(?=x)"}}}
    )
    assert (
        spec_of(crd_for_chart(chart, "web.example.com", "v1", "X"))["x-kubernetes-preserve-unknown-fields"]
        is True
    )


def test_required_keys_with_chart_defaults_are_optional(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "required": ["image", "service"],
        "properties": {
            "image": {"type": "string"},
            "service": {
                "type": "object",
                "required": ["port", "name"],
                "properties": {"port": {"type": "integer"}, "name": {"type": "string"}},
            },
        },
    }
    chart = make_chart(tmp_path, schema, "service:\n  port: 80\n")
    spec = spec_of(crd_for_chart(chart, "web.example.com", "v1", "X"))
    assert spec["required"] == ["image"]
    assert spec["properties"]["service"]["required"] == ["name"]
