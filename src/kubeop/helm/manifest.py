"""Release manifests: parse them into objects, and decide whether two of them differ.

A release manifest is the multi-document YAML Helm rendered (and stored in the release). Two
manifests are *equal* when they hold the same objects with the same content, whatever their
comments, whitespace, key order or document order: an upgrade is needed exactly when the
objects differ, not when Helm's formatting would. Parsing uses libyaml when PyYAML has it and
is memoised, so comparing a stored manifest on every reconcile costs a dictionary lookup.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = [
    "ManifestDiff",
    "ManifestError",
    "ObjectKey",
    "diff_manifests",
    "manifest_kinds",
    "manifests_equal",
    "object_key",
    "parse_manifest",
]

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestError(ValueError):
    """A manifest that is not a stream of YAML objects."""


@dataclass(frozen=True, order=True, slots=True)
class ObjectKey:
    """Identity of one object in a manifest: apiVersion, kind, namespace ("" if unset), name."""

    api_version: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    md = obj.get("metadata") or {}
    return ObjectKey(
        str(obj.get("apiVersion") or ""),
        str(obj.get("kind") or ""),
        str(md.get("namespace") or ""),
        str(md.get("name") or ""),
    )


def parse_manifest(manifest: str) -> tuple[dict[str, Any], ...]:
    """The objects of a manifest, in order; empty documents are skipped and ``kind: List``
    documents are replaced by their items. The result is shared (memoised): do not mutate it.
    Raises :class:`ManifestError` for invalid YAML or a document that is not a mapping."""
    return _parse(manifest)


@functools.lru_cache(maxsize=1024)
def _parse(manifest: str) -> tuple[dict[str, Any], ...]:
    try:
        docs = list(yaml.load_all(manifest, Loader=_Loader))
    except yaml.YAMLError as e:
        raise ManifestError(f"the manifest is not valid YAML: {e}") from None
    out: list[dict[str, Any]] = []
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise ManifestError(f"a manifest document is not an object: {str(doc)[:80]!r}")
        if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            out.extend(item for item in doc["items"] if isinstance(item, dict))
        else:
            out.append(doc)
    return tuple(out)


def _by_key(objects: Iterable[Mapping[str, Any]]) -> dict[ObjectKey, Mapping[str, Any]]:
    return {object_key(o): o for o in objects}


def manifests_equal(a: str, b: str) -> bool:
    """Do two manifests describe the same objects with the same content? (See the module docs.)"""
    if a == b:
        return True
    return _by_key(parse_manifest(a)) == _by_key(parse_manifest(b))


@dataclass(frozen=True)
class ManifestDiff:
    """What an upgrade from ``old`` to ``new`` would do, object by object."""

    added: tuple[ObjectKey, ...] = ()
    removed: tuple[ObjectKey, ...] = ()
    changed: tuple[ObjectKey, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def summary(self) -> str:
        parts = []
        for label, keys in (("added", self.added), ("changed", self.changed), ("removed", self.removed)):
            if keys:
                parts.append(f"{label}: {', '.join(str(k) for k in keys)}")
        return "; ".join(parts) or "no object changes"


def diff_manifests(old: str, new: str) -> ManifestDiff:
    """Which objects ``new`` adds, removes or changes compared with ``old``."""
    before = _by_key(parse_manifest(old)) if old else {}
    after = _by_key(parse_manifest(new)) if new else {}
    return ManifestDiff(
        added=tuple(sorted(k for k in after if k not in before)),
        removed=tuple(sorted(k for k in before if k not in after)),
        changed=tuple(sorted(k for k in after if k in before and after[k] != before[k])),
    )


def manifest_kinds(objects: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """The distinct (apiVersion, kind) pairs of ``objects``, in first-seen order."""
    seen: dict[tuple[str, str], None] = {}
    for obj in objects:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if isinstance(api_version, str) and isinstance(kind, str) and api_version and kind:
            seen.setdefault((api_version, kind), None)
    return list(seen)
