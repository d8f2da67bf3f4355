"""kopf's filter combinators: ``when=kopf.all_([is_ready, kopf.not_(is_paused)])``.

Each takes callbacks of the same kwargs (those of ``when=`` filters) and returns one that
passes everything it gets on to them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

__all__ = ["all_", "any_", "none_", "not_"]

Callback = Callable[..., Any]


def not_(fn: Callback) -> Callable[..., bool]:
    """True when ``fn`` is false."""

    def not_fn(*args: Any, **kwargs: Any) -> bool:
        return not fn(*args, **kwargs)

    return not_fn


def all_(fns: Collection[Callback]) -> Callable[..., bool]:
    """True when every one of ``fns`` is true (and when there are none)."""

    def all_fn(*args: Any, **kwargs: Any) -> bool:
        return all(fn(*args, **kwargs) for fn in fns)

    return all_fn


def any_(fns: Collection[Callback]) -> Callable[..., bool]:
    """True when one of ``fns`` is true (false when there are none)."""

    def any_fn(*args: Any, **kwargs: Any) -> bool:
        return any(fn(*args, **kwargs) for fn in fns)

    return any_fn


def none_(fns: Collection[Callback]) -> Callable[..., bool]:
    """True when none of ``fns`` is true (and when there are none)."""

    def none_fn(*args: Any, **kwargs: Any) -> bool:
        return not any(fn(*args, **kwargs) for fn in fns)

    return none_fn
