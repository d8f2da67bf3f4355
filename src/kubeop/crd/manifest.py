"""CustomResourceDefinition manifests from CustomResource classes, and YAML rendering.

::

    crd = crd_manifest(CronTab)                       # one kind, one version
    crd = crd_manifest([CronTabV1Beta1, CronTab])     # one kind, several versions
    crds = crd_manifests([CronTab, Backup, Restore])  # grouped by kind, one CRD each
    print(render_yaml(crds))

Guarantees: the result is an ``apiextensions.k8s.io/v1`` CRD whose schemas are structural and
whose names, columns, subresources and versions pass the API server's validation; everything
checkable without a server is checked here and raised as a :class:`~kubeop.crd.errors.CRDError`
that names the class. Not checked: CEL rules compile and stay within the server's cost budget.

Versions: exactly one is the storage version (a lone version is it by default). Several
versions get ``conversion: {strategy: None}``: the server only rewrites ``apiVersion``, so the
schemas must be compatible (fields missing from a version are pruned when read through it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import Any

import yaml

from kubeop.crd.declaration import Declaration, PrinterColumn
from kubeop.crd.errors import DeclarationError, VersionError
from kubeop.crd.names import class_name, version_priority
from kubeop.crd.resource import CustomResource
from kubeop.crd.schema import resource_schema

__all__ = ["crd_manifest", "crd_manifests", "custom_resources", "render_yaml"]

Obj = dict[str, Any]
ModelClass = type[CustomResource]

_MAX_SELECTABLE_FIELDS = 8
_SIMPLE_PATH = re.compile(r"^(\.[A-Za-z_$][A-Za-z0-9_$-]*)+$")
_SHARED = ("group", "kind", "plural", "singular", "scope", "short_names", "categories")


def crd_manifest(
    models: ModelClass | Sequence[ModelClass],
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Obj:
    """The CRD for one kind: one class, or one class per version of the same kind."""
    classes = [models] if isinstance(models, type) else list(models)
    if not classes:
        raise VersionError("crd_manifest needs at least one CustomResource class")
    decls = [_declaration(c) for c in classes]
    _check_same_kind(classes, decls)
    storage = _storage_flags(classes, decls)
    first = decls[0]
    names: Obj = {
        "kind": first.kind,
        "listKind": first.list_kind,
        "plural": first.plural,
        "singular": first.singular,
    }
    if first.short_names:
        names["shortNames"] = list(first.short_names)
    if first.categories:
        names["categories"] = list(first.categories)
    order = sorted(range(len(classes)), key=lambda i: version_priority(decls[i].version), reverse=True)
    spec: Obj = {
        "group": first.group,
        "names": names,
        "scope": first.scope,
        "versions": [_version(classes[i], decls[i], storage[i]) for i in order],
    }
    if len(classes) > 1:
        spec["conversion"] = {"strategy": "None"}
    metadata: Obj = {"name": first.crd_name}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": spec,
    }


def crd_manifests(
    models: Iterable[ModelClass],
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> list[Obj]:
    """One CRD per kind among ``models`` (the versions of a kind are grouped), sorted by name."""
    by_kind: dict[tuple[str, str], list[ModelClass]] = {}
    for cls in models:
        decl = _declaration(cls)
        by_kind.setdefault((decl.group, decl.kind), []).append(cls)
    crds = [crd_manifest(group, labels=labels, annotations=annotations) for group in by_kind.values()]
    seen: dict[str, str] = {}
    for crd, group in zip(crds, by_kind.values(), strict=True):
        name, kind = crd["metadata"]["name"], crd["spec"]["names"]["kind"]
        if name in seen:
            raise VersionError(
                f"two kinds, {seen[name]} and {kind}, would both be CRD {name}; give one of them "
                f"another plural (declared by {', '.join(class_name(c) for c in group)})"
            )
        seen[name] = kind
    return sorted(crds, key=lambda c: str(c["metadata"]["name"]))


def custom_resources(*modules: ModuleType) -> list[ModelClass]:
    """The declared CustomResource classes defined at the top level of ``modules``, in order.

    What ``kubeop manifests`` feeds to :func:`crd_manifests` after importing a project's API
    package; classes imported from elsewhere are left to their own module.
    """
    found: list[ModelClass] = []
    for module in modules:
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, CustomResource)
                and value.is_declared()
                and value.__module__ == module.__name__
                and value not in found
            ):
                found.append(value)
    return found


def render_yaml(objs: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> str:
    """Objects as a multi-document YAML stream (``---`` before each), keys in their given order."""
    docs = [objs] if isinstance(objs, Mapping) else list(objs)
    return "".join(
        "---\n" + yaml.dump(_plain(d), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=1 << 16)
        for d in docs
    )


class _Dumper(yaml.SafeDumper):
    """Multi-line strings as ``|`` blocks, never an anchor (``&id001``) for an object met twice;
    everything else as SafeDumper writes it."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def _plain(value: Any) -> Any:
    # Mappings and tuples from callers become plain dicts and lists, which SafeDumper can write.
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _declaration(cls: Any) -> Declaration:
    if not (isinstance(cls, type) and issubclass(cls, CustomResource)):
        raise DeclarationError(f"{cls!r} is not a CustomResource class")
    if not cls.is_declared():
        raise DeclarationError(
            f"{class_name(cls)} declares no kind: subclass CustomResource with group= and version= "
            f"(class {class_name(cls)}(CustomResource, group='example.com', version='v1'))"
        )
    return cls.__crd__


def _check_same_kind(classes: list[ModelClass], decls: list[Declaration]) -> None:
    first, owner = decls[0], class_name(classes[0])
    for cls, decl in zip(classes[1:], decls[1:], strict=True):
        for attr in _SHARED:
            if getattr(decl, attr) != getattr(first, attr):
                raise VersionError(
                    f"{class_name(cls)} and {owner} are versions of one CRD but differ in {attr} "
                    f"({getattr(decl, attr)!r} vs {getattr(first, attr)!r}); versions share group, kind, "
                    "names, scope, short names and categories"
                )
    seen: dict[str, str] = {}
    for cls, decl in zip(classes, decls, strict=True):
        if decl.version in seen:
            raise VersionError(
                f"{class_name(cls)} and {seen[decl.version]} both declare {decl.api_version} {decl.kind}; "
                "give each class its own version="
            )
        seen[decl.version] = class_name(cls)


def _storage_flags(classes: list[ModelClass], decls: list[Declaration]) -> list[bool]:
    if len(decls) == 1:
        if decls[0].storage is False:
            raise VersionError(
                f"{class_name(classes[0])} is the only version of {decls[0].kind} and must be the storage "
                "version; drop storage=False"
            )
        return [True]
    flags = [d.storage is True for d in decls]
    marked = [class_name(c) for c, f in zip(classes, flags, strict=True) if f]
    if len(marked) != 1:
        versions = ", ".join(f"{class_name(c)} ({d.version})" for c, d in zip(classes, decls, strict=True))
        problem = "none is marked" if not marked else f"{', '.join(marked)} are all marked"
        raise VersionError(
            f"{decls[0].kind} has versions {versions} and needs exactly one storage version, but {problem}; "
            "declare storage=True on the one objects are stored in"
        )
    return flags


def _version(cls: ModelClass, decl: Declaration, storage: bool) -> Obj:
    schema = resource_schema(cls, [r.to_schema() for r in decl.validations])
    props = schema.get("properties", {})
    version: Obj = {"name": decl.version, "served": decl.served, "storage": storage}
    if decl.deprecated:
        version["deprecated"] = True
        if decl.deprecation_warning:
            version["deprecationWarning"] = decl.deprecation_warning
    version["schema"] = {"openAPIV3Schema": schema}
    subresources: Obj = {}
    if decl.status_subresource:
        if "status" not in props:
            raise DeclarationError(
                f"{class_name(cls)} declares the status subresource but has no status field; "
                "add one (status: MyStatus | None = None) or drop 'status' from subresources"
            )
        subresources["status"] = {}
    if decl.scale is not None:
        scale = decl.scale
        _need_field(cls, schema, scale.spec_replicas_path, ("integer",), "Scale spec_replicas_path")
        _need_field(cls, schema, scale.status_replicas_path, ("integer",), "Scale status_replicas_path")
        if scale.label_selector_path:
            _need_field(cls, schema, scale.label_selector_path, ("string",), "Scale label_selector_path")
        subresources["scale"] = scale.to_dict()
    if subresources:
        version["subresources"] = subresources
    if decl.printer_columns:
        version["additionalPrinterColumns"] = [_column(cls, schema, c) for c in decl.printer_columns]
    if decl.selectable_fields:
        version["selectableFields"] = _selectable(cls, schema, decl.selectable_fields)
    return version


def _resolve(schema: Obj, path: str) -> tuple[Obj | None, bool]:
    """The schema node at a dotted path, and whether the path went through an open object."""
    node: Obj = schema
    for part in path.lstrip(".").split("."):
        props = node.get("properties") or {}
        if part in props:
            node = props[part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None, bool(node.get("x-kubernetes-preserve-unknown-fields"))
    return node, False


def _need_field(cls: ModelClass, schema: Obj, path: str, types: tuple[str, ...], what: str) -> Obj:
    node, open_ended = _resolve(schema, path)
    if node is None and open_ended:
        return {}
    if node is None:
        raise DeclarationError(f"{class_name(cls)}: {what} {path!r} names no field of the schema")
    if node.get("type") not in types:
        raise DeclarationError(
            f"{class_name(cls)}: {what} {path!r} must be a field of type {' or '.join(types)}, "
            f"not {node.get('type', 'untyped')}"
        )
    return node


def _column(cls: ModelClass, schema: Obj, col: PrinterColumn) -> Obj:
    type_: str | None = col.type
    fmt = col.format
    simple = bool(_SIMPLE_PATH.match(col.json_path))
    if col.json_path == ".metadata.creationTimestamp":
        type_ = type_ or "date"
    elif simple and not col.json_path.startswith(".metadata."):
        node, open_ended = _resolve(schema, col.json_path)
        if node is None and not open_ended:
            raise DeclarationError(
                f"{class_name(cls)}: printer column {col.name!r} path {col.json_path!r} names no field "
                "of the schema (paths use the JSON names, e.g. .spec.cronSpec)"
            )
        if type_ is None and node is not None:
            type_ = _column_type(node)
    out: Obj = {"name": col.name, "type": type_ or "string", "jsonPath": col.json_path}
    if fmt:
        out["format"] = fmt
    if col.description:
        out["description"] = col.description
    if col.priority:
        out["priority"] = col.priority
    return out


def _column_type(node: Obj) -> str:
    t = node.get("type")
    if t in ("integer", "number", "boolean"):
        return str(t)
    if t == "string" and node.get("format") in ("date-time", "datetime"):
        return "date"
    return "string"


def _selectable(cls: ModelClass, schema: Obj, paths: Sequence[str]) -> list[Obj]:
    if len(set(paths)) != len(paths):
        raise DeclarationError(f"{class_name(cls)}: selectable_fields repeat a path: {list(paths)}")
    if len(paths) > _MAX_SELECTABLE_FIELDS:
        raise DeclarationError(
            f"{class_name(cls)}: at most {_MAX_SELECTABLE_FIELDS} selectable_fields are allowed, "
            f"got {len(paths)}"
        )
    for path in paths:
        node, _ = _resolve(schema, path)
        if node is None or node.get("type") not in ("string", "boolean", "integer"):
            raise DeclarationError(
                f"{class_name(cls)}: selectable field {path!r} must name a string, boolean or integer "
                "field of the schema"
            )
    return [{"jsonPath": p} for p in paths]
