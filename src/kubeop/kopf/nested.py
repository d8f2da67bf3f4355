"""Nested fields of objects and patches, as kopf's storages handle them: read, set (making the
mappings on the way), remove (with the parents left empty), and the stanzas an essence drops
when empty."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, MutableMapping
from typing import Any

from kubeop.kopf.bodies import Patch
from kubeop.kopf.diffs import FieldPath, FieldSpec, parse_field

__all__ = ["ensure", "field_of", "remove", "remove_annotations", "remove_empty_stanzas", "resolve_field"]

ABSENT: Any = object()
_STANZAS = ("metadata", "spec", "status")


def field_of(spec: FieldSpec, name: str) -> FieldPath:
    """A storage's field as kopf takes it: a dotted string with ``{name}`` filled in, or a path."""
    return parse_field(spec.format(name=name) if isinstance(spec, str) else spec)


def resolve_field(obj: Any, path: Iterable[str], default: Any = None) -> Any:
    for key in path:
        if type(obj) is not dict and not isinstance(obj, Mapping):
            return default
        obj = obj.get(key, ABSENT)
        if obj is ABSENT:
            return default
    return obj


def ensure(obj: MutableMapping[str, Any], path: FieldPath, value: Any) -> None:
    """Set ``path`` inside ``obj`` to ``value``, making the mappings on the way (a patch's
    stanzas as its own, so that ``patch.metadata.annotations`` reads what was set)."""
    if isinstance(obj, Patch) and len(path) > 1 and path[0] in _STANZAS:
        obj, path = getattr(obj, path[0]), path[1:]
    for key in path[:-1]:
        nxt = obj.get(key)
        if not isinstance(nxt, MutableMapping):
            nxt = obj[key] = {}
        obj = nxt
    obj[path[-1]] = value


def remove(obj: MutableMapping[str, Any], path: FieldPath) -> None:
    """Remove ``path`` from ``obj`` (nothing if absent), then its parents left empty."""
    parents: list[tuple[MutableMapping[str, Any], str]] = []
    for key in path[:-1]:
        nxt = obj.get(key)
        if not isinstance(nxt, MutableMapping):
            return
        parents.append((obj, key))
        obj = nxt
    obj.pop(path[-1], None)
    for parent, key in reversed(parents):
        if parent[key]:
            break
        del parent[key]


def remove_annotations(essence: MutableMapping[str, Any], keys_to_remove: Collection[str]) -> None:
    """Drop ``keys_to_remove`` from ``essence``'s annotations (a new dict, only when one is there):
    what kopf's progress and diff-base storages both strip from an essence."""
    annotations = (essence.get("metadata") or {}).get("annotations") or {}
    if frozenset(keys_to_remove) & frozenset(annotations):
        essence["metadata"]["annotations"] = {k: v for k, v in annotations.items() if k not in keys_to_remove}


def remove_empty_stanzas(essence: MutableMapping[str, Any]) -> None:
    """Drop empty ``metadata.annotations``/``labels``, ``metadata`` and ``status`` (as kopf does)."""
    meta = essence.get("metadata")
    if isinstance(meta, MutableMapping):
        for key in ("annotations", "labels"):
            if key in meta and not meta[key]:
                del meta[key]
        if not meta:
            del essence["metadata"]
    if "status" in essence and not essence["status"]:
        del essence["status"]
