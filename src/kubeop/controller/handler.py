"""Event handlers: which requests an informer event turns into.

- :func:`enqueue_for_object`: the object itself (the primary kind);
- :func:`enqueue_for_owner`: the owner named in the object's ownerReferences, by group + kind
  (by default only the *controller* owner), for the kinds a controller owns;
- :func:`enqueue_from_map`: whatever a function of the object returns (any other relation).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeop.controller.request import Request, request_for

__all__ = ["EventHandler", "MapFn", "enqueue_for_object", "enqueue_for_owner", "enqueue_from_map"]

Obj = Mapping[str, Any]
MapFn = Callable[[Obj], Iterable[Request]]


@dataclass(frozen=True, slots=True)
class EventHandler:
    """Maps an object to requests. ``map_old_on_update``: on an update, map the old object too
    (an owner that was replaced, or a label that no longer matches, must hear about it)."""

    map: MapFn
    map_old_on_update: bool = False


def _self(obj: Obj) -> Iterable[Request]:
    return (request_for(obj),)


def enqueue_for_object() -> EventHandler:
    """The event handler that enqueues the object itself (``namespace/name``), as ``Controller.for_`` does."""
    return EventHandler(_self)


def enqueue_for_owner(group: str, kind: str, *, only_controller: bool = True) -> EventHandler:
    """Enqueue the owner of kind ``group``/``kind`` (any version) of each event's object.

    Owner references carry no namespace: a namespaced owner lives in its dependent's namespace,
    and a cluster-scoped owner has none (the reconciler of a cluster-scoped kind gets ``""``).
    """

    def owners(obj: Obj) -> Iterable[Request]:
        meta = obj.get("metadata") or {}
        refs = meta.get("ownerReferences")
        if not refs:
            return ()
        out = []
        for ref in refs:
            if only_controller and not ref.get("controller"):
                continue
            if ref.get("kind") != kind:
                continue
            api_version = ref.get("apiVersion") or ""
            ref_group = api_version.rpartition("/")[0] if "/" in api_version else ""
            if ref_group == group:
                out.append(Request(meta.get("namespace") or "", ref["name"]))
        return out

    return EventHandler(owners, map_old_on_update=True)


def enqueue_from_map(fn: Callable[[Obj], Iterable[Request | tuple[str, str] | str]]) -> EventHandler:
    """Enqueue what ``fn(obj)`` returns: Requests, ``(namespace, name)`` tuples or keys."""

    def mapped(obj: Obj) -> Iterable[Request]:
        out = []
        for item in fn(obj) or ():
            if isinstance(item, Request):
                out.append(item)
            elif isinstance(item, tuple):
                out.append(Request(item[0], item[1]))
            else:
                ns, _, name = item.rpartition("/")
                out.append(Request(ns, name))
        return out

    return EventHandler(mapped, map_old_on_update=True)
