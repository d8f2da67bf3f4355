"""``kopf.adopt`` and ``kopf.label``: make objects the children of the object being handled."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from kubeop.controller import set_controller_reference
from kubeop.kopf.events import current_body

__all__ = ["adopt", "label"]


def _objects(objs: Any) -> list[MutableMapping[str, Any]]:
    if isinstance(objs, MutableMapping):
        return [objs]
    return [o for o in objs]


def adopt(
    objs: Any, owner: Mapping[str, Any] | None = None, *, forced: bool = False, strict: bool = False
) -> None:
    """Owner reference (the controller one), the owner's namespace, and a name after the owner:
    ``generateName: <owner>-`` (``strict=True``: the owner's name itself) unless the object has
    a name (``forced=True``: replace it). The owner defaults to the object being handled."""
    real = owner if owner is not None else current_body.get()
    if real is None:
        raise LookupError("kopf.adopt: no owner given and not called from a handler; pass owner=body")
    md = real.get("metadata") or {}
    for obj in _objects(objs):
        meta = obj.setdefault("metadata", {})
        if forced or not ({"name", "generateName"} & set(meta)):
            if strict:
                meta["name"] = md.get("name")
                meta.pop("generateName", None)
            else:
                meta["generateName"] = f"{md.get('name')}-"
                meta.pop("name", None)
        if md.get("namespace") and (forced or not meta.get("namespace")):
            meta["namespace"] = md["namespace"]
        set_controller_reference(dict(real), obj)
        labels = md.get("labels") or {}
        if labels:
            own = meta.setdefault("labels", {})
            for k, v in labels.items():
                if forced or k not in own:
                    own[k] = v


def label(
    objs: Any,
    labels: Mapping[str, str] | None = None,
    *,
    forced: bool = False,
    nested: str | tuple[str, ...] | list[str] | None = None,
) -> None:
    """Put ``labels`` (default: the handled object's) on the objects, and on each ``nested``
    path (``"spec.template"``) that holds metadata; existing keys stay unless ``forced``."""
    if labels is None:
        body = current_body.get()
        if body is None:
            raise LookupError("kopf.label: no labels given and not called from a handler; pass labels=")
        labels = (body.get("metadata") or {}).get("labels") or {}
    paths = [nested] if isinstance(nested, str) else list(nested or ())
    for obj in _objects(objs):
        targets: list[MutableMapping[str, Any]] = [obj]
        for path in paths:
            target: Any = obj
            for part in path.split("."):
                target = target.setdefault(part, {}) if isinstance(target, MutableMapping) else None
            if isinstance(target, MutableMapping):
                targets.append(target)
        for target in targets:
            own = target.setdefault("metadata", {}).setdefault("labels", {})
            for k, v in labels.items():
                if forced or k not in own:
                    own[k] = v
