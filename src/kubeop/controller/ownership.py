"""Owner references: who garbage-collects whom, and who reconciles whom."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from kubeop.core import meta as m
from kubeop.core.model import model_gvk, to_dict

__all__ = ["OwnershipError", "set_controller_reference", "set_owner_reference"]


class OwnershipError(ValueError):
    """An owner reference the garbage collector would ignore or that two controllers would fight over."""


def _check(owner: Mapping[str, Any], obj: Mapping[str, Any], owner_namespaced: bool | None) -> None:
    owner_ns = m.namespace(owner)
    obj_ns = m.namespace(obj)
    if not owner.get("apiVersion") or not owner.get("kind"):
        raise OwnershipError("the owner has no apiVersion/kind; pass the object as read from the API")
    if (owner_ns or owner_namespaced) and not obj_ns:
        raise OwnershipError(
            f"a namespaced {owner.get('kind')} cannot own a cluster-scoped object "
            f"({obj.get('kind') or 'object'} {m.name(obj)!r}): the garbage collector would ignore it"
        )


def set_controller_reference(owner: Any, obj: Any, *, owner_namespaced: bool | None = None) -> bool:
    """Make ``owner`` the controller of ``obj`` (``controller: true``, ``blockOwnerDeletion``).

    ``owner`` and ``obj`` are object dicts or typed models (a model ``obj`` gets new metadata).
    Refuses, with :class:`OwnershipError`, a second controller, an owner in another namespace,
    and a namespaced owner for a cluster-scoped object. Returns True if ``obj`` changed.
    """
    return _set(owner, obj, owner_namespaced, controller=True)


def set_owner_reference(owner: Any, obj: Any) -> bool:
    """Add a non-controller owner reference (garbage collection only)."""
    return _set(owner, obj, None, controller=False)


def _set(owner: Any, obj: Any, owner_namespaced: bool | None, *, controller: bool) -> bool:
    owner_d = _identity(owner)
    target: MutableMapping[str, Any] = obj if isinstance(obj, MutableMapping) else _identity(obj)
    _check(owner_d, target, owner_namespaced)
    try:
        changed = m.set_owner_reference(owner_d, target, controller=controller)
    except ValueError as exc:
        raise OwnershipError(str(exc)) from exc
    if changed and target is not obj:
        # Validate only the new list (as the metadata model types it) and set it in place.
        meta = obj.metadata
        refs = type(meta).model_validate({"ownerReferences": target["metadata"]["ownerReferences"]})
        meta.owner_references = refs.owner_references
    return changed


def _identity(obj: Any) -> dict[str, Any]:
    """What owner references need of an object: a dict as it is; of a model, its type, name,
    namespace, uid and owner references, read from attributes (no dump of the whole model)."""
    if isinstance(obj, dict):
        return obj
    if isinstance(obj, Mapping):
        return dict(obj)
    meta = getattr(obj, "metadata", None)
    if meta is None or not hasattr(type(obj), "kind"):
        return to_dict(obj)
    gvk = model_gvk(type(obj))
    md: dict[str, Any] = {
        "name": getattr(meta, "name", None),
        "namespace": getattr(meta, "namespace", None),
        "uid": getattr(meta, "uid", None),
    }
    refs = getattr(meta, "owner_references", None)
    if refs:
        md["ownerReferences"] = [
            r if isinstance(r, Mapping) else r.model_dump(mode="json", by_alias=True, exclude_none=True)
            for r in refs
        ]
    return {"apiVersion": gvk.api_version, "kind": gvk.kind, "metadata": md}
