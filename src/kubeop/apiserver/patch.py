"""The patches an aggregated API applies, from kubeop's one patch engine
(:mod:`kubeop.core.patching`): JSON merge patch (RFC 7386), JSON patch (RFC 6902, every
operation) and strategic merge patch, raising
:class:`~kubeop.apiserver.status.StatusError` (422 for a patch that does not apply, ``test``
failing included; 400 for one that is not well formed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubeop.apiserver.status import StatusError
from kubeop.core import patching
from kubeop.core.patching import ListRule, ListRules

__all__ = ["ListRule", "ListRules", "json_patch", "merge_patch", "strategic_merge_patch"]


def _status(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except patching.PatchError as exc:
        raise StatusError(exc.code, exc.message, reason=exc.reason) from None


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes a key, anything else replaces."""
    return patching.merge_patch(target, patch)


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902 applied to a copy of ``doc``."""
    return _status(lambda: patching.json_patch(doc, operations))


def strategic_merge_patch(target: Any, patch: Any, rules: ListRules) -> Any:
    """Strategic merge, lists merged as ``rules`` say (the served kind's list types)."""
    return _status(lambda: patching.strategic_merge_patch(target, patch, rules))
