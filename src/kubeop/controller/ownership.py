"""Owner references: who garbage-collects whom, and who reconciles whom."""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, get_args, get_origin

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
    owner_d = _identity(owner, refs=False)
    meta = _meta_model(obj)
    if meta is None and isinstance(obj, MutableMapping):
        _check(owner_d, obj, owner_namespaced)
        try:
            return m.set_owner_reference(owner_d, obj, controller=controller)
        except ValueError as exc:
            raise OwnershipError(str(exc)) from exc
    build = _ref_builder(type(meta)) if meta is not None else None
    if build is not None and not getattr(meta, "owner_references", None):
        return _set_first(owner_d, obj, meta, build, owner_namespaced, controller=controller)
    target = _identity(obj, refs=True)
    _check(owner_d, target, owner_namespaced)
    before = list(target["metadata"].get("ownerReferences") or ())
    try:
        changed = m.set_owner_reference(owner_d, target, controller=controller)
    except ValueError as exc:
        raise OwnershipError(str(exc)) from exc
    if changed:
        _set_model_refs(obj.metadata, before, target["metadata"]["ownerReferences"])
    return changed


def _set_first(
    owner: dict[str, Any],
    obj: Any,
    meta: Any,
    build: Callable[[dict[str, Any]], Any],
    owner_namespaced: bool | None,
    *,
    controller: bool,
) -> bool:
    """The first owner reference of a model (the usual case: a child built in the reconcile):
    the same checks and reference as :func:`kubeop.core.meta.set_owner_reference`, on a stand-in
    holding only what they read, and the reference built as the metadata model types it."""
    kind = getattr(type(obj), "kind", None)
    stand_in: dict[str, Any] = {
        "kind": kind if isinstance(kind, str) else type(obj).__name__,
        "metadata": {"name": getattr(meta, "name", None), "namespace": getattr(meta, "namespace", None)},
    }
    _check(owner, stand_in, owner_namespaced)
    try:
        m.set_owner_reference(owner, stand_in, controller=controller)
    except ValueError as exc:
        raise OwnershipError(str(exc)) from exc
    meta.owner_references = [build(stand_in["metadata"]["ownerReferences"][0])]
    return True


def _identity(obj: Any, *, refs: bool) -> dict[str, Any]:
    """What owner references need of an object: a dict as it is; of a model, its type, name,
    namespace, uid and (``refs``) owner references, read from attributes (no dump of the whole
    model)."""
    meta = _meta_model(obj)
    if meta is None:
        return obj if type(obj) is dict else dict(obj) if isinstance(obj, Mapping) else to_dict(obj)
    if not hasattr(type(obj), "kind"):
        return to_dict(obj)
    api_version, kind = _type_of(type(obj))
    md: dict[str, Any] = {
        "name": getattr(meta, "name", None),
        "namespace": getattr(meta, "namespace", None),
        "uid": getattr(meta, "uid", None),
    }
    existing = getattr(meta, "owner_references", None) if refs else None
    if existing:
        md["ownerReferences"] = [
            r if isinstance(r, Mapping) else r.model_dump(mode="json", by_alias=True, exclude_none=True)
            for r in existing
        ]
    return {"apiVersion": api_version, "kind": kind, "metadata": md}


_TYPES: dict[type, tuple[str, str]] = {}


def _type_of(cls: type) -> tuple[str, str]:
    """``(apiVersion, kind)`` of a model class, looked up once per class."""
    found = _TYPES.get(cls)
    if found is None:
        gvk = model_gvk(cls)
        found = _TYPES[cls] = (gvk.api_version, gvk.kind)
    return found


def _meta_model(obj: Any) -> Any:
    """The metadata model of a model object; None for a dict or a model with dict metadata
    (told apart without an ABC check on the model, which costs more than the rest of the test)."""
    if type(obj) is dict:
        return None
    meta = getattr(obj, "metadata", None)
    return None if meta is None or type(meta) is dict or isinstance(meta, Mapping) else meta


def _set_model_refs(meta: Any, before: list[Any], after: list[dict[str, Any]]) -> None:
    """Set a model's owner references to ``after``: the references it had are kept as they are
    (``after`` holds the same dicts for them), the new or replaced one is built as the metadata
    model types it (a model, or the dict itself)."""
    build = _ref_builder(type(meta))
    if build is None:  # an unusual metadata model: validate the list the way it declares it
        refs = type(meta).model_validate({"ownerReferences": after})
        meta.owner_references = refs.owner_references
        return
    old = list(meta.owner_references or ())
    meta.owner_references = [
        old[i] if i < len(before) and ref is before[i] else build(ref) for i, ref in enumerate(after)
    ]


_REF_BUILDERS: dict[type, Callable[[dict[str, Any]], Any] | None] = {}


def _ref_builder(meta_cls: type) -> Callable[[dict[str, Any]], Any] | None:
    """How one owner reference becomes an item of ``meta_cls.owner_references`` (looked up once
    per class): ``OwnerReference.model_validate`` for kubeop.kinds' metadata, the dict itself for a
    list of dicts (CustomResource's metadata); None when the field is typed otherwise."""
    try:
        return _REF_BUILDERS[meta_cls]
    except KeyError:
        pass
    builder: Callable[[dict[str, Any]], Any] | None = None
    field = (getattr(meta_cls, "model_fields", None) or {}).get("owner_references")
    for arm in get_args(field.annotation) if field is not None else ():
        if get_origin(arm) is list:
            (item,) = get_args(arm) or (Any,)
            if item is Any or item is dict or get_origin(item) is dict:
                builder = _same
            elif isinstance(item, type) and hasattr(item, "model_validate"):
                builder = item.model_validate
    _REF_BUILDERS[meta_cls] = builder
    return builder


def _same(ref: dict[str, Any]) -> dict[str, Any]:
    return ref
