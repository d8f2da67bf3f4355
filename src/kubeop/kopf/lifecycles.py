"""kopf's lifecycles: which of an object's due handlers run in one processing cycle.

A lifecycle takes the due handlers in their registration order (and kwargs: ``state``, the
handlers' progress by id, and the handler kwargs) and returns those to run now; the others
run in the next cycle, straight after. kubeop runs every due handler in one cycle (their
changes and the handling state go in one write) unless a lifecycle other than the default is
set with :func:`set_default_lifecycle`: the default, :func:`asap`, is what
:func:`get_default_lifecycle` returns, as in kopf, and kubeop reads it as "all due handlers,
in order" — the soonest they can all be done.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

__all__ = [
    "LifeCycleFn",
    "all_at_once",
    "asap",
    "get_default_lifecycle",
    "one_by_one",
    "randomized",
    "set_default_lifecycle",
    "shuffled",
]

H = TypeVar("H")
LifeCycleFn = Callable[..., Sequence[Any]]
logger = logging.getLogger(__name__)


def all_at_once(handlers: Sequence[H], **_: Any) -> Sequence[H]:
    """All of them, in order."""
    return handlers


def one_by_one(handlers: Sequence[H], **_: Any) -> Sequence[H]:
    """The first one."""
    return handlers[:1]


def randomized(handlers: Sequence[H], **_: Any) -> Sequence[H]:
    """One of them, chosen at random."""
    return [random.choice(handlers)] if handlers else []


def shuffled(handlers: Sequence[H], **_: Any) -> Sequence[H]:
    """All of them, in a random order."""
    return random.sample(handlers, k=len(handlers)) if handlers else []


def asap(handlers: Sequence[H], *, state: Mapping[str, Any] | None = None, **_: Any) -> Sequence[H]:
    """The one retried least so far (the first of those)."""

    def retries(handler: Any) -> int:
        progress = state.get(handler.id) if state is not None else None
        return getattr(progress, "retries", 0) or 0

    return sorted(handlers, key=retries)[:1]


_default: LifeCycleFn = asap


def get_default_lifecycle() -> LifeCycleFn:
    """The lifecycle in force (:func:`asap` unless one was set)."""
    return _default


def set_default_lifecycle(lifecycle: LifeCycleFn | None) -> None:
    """Use ``lifecycle`` for every object's handlers from now on (None: back to the default)."""
    global _default
    if lifecycle is not None and not callable(lifecycle):
        raise TypeError(f"kopf.set_default_lifecycle({lifecycle!r}): give a callable or None")
    if _default is not asap:
        logger.warning(
            "The default lifecycle is already set to %s, overriding it to %s.", _default, lifecycle
        )
    _default = lifecycle if lifecycle is not None else asap
