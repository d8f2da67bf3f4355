"""ServedResource: one kind an aggregated API serves, from the same CustomResource model a CRD
would be generated from (its group, version, kind, names, scope, printer columns, status
subresource and selectable fields), plus what the server needs of it: validation (the model's,
as 422 Invalid with one cause per field), Table rows and its discovery entry."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from kubeop.apiserver.apply import Ownership
from kubeop.apiserver.patch import ListRule
from kubeop.apiserver.scale import SCALE_KIND
from kubeop.apiserver.status import StatusError
from kubeop.crd.declaration import Declaration, PrinterColumn
from kubeop.crd.resource import CustomResource
from kubeop.crd.schema import resource_schema

__all__ = ["ServedResource"]

_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
# metadata and status are the server's: a model validates what the user wrote
# ObjectMeta's patch strategies (finalizers merge as a set, owner references by uid)
_META_LISTS = {("metadata", "finalizers"): ListRule(), ("metadata", "ownerReferences"): ListRule("uid")}
_SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "generation")


class ServedResource:
    """One served kind (see the module docstring). ``model`` is a CustomResource subclass
    declared with ``group=`` and ``version=``."""

    def __init__(self, model: type[CustomResource]) -> None:
        decl = getattr(model, "__crd__", None)
        if not isinstance(decl, Declaration):
            raise TypeError(
                f"{model!r} is not a declared kind: subclass CustomResource with group= and version= "
                "(class Widget(CustomResource, group='example.com', version='v1'))"
            )
        self.model = model
        self.decl = decl
        self.key = f"{decl.group}/{decl.plural}"
        self.columns: tuple[PrinterColumn, ...] = decl.printer_columns or (PrinterColumn.age(),)
        self._schema: dict[str, Any] | None = None
        self._ownership: Ownership | None = None

    def __repr__(self) -> str:
        return f"<ServedResource {self.decl.plural}.{self.decl.group}/{self.decl.version}>"

    @property
    def namespaced(self) -> bool:
        return self.decl.namespaced

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAPI v3 schema of the object (the CRD generator's)."""
        if self._schema is None:
            self._schema = resource_schema(self.model)
        return self._schema

    @property
    def ownership(self) -> Ownership:
        """Who owns which fields of these objects (server-side apply, managedFields)."""
        if self._ownership is None:
            self._ownership = Ownership(
                self.schema, self.decl.api_version, status_subresource=self.decl.status_subresource
            )
        return self._ownership

    @property
    def strategic(self) -> bool:
        """Whether strategic merge patch applies: the model declares a list type (``ListType('map',
        keys=...)`` or ``'set'``) somewhere, the patch strategy of a typed kind. A kind without one
        answers 415, as kube-apiserver does for a CRD."""
        return _declares_list_type(self.schema)

    def list_rule(self, path: tuple[str, ...]) -> ListRule | None:
        """How strategic merge merges the list at ``path`` (field names from the root): by its
        one map key, as a set, or (None) replaced whole (atomic lists and lists keyed by several
        fields, which have no single patch merge key)."""
        if path in _META_LISTS:
            return _META_LISTS[path]
        node: Any = self.schema
        for name in path:
            if node.get("type") == "array":
                node = node.get("items") or {}
            properties = node.get("properties") or {}
            extra = node.get("additionalProperties")
            node = properties.get(name, extra if isinstance(extra, dict) else {})
        kind, keys = node.get("x-kubernetes-list-type"), node.get("x-kubernetes-list-map-keys") or []
        if kind == "set":
            return ListRule()
        if kind == "map" and len(keys) == 1:
            return ListRule(keys[0])
        return None

    def validate(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """``obj`` as the model reads it back (defaults filled in, unknown fields dropped, as the
        API server prunes a CRD's objects; ``metadata`` kept as it came); 422 Invalid with one
        cause per wrong field when the model rejects it."""
        try:
            valid = self.model.model_validate(obj)
        except ValidationError as exc:
            causes = [
                ("FieldValueInvalid", err["msg"], ".".join(str(p) for p in err["loc"]) or "<root>")
                for err in exc.errors(include_url=False, include_input=False)
            ]
            name = (obj.get("metadata") or {}).get("name", "")
            fields = "; ".join(f"{f}: {m}" for _, m, f in causes[:5])
            raise StatusError(
                422,
                f'{self.decl.kind} "{name}" is invalid: {fields}',
                group=self.decl.group,
                kind=self.decl.kind,
                name=str(name),
                causes=causes,
            ) from None
        out: dict[str, Any] = valid.model_dump(mode="json", exclude_none=True)
        out["metadata"] = obj.get("metadata") or {}
        return out

    def discovery(self) -> list[dict[str, Any]]:
        """The APIResource entries of this kind (and of its status and scale subresources)."""
        decl = self.decl
        entry: dict[str, Any] = {
            "name": decl.plural,
            "singularName": decl.singular,
            "namespaced": decl.namespaced,
            "kind": decl.kind,
            "verbs": _VERBS,
        }
        if decl.short_names:
            entry["shortNames"] = list(decl.short_names)
        if decl.categories:
            entry["categories"] = list(decl.categories)
        out = [entry]
        if decl.status_subresource:
            out.append(
                {
                    "name": f"{decl.plural}/status",
                    "singularName": "",
                    "namespaced": decl.namespaced,
                    "kind": decl.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
        if decl.scale is not None:
            out.append(
                {
                    "name": f"{decl.plural}/scale",
                    "singularName": "",
                    "namespaced": decl.namespaced,
                    **SCALE_KIND,
                    "verbs": ["get", "patch", "update"],
                }
            )
        return out

    def table(
        self, objects: Sequence[Mapping[str, Any]], include: str, *, definitions: bool = True
    ) -> dict[str, Any]:
        """A ``meta.k8s.io/v1 Table`` of ``objects`` (kubectl get): Name, then the printer columns.
        ``include`` is the includeObject parameter: Object, Metadata (default) or None."""
        rows = []
        for obj in objects:
            cells: list[Any] = [(obj.get("metadata") or {}).get("name", "")]
            cells.extend(_cell(obj, column) for column in self.columns)
            row: dict[str, Any] = {"cells": cells}
            if include == "Object":
                row["object"] = obj
            elif include != "None":
                row["object"] = {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj.get("metadata", {}),
                }
            rows.append(row)
        table: dict[str, Any] = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {}}
        if definitions:
            table["columnDefinitions"] = [
                {
                    "name": "Name",
                    "type": "string",
                    "format": "name",
                    "description": "the object's name",
                    "priority": 0,
                },
                *(
                    {
                        "name": c.name,
                        "type": c.type or "string",
                        "format": c.format or "",
                        "description": c.description or "",
                        "priority": c.priority,
                    }
                    for c in self.columns
                ),
            ]
        table["rows"] = rows
        return table


def _declares_list_type(node: Any) -> bool:
    if isinstance(node, dict):
        if node.get("x-kubernetes-list-type") in ("map", "set"):
            return True
        return any(_declares_list_type(v) for v in node.values())
    if isinstance(node, list):
        return any(_declares_list_type(v) for v in node)
    return False


def _cell(obj: Mapping[str, Any], column: PrinterColumn) -> Any:
    value: Any = obj
    for part in column.json_path.lstrip(".").split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return None
    if column.type == "date" and isinstance(value, str):
        return _age(value)
    if isinstance(value, dict | list):
        return str(value)
    return value


def _age(timestamp: str) -> str:
    """kubectl's short age (``5m``, ``3h``, ``2d``) of an RFC 3339 time; the text if unparsable."""
    try:
        then = dt.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return timestamp
    seconds = max(0, int((dt.datetime.now(dt.UTC) - then).total_seconds()))
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
