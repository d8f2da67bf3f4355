"""Typed models generated from the server's OpenAPI v3 documents (pydantic, built at run time).

Built-in kinds get typed models without hand-written classes and without a code generator: the
API server publishes one OpenAPI v3 document per group version (``/openapi/v3/apis/apps/v1``),
and :class:`ModelFactory` turns the schemas a kind needs into pydantic models on first use. The
models therefore match the server the program talks to, including its version's new fields.

Choices, and why:

- Fields keep their JSON names (``spec.template.metadata``); names that are not valid Python
  attributes or that shadow pydantic's own (``continue``, ``x-kubernetes-...``, ``schema``) get a
  trailing ``_`` and an alias, so dumping ``by_alias`` gives the wire form back.
- Every non-required field defaults to ``None`` and is left out when dumping (schema defaults such
  as ``status: {}`` are *not* applied: sending them would claim fields in server-side apply).
- Unknown fields are kept (``extra="allow"``): an object read from a newer server survives a
  round trip through an older model.
- ``apiVersion`` and ``kind`` default to the kind's values, so an instance can be sent as it is,
  and the class satisfies the :mod:`kubeop.core.model` protocol.
- ``format: date-time`` stays a string (round trips byte for byte), int-or-string is ``int | str``,
  ``x-kubernetes-preserve-unknown-fields`` and anything unrecognised is ``Any``.

These models give validation and attribute access at run time, not static types for mypy.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Mapping
from typing import Any, ClassVar, ForwardRef, Optional, Union

import pydantic

from kubeop.core.gvk import GroupVersionKind
from kubeop.core.resource import ApiResource

__all__ = ["KubeModel", "ModelFactory", "schema_name_for"]

_REF = "#/components/schemas/"


class KubeModel(pydantic.BaseModel):
    """Base of generated models: JSON names by alias, unknown fields kept."""

    model_config = pydantic.ConfigDict(extra="allow", populate_by_name=True, protected_namespaces=())
    # Dunder names: generated fields can be called anything ("resource" is a real field name).
    __openapi_schema__: ClassVar[str] = ""
    #: Set by the client on top-level kinds so verbs need no discovery for them.
    __kube_resource__: ClassVar[ApiResource | None] = None


def schema_name_for(doc: Mapping[str, Any], gvk: GroupVersionKind) -> str | None:
    """The component schema that declares ``gvk`` in ``x-kubernetes-group-version-kind``."""
    schemas = (doc.get("components") or {}).get("schemas") or {}
    for name, schema in schemas.items():
        for item in schema.get("x-kubernetes-group-version-kind") or ():
            declared = (item.get("group", ""), item.get("version"), item.get("kind"))
            if declared == (gvk.group, gvk.version, gvk.kind):
                return str(name)
    return None


def _python_name(name: str) -> str:
    plain = name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_")
    if plain and not hasattr(pydantic.BaseModel, name):
        return name
    cleaned = re.sub(r"\W", "_", name).lstrip("_") or "field"
    if cleaned[0].isdigit():
        cleaned = f"f_{cleaned}"
    return f"{cleaned}_"


class ModelFactory:
    """Builds (and caches) models from one OpenAPI v3 document."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        self._schemas: Mapping[str, Any] = (doc.get("components") or {}).get("schemas") or {}
        self._doc = doc
        self._models: dict[str, type[KubeModel]] = {}
        self._building: set[str] = set()

    def model_for(self, gvk: GroupVersionKind) -> type[KubeModel]:
        """The model of a kind; raises LookupError if the document does not describe it."""
        name = schema_name_for(self._doc, gvk)
        if name is None:
            raise LookupError(f"the OpenAPI document has no schema for {gvk}")
        model = self._model(name, gvk)
        self._rebuild()
        return model

    def _class_name(self, schema_name: str) -> str:
        return re.sub(r"\W", "_", schema_name.rsplit(".", 1)[-1]) or "Model"

    def _model(self, name: str, gvk: GroupVersionKind | None = None) -> type[KubeModel]:
        cached = self._models.get(name)
        if cached is not None:
            return cached
        schema = self._schemas.get(name)
        if schema is None:
            raise LookupError(f"the OpenAPI document has no schema {name!r}")
        self._building.add(name)
        fields: dict[str, Any] = {}
        required = set(schema.get("required") or ())
        for prop, sub in (schema.get("properties") or {}).items():
            annotation = self._type(sub, f"{name}.{prop}")
            attr = _python_name(prop)
            alias = prop if attr != prop else None
            if gvk is not None and prop == "apiVersion":
                fields[attr] = (str, pydantic.Field(gvk.api_version, alias=alias))
            elif gvk is not None and prop == "kind":
                fields[attr] = (str, pydantic.Field(gvk.kind, alias=alias))
            elif prop in required:
                fields[attr] = (annotation, pydantic.Field(..., alias=alias))
            else:
                fields[attr] = (Optional[annotation], pydantic.Field(None, alias=alias))  # noqa: UP045
        model: type[KubeModel] = pydantic.create_model(
            self._class_name(name),
            __base__=KubeModel,
            __module__=__name__,
            __doc__=str(schema.get("description") or "")[:2000] or None,
            **fields,
        )
        model.__openapi_schema__ = name
        self._models[name] = model
        self._building.discard(name)
        return model

    def _rebuild(self) -> None:
        namespace = {_ref_name(n): m for n, m in self._models.items()}
        for model in self._models.values():
            if not model.__pydantic_complete__:
                model.model_rebuild(_types_namespace=namespace)

    def _type(self, schema: Mapping[str, Any], where: str) -> Any:
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return Any
        if schema.get("x-kubernetes-int-or-string") or schema.get("format") == "int-or-string":
            return Union[int, str]  # noqa: UP007
        ref = schema.get("$ref")
        if ref is None:
            parts: list[Any] = list(schema.get("allOf") or ())
            if len(parts) == 1 and "$ref" in parts[0]:
                ref = parts[0]["$ref"]
        if ref is not None:
            return self._ref_type(str(ref))
        one_of = schema.get("oneOf") or schema.get("anyOf")
        if one_of:
            members = [self._type(m, where) for m in one_of]
            if any(m is Any for m in members):
                return Any
            return Union[tuple(members)]  # noqa: UP007
        kind = schema.get("type")
        if kind == "string":
            return str
        if kind == "integer":
            return int
        if kind == "number":
            return float
        if kind == "boolean":
            return bool
        if kind == "array":
            return list[self._type(schema.get("items") or {}, f"{where}[]")]  # type: ignore[misc]
        if kind == "object":
            extra = schema.get("additionalProperties")
            if isinstance(extra, Mapping):
                return dict[str, self._type(extra, f"{where}{{}}")]  # type: ignore[misc]
            if schema.get("properties"):
                return self._inline(schema, where)
            return dict[str, Any]
        return Any

    def _ref_type(self, ref: str) -> Any:
        if not ref.startswith(_REF):
            return Any
        target = ref[len(_REF) :]
        target_schema = self._schemas.get(target)
        if target_schema is None:
            return Any
        if not target_schema.get("properties"):
            # Scalars and wrappers (Time, Quantity, IntOrString, RawExtension...): inline the type.
            return self._type(target_schema, target)
        if target in self._building:
            # A cycle (JSONSchemaProps): a forward reference, resolved by model_rebuild.
            return ForwardRef(_ref_name(target))
        return self._model(target)

    def _inline(self, schema: Mapping[str, Any], where: str) -> Any:
        synthetic = f"{where}.__inline__"
        if synthetic not in self._models:
            self._schemas = {**self._schemas, synthetic: schema}
            self._model(synthetic)
        return self._models[synthetic]


def _ref_name(schema_name: str) -> str:
    return "M_" + re.sub(r"\W", "_", schema_name)
