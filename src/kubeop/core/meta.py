"""ObjectMeta helpers over plain object dicts.

Objects stay the dicts the server sent (decoded once); these helpers read and edit their
``metadata`` without building model objects. Readers never mutate and return empty values for
missing fields; the few writers (finalizers, labels, owner references) report whether they changed
anything, so callers can skip a write when nothing changed.
"""

from collections.abc import Mapping, MutableMapping
from typing import Any

__all__ = [
    "add_finalizer",
    "annotations",
    "controller_of",
    "finalizers",
    "generation",
    "has_finalizer",
    "is_being_deleted",
    "labels",
    "name",
    "namespace",
    "owner_references",
    "remove_finalizer",
    "resource_version",
    "set_annotation",
    "set_label",
    "set_owner_reference",
    "uid",
]

_EMPTY: Mapping[str, Any] = {}


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if (type(meta) is dict or isinstance(meta, Mapping)) else _EMPTY


def _meta_mut(obj: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    return meta


def name(obj: Mapping[str, Any]) -> str:
    return _meta(obj).get("name") or ""


def namespace(obj: Mapping[str, Any]) -> str:
    return _meta(obj).get("namespace") or ""


def uid(obj: Mapping[str, Any]) -> str:
    return _meta(obj).get("uid") or ""


def resource_version(obj: Mapping[str, Any]) -> str:
    return _meta(obj).get("resourceVersion") or ""


def generation(obj: Mapping[str, Any]) -> int:
    """metadata.generation, 0 when unset (objects without spec/status split never get one)."""
    return int(_meta(obj).get("generation") or 0)


def labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("labels") or _EMPTY


def annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("annotations") or _EMPTY


def finalizers(obj: Mapping[str, Any]) -> list[str]:
    return list(_meta(obj).get("finalizers") or ())


def owner_references(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(_meta(obj).get("ownerReferences") or ())


def is_being_deleted(obj: Mapping[str, Any]) -> bool:
    """True once deletionTimestamp is set: finalizers are running, no new work should start."""
    return bool(_meta(obj).get("deletionTimestamp"))


def has_finalizer(obj: Mapping[str, Any], finalizer: str) -> bool:
    return finalizer in (_meta(obj).get("finalizers") or ())


def add_finalizer(obj: MutableMapping[str, Any], finalizer: str) -> bool:
    """Append ``finalizer`` unless present; returns True if the object changed.

    The server does not deduplicate finalizers, so adding twice would leave a duplicate that
    must be removed twice.
    """
    meta = _meta_mut(obj)
    current = meta.get("finalizers") or []
    if finalizer in current:
        return False
    meta["finalizers"] = [*current, finalizer]
    return True


def remove_finalizer(obj: MutableMapping[str, Any], finalizer: str) -> bool:
    """Remove every occurrence of ``finalizer``; returns True if the object changed."""
    meta = _meta_mut(obj)
    current = meta.get("finalizers") or []
    kept = [f for f in current if f != finalizer]
    if len(kept) == len(current):
        return False
    meta["finalizers"] = kept
    return True


def set_label(obj: MutableMapping[str, Any], key: str, value: str) -> bool:
    """Set one label; returns True if the object changed."""
    return _set_in(obj, "labels", key, value)


def set_annotation(obj: MutableMapping[str, Any], key: str, value: str) -> bool:
    """Set one annotation; returns True if the object changed."""
    return _set_in(obj, "annotations", key, value)


def _set_in(obj: MutableMapping[str, Any], field: str, key: str, value: str) -> bool:
    meta = _meta_mut(obj)
    current = meta.get(field)
    if current is None:
        current = meta[field] = {}
    if current.get(key) == value:
        return False
    current[key] = value
    return True


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The owner reference with ``controller: true``, if any (there is at most one)."""
    for ref in _meta(obj).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref  # type: ignore[no-any-return]
    return None


def set_owner_reference(
    owner: Mapping[str, Any],
    obj: MutableMapping[str, Any],
    *,
    controller: bool = False,
    block_owner_deletion: bool = True,
) -> bool:
    """Make ``owner`` an owner of ``obj`` (for garbage collection); returns True if ``obj`` changed.

    An existing reference with the same uid is replaced rather than duplicated. Raises ValueError
    when ``controller`` is requested and another object already controls ``obj`` (two controllers
    would fight), or when a namespaced object would get an owner in another namespace (the garbage
    collector ignores such references).
    """
    om = _meta(owner)
    owner_uid = om.get("uid") or ""
    owner_name = om.get("name") or ""
    if not owner_uid or not owner_name:
        raise ValueError("owner has no metadata.uid/name; create it before referencing it")
    owner_ns = om.get("namespace") or ""
    obj_ns = namespace(obj)
    if owner_ns and owner_ns != obj_ns:
        raise ValueError(
            f"cross-namespace owner reference: owner {owner.get('kind')} {owner_ns}/{owner_name} "
            f"cannot own an object in namespace {obj_ns or '<cluster scope>'}"
        )
    ref: dict[str, Any] = {
        "apiVersion": owner.get("apiVersion") or "",
        "kind": owner.get("kind") or "",
        "name": owner_name,
        "uid": owner_uid,
    }
    if controller:
        ref["controller"] = True
    if block_owner_deletion:
        ref["blockOwnerDeletion"] = True
    meta = _meta_mut(obj)
    refs: list[Any] = list(meta.get("ownerReferences") or ())
    if controller:
        for existing in refs:
            if existing.get("controller") and existing.get("uid") != owner_uid:
                raise ValueError(
                    f"{obj.get('kind') or 'object'} {name(obj)!r} is already controlled by "
                    f"{existing.get('kind')} {existing.get('name')!r}"
                )
    for i, existing in enumerate(refs):
        if existing.get("uid") == owner_uid:
            if existing == ref:
                return False
            refs[i] = ref
            break
    else:
        refs.append(ref)
    meta["ownerReferences"] = refs
    return True
