"""Transforms: functions that shrink an object before it is cached.

A transform gets each object exactly once, right after it was decoded and before anything else
holds it (the watcher applies it to every listed, added, modified and deleted object), so it may
change the object in place and return it. It must be idempotent and fast: it runs on the hot
path, once per event.

:func:`strip_managed_fields` is the default of every informer: ``metadata.managedFields`` is
bookkeeping for server-side apply that controllers never read, and is often the largest part of
a small object. Combine transforms with :func:`chain`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Transform", "chain", "drop_fields", "strip_managed_fields"]

Obj = dict[str, Any]

#: An in-place transform: ``obj -> obj`` (usually the same dict, changed).
Transform = Callable[[Obj], Obj]


def strip_managed_fields(obj: Obj) -> Obj:
    """Drop ``metadata.managedFields`` (in place)."""
    meta = obj.get("metadata")
    if meta is not None and "managedFields" in meta:
        del meta["managedFields"]
    return obj


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
