"""Transforms: functions that shrink an object before it is cached.

A transform gets each object exactly once, right after it was decoded and before anything else
holds it (the watcher applies it to every listed, added, modified and deleted object), so it may
change the object in place and return it. It must be idempotent and fast: it runs on the hot
path, once per event.

:func:`compact` is the default of every informer: it drops ``metadata.managedFields``
(:func:`strip_managed_fields`: bookkeeping for server-side apply that controllers never read,
often the largest part of a small object) and makes repeated strings one object (below). Combine
transforms with :func:`chain`, e.g. ``chain(compact, drop_fields("status"))``.

A JSON decoder makes a new string for every value, so 100,000 cached objects hold 100,000 copies
of their apiVersion, kind and namespace, of their owners' apiVersion and kind, and of label
values and creation times that many share: ~0.3 KB per object, 12-15 % of a small ConfigMap
(bench/scale). :func:`compact` looks each of these up in one table of shared strings, bounded to
``SHARED_STRINGS_MAX`` entries (cleared when full, so values that never repeat cost nothing
lasting). Strings are immutable: sharing them changes nothing a reader can see. It also returns
the object itself, its ``metadata``, ``labels``, ``annotations`` and ``ownerReferences`` entries
as *shaped* dicts (:mod:`kubeop.cache.shapes`): plain dicts that share one table of keys with the
other objects' (~0.4 KB less per metadata-only object, ~2 us more per object); the content below
(``spec``, ``status``, ``data``) stays as decoded. An owner reference with the object's own name
gets the same name string.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubeop.cache.shapes import shaped

__all__ = ["SHARED_STRINGS_MAX", "Transform", "chain", "compact", "drop_fields", "strip_managed_fields"]

Obj = dict[str, Any]

#: An in-place transform: ``obj -> obj`` (usually the same dict, changed).
Transform = Callable[[Obj], Obj]


def strip_managed_fields(obj: Obj) -> Obj:
    """Drop ``metadata.managedFields`` (in place)."""
    meta = obj.get("metadata")
    if meta is not None and "managedFields" in meta:
        del meta["managedFields"]
    return obj


#: Entries of the table of shared strings before it is cleared (a few MB at most).
SHARED_STRINGS_MAX = 50_000
_shared: dict[str, str] = {}


def compact(obj: Obj) -> Obj:
    """Drop ``metadata.managedFields``, share repeated strings and key tables (see the module doc).

    Returns an equal object, possibly a new dict (the input's containers are reused or dropped)."""
    meta = obj.get("metadata")
    if type(meta) is not dict:
        return obj
    if "managedFields" in meta:
        del meta["managedFields"]
    table = _shared
    if len(table) >= SHARED_STRINGS_MAX:
        table.clear()
    share = table.setdefault
    value = obj.get("apiVersion")
    if type(value) is str:
        obj["apiVersion"] = share(value, value)
    value = obj.get("kind")
    if type(value) is str:
        obj["kind"] = share(value, value)
    value = meta.get("namespace")
    if type(value) is str:
        meta["namespace"] = share(value, value)
    value = meta.get("creationTimestamp")
    if type(value) is str:
        meta["creationTimestamp"] = share(value, value)
    labels = meta.get("labels")
    if type(labels) is dict and labels:
        for key, value in labels.items():
            if type(value) is str:
                labels[key] = share(value, value)
        meta["labels"] = shaped(labels)
    annotations = meta.get("annotations")
    if type(annotations) is dict and annotations:
        meta["annotations"] = shaped(annotations)
    owners = meta.get("ownerReferences")
    if type(owners) is list:
        name = meta.get("name")
        for i, owner in enumerate(owners):
            if type(owner) is dict:
                value = owner.get("apiVersion")
                if type(value) is str:
                    owner["apiVersion"] = share(value, value)
                value = owner.get("kind")
                if type(value) is str:
                    owner["kind"] = share(value, value)
                if name is not None and owner.get("name") == name:
                    owner["name"] = name  # an owned object is often named after its owner
                owners[i] = shaped(owner)
    if meta:
        obj["metadata"] = shaped(meta)
    return shaped(obj)


def drop_fields(*paths: str) -> Transform:
    """A transform that deletes the dotted ``paths`` (``"status"``, ``"metadata.annotations"``)
    where present. Only what the controller never reads should be dropped: cached objects are
    what handlers and reconcilers see."""
    split = [tuple(p.split(".")) for p in paths if p]

    def transform(obj: Obj) -> Obj:
        for parts in split:
            node: Any = obj
            for part in parts[:-1]:
                node = node.get(part) if isinstance(node, dict) else None
                if node is None:
                    break
            if isinstance(node, dict):
                node.pop(parts[-1], None)
        return obj

    return transform


def chain(*transforms: Transform | None) -> Transform | None:
    """Apply ``transforms`` in order (``None`` entries are skipped); ``None`` when none is left."""
    present = [t for t in transforms if t is not None]
    if not present:
        return None
    if len(present) == 1:
        return present[0]

    def transform(obj: Obj) -> Obj:
        for t in present:
            obj = t(obj)
        return obj

    return transform
