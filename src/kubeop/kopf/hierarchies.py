"""kopf's hierarchy helpers: make objects the children of the object being handled.

They take one object or any (nested) iterable of them, each a dict, a pykube object (its
``.obj``) or a ``kubernetes``/``kubernetes_asyncio`` model (recognised by shape, neither
library is needed), and change them in place, as kopf does: :func:`adopt` is
:func:`append_owner_reference` + :func:`harmonize_naming` + :func:`adjust_namespace` +
:func:`label` with the owner's metadata. The owner defaults to the object being handled.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from typing import Any

from kubeop.kopf.bodies import build_owner_reference
from kubeop.kopf.events import current_body

__all__ = [
    "adjust_namespace",
    "adopt",
    "append_owner_reference",
    "harmonize_naming",
    "label",
    "remove_owner_reference",
]

_UNSET: Any = object()


def _is_model(obj: Any) -> bool:
    """A ``kubernetes``/``kubernetes_asyncio`` model (generated classes with these two maps)."""
    cls = type(obj)
    return isinstance(getattr(cls, "attribute_map", None), dict) and hasattr(cls, "openapi_types")


def _is_pykube(obj: Any) -> bool:
    return type(obj).__module__.split(".")[0] == "pykube" and isinstance(
        getattr(obj, "obj", None), MutableMapping
    )


def _model_class(obj: Any, name: str) -> Any:
    """The model class ``name`` of the library ``obj`` comes from (``V1ObjectMeta``...)."""
    return getattr(importlib.import_module(type(obj).__module__.split(".")[0] + ".client"), name)


def _path(field: Any) -> tuple[str, ...]:
    if isinstance(field, str):
        return tuple(field.split(".")) if field else ()
    return tuple(field or ())


def _resolve(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if isinstance(obj, Mapping):
            obj = obj[key]
        elif _is_model(obj):
            attrs = [attr for attr, schema_key in type(obj).attribute_map.items() if schema_key == key]
            try:
                obj = getattr(obj, attrs[0] if attrs else key)
            except AttributeError:
                raise KeyError(key) from None
        else:
            raise KeyError(key)
    return obj


def _walk(objs: Any, nested: Iterable[Any] | None = None) -> Iterator[Any]:
    """Every object in ``objs`` (flattened), then its ``nested`` fields that exist."""
    if objs is None:
        return
    if _is_pykube(objs):
        yield from _walk(objs.obj, nested)
    elif _is_model(objs) or isinstance(objs, Mapping):
        yield objs
        for field in nested or ():
            try:
                found = _resolve(objs, _path(field))
            except KeyError:
                continue  # kopf skips the fields an object does not have
            yield found
    elif isinstance(objs, Iterable):
        for obj in objs:
            yield from _walk(obj, nested)
    else:
        yield objs


def _metadata(obj: Any) -> Any:
    """The model's metadata, made if absent; TypeError for what is no Kubernetes object."""
    if not _is_model(obj):
        raise TypeError(f"K8s object class is not supported: {type(obj)}")
    if obj.metadata is None:
        obj.metadata = _model_class(obj, "V1ObjectMeta")()
    return obj.metadata


def _owner(owner: Mapping[str, Any] | None, fix: str = "owner=body") -> Mapping[str, Any]:
    if owner is not None:
        return getattr(owner, "obj") if _is_pykube(owner) else owner  # noqa: B009 (pykube: not a Mapping)
    body = current_body.get()
    if body is None:
        raise LookupError(f"Owner must be set explicitly (pass {fix}), since running outside of a handler.")
    return body


def append_owner_reference(
    objs: Any,
    owner: Mapping[str, Any] | None = None,
    *,
    controller: bool | None = True,
    block_owner_deletion: bool | None = True,
) -> None:
    """Add the owner's reference to the objects that do not have one with its uid yet."""
    ref = build_owner_reference(
        _owner(owner), controller=controller, block_owner_deletion=block_owner_deletion
    )
    for obj in _walk(objs):
        if isinstance(obj, MutableMapping):
            refs = obj.setdefault("metadata", {}).setdefault("ownerReferences", [])
            if not any(r.get("uid") == ref["uid"] for r in refs):
                refs.append(ref)
            continue
        meta = _metadata(obj)
        if meta.owner_references is None:
            meta.owner_references = []
        if not any(r.uid == ref["uid"] for r in meta.owner_references):
            meta.owner_references.append(
                _model_class(obj, "V1OwnerReference")(
                    api_version=ref["apiVersion"],
                    kind=ref["kind"],
                    name=ref["name"],
                    uid=ref["uid"],
                    controller=ref.get("controller"),
                    block_owner_deletion=ref.get("blockOwnerDeletion"),
                )
            )


def remove_owner_reference(objs: Any, owner: Mapping[str, Any] | None = None) -> None:
    """Drop the owner's reference (by uid) from the objects."""
    uid = build_owner_reference(_owner(owner)).get("uid")
    for obj in _walk(objs):
        if isinstance(obj, MutableMapping):
            refs = obj.setdefault("metadata", {}).setdefault("ownerReferences", [])
            refs[:] = [r for r in refs if r.get("uid") != uid]
            continue
        meta = _metadata(obj)
        if meta.owner_references is None:
            meta.owner_references = []
        meta.owner_references[:] = [r for r in meta.owner_references if r.uid != uid]


def label(
    objs: Any,
    labels: Mapping[str, str | None] = _UNSET,
    *,
    forced: bool = False,
    nested: str | Iterable[Any] | None = None,
    force: bool | None = None,
) -> None:
    """Put ``labels`` (default: the handled object's) on the objects and on each ``nested``
    field (``"spec.template"``) holding an object; existing keys stay unless ``forced``."""
    if force is not None:
        warnings.warn("force= is deprecated in kopf.label(); use forced=...", DeprecationWarning, 2)
        forced = force
    if labels is _UNSET:
        labels = (_owner(None, "labels=").get("metadata") or {}).get("labels") or {}
    paths = [nested] if isinstance(nested, str) else nested
    for obj in _walk(objs, paths):
        if isinstance(obj, MutableMapping):
            own = obj.setdefault("metadata", {}).setdefault("labels", {})
        else:
            meta = _metadata(obj)
            if meta.labels is None:
                meta.labels = {}
            own = meta.labels
        for key, value in labels.items():
            if forced:
                own[key] = value
            else:
                own.setdefault(key, value)


def harmonize_naming(
    objs: Any, name: str | None = _UNSET, *, forced: bool = False, strict: bool = False
) -> None:
    """Name the objects without a name after ``name`` (default: the handled object's):
    ``generateName: <name>-``, or ``strict=True`` the name itself; ``forced`` renames all."""
    if name is _UNSET:
        name = (_owner(None, "name=").get("metadata") or {}).get("name")
    if name is None:
        raise LookupError("Name must be set explicitly: couldn't find it automatically.")
    for obj in _walk(objs):
        if isinstance(obj, MutableMapping):
            if forced or not ({"name", "generateName"} & set(obj.get("metadata") or {})):
                meta = obj.setdefault("metadata", {})
                meta["name" if strict else "generateName"] = name if strict else f"{name}-"
                meta.pop("generateName" if strict else "name", None)
            continue
        md = _metadata(obj)
        if forced or (md.name is None and md.generate_name is None):
            md.name, md.generate_name = (name, None) if strict else (None, f"{name}-")


def adjust_namespace(objs: Any, namespace: str | None = _UNSET, *, forced: bool = False) -> None:
    """Put the objects without a namespace into ``namespace`` (default: the handled object's)."""
    if namespace is _UNSET:
        namespace = (_owner(None, "namespace=").get("metadata") or {}).get("namespace")
    for obj in _walk(objs):
        if isinstance(obj, MutableMapping):
            if forced or (obj.get("metadata") or {}).get("namespace") is None:
                obj.setdefault("metadata", {})["namespace"] = namespace
            continue
        md = _metadata(obj)
        if forced or md.namespace is None:
            md.namespace = namespace


def adopt(
    objs: Any,
    owner: Mapping[str, Any] | None = None,
    *,
    forced: bool = False,
    strict: bool = False,
    nested: str | Iterable[Any] | None = None,
) -> None:
    """Owned by the owner (default: the object being handled), named after it, in its
    namespace, with its labels."""
    real = _owner(owner)
    md = real.get("metadata") or {}
    append_owner_reference(objs, owner=real)
    harmonize_naming(objs, forced=forced, strict=strict, name=md.get("name"))
    adjust_namespace(objs, forced=forced, namespace=md.get("namespace"))
    label(objs, forced=forced, nested=nested, labels=md.get("labels") or {})
