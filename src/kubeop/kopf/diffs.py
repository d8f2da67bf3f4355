"""Essences and diffs: what of an object counts as a change, and how two versions differ.

The *essence* of an object is what its handlers react to: everything but ``status``,
``apiVersion``/``kind`` and the system metadata, keeping labels and annotations (without the
operators' own bookkeeping annotations and kubectl's last-applied configuration). Two objects
with equal essences are the same as far as change handlers go; a status write is not a change.

A diff is a tuple of ``(op, field, old, new)`` items, ``op`` one of ``add``/``change``/``remove``
and ``field`` a tuple of keys (``()`` is the root); lists are compared as a whole. That is kopf's
diff format, so handlers that read ``diff`` work unchanged.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from kubeop.core.model import copy_json

__all__ = [
    "Diff",
    "DiffItem",
    "DiffOperation",
    "FieldPath",
    "FieldSpec",
    "diff",
    "essence",
    "parse_field",
    "reduce",
    "resolve",
]

FieldPath = tuple[str, ...]
FieldSpec = str | FieldPath | list[str] | None
"""A field as handlers name it: ``"spec.size"``, ``("spec", "size")`` or ``["spec", "size"]``."""


class DiffOperation(enum.StrEnum):
    """The operation of a :class:`DiffItem` (equal to the strings kubeop's diffs carry)."""

    ADD = "add"
    CHANGE = "change"
    REMOVE = "remove"


#: Annotations that are bookkeeping, never a change: ours, kopf's, kubectl's.
IGNORED_ANNOTATION_PREFIXES = ("kopf.zalando.org/", "kopf.kubeop.dev/")
IGNORED_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})


class DiffItem(NamedTuple):
    operation: str
    field: FieldPath
    old: Any
    new: Any


Diff = tuple[DiffItem, ...]


def parse_field(field: str | Iterable[str] | None) -> FieldPath:
    """``"spec.field"`` or ``["spec", "field"]`` as a tuple of keys (``()`` for None)."""
    if field is None or field == "":
        return ()
    parts = tuple(field.split(".")) if isinstance(field, str) else tuple(field)
    if any(not isinstance(p, str) or not p for p in parts):
        raise ValueError(f"field {field!r} has an empty part: write it as 'spec.key' or ('spec', 'key')")
    return parts


_ABSENT: Any = object()


def resolve(obj: Any, path: FieldPath, default: Any = None) -> Any:
    """The value at ``path`` inside ``obj`` (nested mappings), or ``default`` if absent."""
    for key in path:
        if not isinstance(obj, Mapping) or key not in obj:
            return default
        obj = obj[key]
    return obj


def essence(body: Mapping[str, Any], extra_fields: Iterable[FieldPath] = ()) -> dict[str, Any]:
    """The part of ``body`` that change handlers react to (see the module docstring).

    ``extra_fields`` are kept even inside the stanzas left out (``status.phase`` for a handler
    watching that field).
    """
    out: dict[str, Any] = {
        k: copy_json(v) for k, v in body.items() if k not in ("apiVersion", "kind", "metadata", "status")
    }
    md = body.get("metadata") or {}
    meta: dict[str, Any] = {}
    labels = md.get("labels")
    if labels:
        meta["labels"] = dict(labels)
    annotations = {
        k: v
        for k, v in (md.get("annotations") or {}).items()
        if k not in IGNORED_ANNOTATIONS and not k.startswith(IGNORED_ANNOTATION_PREFIXES)
    }
    if annotations:
        meta["annotations"] = annotations
    if meta:
        out["metadata"] = meta
    for path in extra_fields:
        value = resolve(body, path, _ABSENT)
        if value is _ABSENT or not path:
            continue
        target = out
        for key in path[:-1]:
            nxt = target.get(key)
            if not isinstance(nxt, dict):
                nxt = target[key] = {}
            target = nxt
        target[path[-1]] = copy_json(value)
    return out


def _diff_iter(a: Any, b: Any, path: FieldPath) -> Iterator[DiffItem]:
    if a == b:
        return
    if a is None:
        yield DiffItem("add", path, None, b)
    elif b is None:
        yield DiffItem("remove", path, a, None)
    elif isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in b.keys() - a.keys():
            yield from _diff_iter(None, b[key], (*path, key))
        for key in a.keys() - b.keys():
            yield from _diff_iter(a[key], None, (*path, key))
        for key in a.keys() & b.keys():
            yield from _diff_iter(a[key], b[key], (*path, key))
    else:
        yield DiffItem("change", path, a, b)


def diff(old: Any, new: Any) -> Diff:
    """The differences from ``old`` to ``new`` (empty when equal); keys in sorted order."""
    return tuple(sorted(_diff_iter(old, new, ()), key=lambda item: item.field))


def reduce(d: Diff, path: FieldPath) -> Diff:
    """The part of diff ``d`` inside ``path``, with fields relative to it (kopf's field-handler diff)."""
    out: list[DiffItem] = []
    n = len(path)
    for op, field, old, new in d:
        if field[:n] == path:  # at or below the path
            out.append(DiffItem(op, field[n:], old, new))
        elif path[: len(field)] == field:  # above the path: narrow the values down to it
            sub = path[len(field) :]
            o, nw = resolve(old, sub), resolve(new, sub)
            out.extend(DiffItem(*item) for item in _diff_iter(o, nw, ()))
    return tuple(out)
