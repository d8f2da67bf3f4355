"""Finalizer patches: the JSON patch that changes an object's finalizers safely, and its log verb."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def finalizers_patch(old: Sequence[str] | None, new: Sequence[str]) -> list[dict[str, Any]]:
    """A JSON patch setting the finalizers to ``new``. It tests the current list (``old``), so a
    concurrent change makes it fail with a Conflict-like error instead of losing data."""
    if old is None:
        return [{"op": "add", "path": "/metadata/finalizers", "value": [*new]}]
    return [
        {"op": "test", "path": "/metadata/finalizers", "value": old},
        {"op": "replace", "path": "/metadata/finalizers", "value": [*new]},
    ]


def finalizers_verb(old: Sequence[str] | None, new: Sequence[str]) -> str:
    """How the change log says it: "added finalizer f to", "removed finalizer f from"."""
    added = [f for f in new if f not in (old or ())]
    removed = [f for f in (old or ()) if f not in new]
    if added:
        return f"added finalizer {', '.join(added)} to"
    if removed:
        return f"removed finalizer {', '.join(removed)} from"
    return "patched the finalizers of"
