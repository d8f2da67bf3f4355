"""Object keys (``ns/name`` or ``name``) and object references.

Keys are what work queues and caches are indexed by; they match client-go's
``MetaNamespaceKeyFunc`` so logs and tools read the same on both sides.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ObjectKey", "ObjectRef", "key_of", "parse_key", "ref_of"]


@dataclass(frozen=True, slots=True, order=True)
class ObjectKey:
    """Namespace and name; ``namespace`` is ``""`` for cluster-scoped objects."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def key_of(obj: Mapping[str, Any]) -> ObjectKey:
    """The key of an object dict; raises ValueError if it has no name."""
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise ValueError(f"{obj.get('kind') or 'object'} has no metadata.name")
    return ObjectKey(meta.get("namespace") or "", name)


def parse_key(key: str) -> ObjectKey:
    """Parse ``"ns/name"`` or ``"name"``; anything else is a ValueError."""
    parts = key.split("/")
    if len(parts) == 1 and parts[0]:
        return ObjectKey("", parts[0])
    if len(parts) == 2 and parts[0] and parts[1]:
        return ObjectKey(parts[0], parts[1])
    raise ValueError(f"invalid object key {key!r}: expected 'namespace/name' or 'name'")


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """A reference to one object of a known kind (like corev1.ObjectReference, minus fieldPath)."""

    api_version: str
    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""

    @property
    def key(self) -> ObjectKey:
        """The object's namespace and name, without its kind."""
        return ObjectKey(self.namespace, self.name)

    def to_dict(self) -> dict[str, str]:
        """The wire form (``apiVersion``, ``kind``, ...), omitting empty fields."""
        out = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        if self.resource_version:
            out["resourceVersion"] = self.resource_version
        return out

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"


def ref_of(obj: Mapping[str, Any]) -> ObjectRef:
    """A reference to ``obj``; apiVersion and kind must be set (lists strip them from items)."""
    meta = obj.get("metadata") or {}
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if not api_version or not kind:
        raise ValueError(f"object {meta.get('name')!r} has no apiVersion/kind; cannot build a reference")
    return ObjectRef(
        api_version=api_version,
        kind=kind,
        name=meta.get("name") or "",
        namespace=meta.get("namespace") or "",
        uid=meta.get("uid") or "",
        resource_version=meta.get("resourceVersion") or "",
    )
