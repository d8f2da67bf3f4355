"""Compare before write: does an object already contain what is desired, and the object to write.

Only the fields the desired object sets count: server defaults and fields others own are not a
difference, so a steady-state reconcile costs no API writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubeop.core.model import copy_json

__all__ = ["contains", "merge_desired", "without_status"]

Obj = dict[str, Any]


def contains(current: Any, desired: Any) -> bool:
    """True when every field set in ``desired`` has the same value in ``current``.

    Dicts are compared key by key (extra keys in ``current``, such as server defaults, are
    fine); lists must have the same length and contain the desired elements in order (so
    defaulted fields inside containers do not count as a difference).
    """
    dt = type(desired)
    if dt is str or dt is int or dt is bool or desired is None:  # most leaves: no ABC checks
        return bool(current == desired)
    if dt is list:
        if type(current) is not list or len(current) != len(desired):
            return False
        return all(contains(c, d) for c, d in zip(current, desired, strict=True))
    if dt is dict or isinstance(desired, Mapping):
        if not (type(current) is dict or isinstance(current, Mapping)):
            return False
        for key, value in desired.items():
            if key in current:
                if not contains(current[key], value):
                    return False
            elif type(value) is dict or isinstance(value, Mapping):
                if not contains({}, value):  # an absent map equals an empty one
                    return False
            elif value is not None and value != []:
                return False
        return True
    if isinstance(desired, list):
        if not isinstance(current, list) or len(current) != len(desired):
            return False
        return all(contains(c, d) for c, d in zip(current, desired, strict=True))
    return bool(current == desired)


def merge_desired(current: Mapping[str, Any], desired: Mapping[str, Any]) -> Obj:
    """``current`` with the fields of ``desired`` written over it (dicts merged, lists replaced).

    Metadata that others own (uid, resourceVersion, managedFields, other labels) is kept.
    """
    out: Obj = dict(current)
    for key, value in desired.items():
        if key == "status":
            continue
        cur = out.get(key)
        if (type(value) is dict or isinstance(value, Mapping)) and (
            type(cur) is dict or isinstance(cur, Mapping)
        ):
            out[key] = merge_desired(cur, value)
        else:
            out[key] = copy_json(value)
    return out


def without_status(obj: Obj) -> Obj:
    """``obj`` without its status (the status is written on its own subresource)."""
    if "status" not in obj:
        return obj
    return {k: v for k, v in obj.items() if k != "status"}
