"""Cache keys: ``namespace/name`` for namespaced objects, ``name`` for cluster-scoped ones.

The same strings as :class:`kubeop.core.keys.ObjectKey` (``str(key_of(obj))``) and client-go's
``MetaNamespaceKeyFunc``, computed without building an ``ObjectKey`` because every cached event
needs one. Tombstones (:class:`~kubeop.cache.tombstone.DeletedFinalStateUnknown`) carry their key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubeop.cache.tombstone import DeletedFinalStateUnknown
from kubeop.core.keys import ObjectKey, parse_key

__all__ = ["KeyFunc", "object_key", "split_key"]

#: How a store or queue derives the key of an object.
KeyFunc = Callable[[Any], str]


def object_key(obj: Any) -> str:
    """The key of an object dict or of a tombstone; ValueError when the object has no name."""
    if type(obj) is DeletedFinalStateUnknown:
        return obj.key
    try:
        meta = obj["metadata"]
        name = meta["name"]
    except (KeyError, TypeError):
        name = None
    if not name:
        kind = obj.get("kind") if isinstance(obj, dict) else type(obj).__name__
        raise ValueError(f"{kind or 'object'} has no metadata.name: cannot compute its cache key")
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else name


def split_key(key: str) -> ObjectKey:
    """``"ns/name"`` -> ``ObjectKey("ns", "name")``, ``"name"`` -> ``ObjectKey("", "name")``."""
    return parse_key(key)
