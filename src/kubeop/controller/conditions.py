"""Status conditions (metav1.Condition) and observedGeneration, without needless writes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, MutableSequence
from typing import Any

__all__ = ["find_condition", "is_true", "set_condition"]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def find_condition(conditions: Any, type_: str) -> Mapping[str, Any] | None:
    """The condition of type ``type_`` in a list of conditions, or None."""
    for cond in conditions or ():
        if cond.get("type") == type_:
            return cond  # type: ignore[no-any-return]
    return None


def is_true(conditions: Any, type_: str) -> bool:
    """Whether the condition of type ``type_`` is there with status ``"True"``."""
    cond = find_condition(conditions, type_)
    return cond is not None and cond.get("status") == "True"


def set_condition(
    conditions: MutableSequence[dict[str, Any]],
    type_: str,
    status: bool | str,
    reason: str,
    message: str = "",
    *,
    observed_generation: int | None = None,
) -> bool:
    """Set one condition in a list (in place); returns True if anything changed.

    ``lastTransitionTime`` moves only when the status changes, as the API conventions require,
    so re-asserting the same condition changes nothing and needs no write. ``status`` is a bool
    or ``"True"``/``"False"``/``"Unknown"``; ``reason`` a CamelCase word::

        from kubeop.controller import set_condition

        status = dict(obj.get("status") or {})
        conditions = list(status.get("conditions") or [])
        set_condition(
            conditions, "Available", True, "Reconciled", "3 replicas ready",
            observed_generation=obj["metadata"]["generation"],
        )
        await ctx.client.patch_status(obj, {"conditions": conditions})  # no request if unchanged

    The conditions are dicts, as the reconciler client's reads return them.
    """
    value = status if isinstance(status, str) else ("True" if status else "False")
    if not reason or not reason[0].isalpha():
        raise ValueError(f"condition reason must be a CamelCase word, got {reason!r}")
    for cond in conditions:
        if cond.get("type") == type_:
            changed = False
            if cond.get("status") != value:
                cond["status"] = value
                cond["lastTransitionTime"] = _now()
                changed = True
            for key, new in (
                ("reason", reason),
                ("message", message),
                ("observedGeneration", observed_generation),
            ):
                if new is not None and cond.get(key) != new:
                    cond[key] = new
                    changed = True
            return changed
    entry: dict[str, Any] = {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": _now(),
    }
    if observed_generation is not None:
        entry["observedGeneration"] = observed_generation
    conditions.append(entry)
    return True
