"""Predicates: filter the events that reach a controller's work queue.

A predicate has four checks, one per event kind; each returns True to let the event through.
Compose them with :func:`and_`, :func:`or_` and :func:`not_`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeop.core.selectors import LabelSelector

__all__ = [
    "AnnotationChanged",
    "GenerationChanged",
    "LabelChanged",
    "Predicate",
    "ResourceVersionChanged",
    "and_",
    "label_selector",
    "not_",
    "or_",
]

Obj = Mapping[str, Any]


def _true1(obj: Obj) -> bool:
    return True


def _true2(old: Obj, new: Obj) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class Predicate:
    """Event filter. Unset checks let everything through."""

    create: Callable[[Obj], bool] = _true1
    update: Callable[[Obj, Obj], bool] = _true2
    delete: Callable[[Obj], bool] = _true1
    generic: Callable[[Obj], bool] = _true1


def _meta(obj: Obj) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _generation_changed(old: Obj, new: Obj) -> bool:
    return _meta(old).get("generation") != _meta(new).get("generation")


def _rv_changed(old: Obj, new: Obj) -> bool:
    return _meta(old).get("resourceVersion") != _meta(new).get("resourceVersion")


def _labels_changed(old: Obj, new: Obj) -> bool:
    return (_meta(old).get("labels") or {}) != (_meta(new).get("labels") or {})


def _annotations_changed(old: Obj, new: Obj) -> bool:
    return (_meta(old).get("annotations") or {}) != (_meta(new).get("annotations") or {})


GenerationChanged = Predicate(update=_generation_changed)
"""Only updates that change ``metadata.generation`` (spec changes; status-only writes are skipped)."""

ResourceVersionChanged = Predicate(update=_rv_changed)
"""Skips the update events of a resync (same resourceVersion)."""

LabelChanged = Predicate(update=_labels_changed)
AnnotationChanged = Predicate(update=_annotations_changed)


def label_selector(selector: str | LabelSelector) -> Predicate:
    """Only objects whose labels match ``selector`` (on create, update (new object), delete)."""
    sel = LabelSelector.parse(selector) if isinstance(selector, str) else selector

    def match(obj: Obj) -> bool:
        return sel.matches(_meta(obj).get("labels") or {})

    return Predicate(create=match, update=lambda old, new: match(new), delete=match, generic=match)


def and_(*preds: Predicate) -> Predicate:
    """A predicate passing an event when every one of ``preds`` passes it."""
    return Predicate(
        create=lambda o: all(p.create(o) for p in preds),
        update=lambda a, b: all(p.update(a, b) for p in preds),
        delete=lambda o: all(p.delete(o) for p in preds),
        generic=lambda o: all(p.generic(o) for p in preds),
    )


def or_(*preds: Predicate) -> Predicate:
    """A predicate passing an event when any of ``preds`` passes it."""
    return Predicate(
        create=lambda o: any(p.create(o) for p in preds),
        update=lambda a, b: any(p.update(a, b) for p in preds),
        delete=lambda o: any(p.delete(o) for p in preds),
        generic=lambda o: any(p.generic(o) for p in preds),
    )


def not_(pred: Predicate) -> Predicate:
    """A predicate passing exactly the events ``pred`` rejects."""
    return Predicate(
        create=lambda o: not pred.create(o),
        update=lambda a, b: not pred.update(a, b),
        delete=lambda o: not pred.delete(o),
        generic=lambda o: not pred.generic(o),
    )
