"""Owner references: who garbage-collects whom, and who reconciles whom."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from kubeop.core import meta as m
from kubeop.core.model import to_dict

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


def set_controller_reference(
    owner: Any, obj: MutableMapping[str, Any], *, owner_namespaced: bool | None = None
) -> bool:
    """Make ``owner`` the controller of ``obj`` (``controller: true``, ``blockOwnerDeletion``).

    Refuses, with :class:`OwnershipError`, a second controller, an owner in another namespace,
    and a namespaced owner for a cluster-scoped object. Returns True if ``obj`` changed.
    """
    owner_d = to_dict(owner)
    _check(owner_d, obj, owner_namespaced)
    try:
        return m.set_owner_reference(owner_d, obj, controller=True)
    except ValueError as exc:
        raise OwnershipError(str(exc)) from exc


def set_owner_reference(owner: Any, obj: MutableMapping[str, Any]) -> bool:
    """Add a non-controller owner reference (garbage collection only)."""
    owner_d = to_dict(owner)
    _check(owner_d, obj, None)
    try:
        return m.set_owner_reference(owner_d, obj, controller=False)
    except ValueError as exc:
        raise OwnershipError(str(exc)) from exc
