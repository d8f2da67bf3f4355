"""Event handlers: what an informer tells its subscribers, and how it fans events out.

A handler has three synchronous methods (client-go ``ResourceEventHandler``):

- ``on_add(obj, is_in_initial_list)``: an object appeared; ``is_in_initial_list`` is True while
  the informer delivers its first list (and for the replay a late handler gets);
- ``on_update(old, new)``: an object changed, or a resync re-delivered it (then ``old is new``,
  or at least ``old`` and ``new`` have the same resourceVersion);
- ``on_delete(obj)``: an object disappeared; ``obj`` is its last state, or a
  :class:`~kubeop.cache.tombstone.DeletedFinalStateUnknown` when the deletion happened while the
  watch was down and only a relist noticed it.

Handlers run on the event loop, inside the informer's processing step: they must be quick and
must not block (a controller's handler computes a key and adds it to a work queue). An exception
in a handler is logged with its traceback and does not affect the informer or other handlers.
Objects passed to handlers are the cached objects themselves: never mutate them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

__all__ = ["FuncHandler", "HandlerRegistration", "ResourceEventHandler"]

log = logging.getLogger("kubeop.cache")

#: client-go's floor for per-handler resync periods.
MINIMUM_RESYNC_PERIOD = 1.0


@runtime_checkable
class ResourceEventHandler(Protocol):
    """Receives an informer's notifications (see the module docs for the contract)."""

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        """An object appeared (``is_in_initial_list``: it came with the informer's first list)."""

    def on_update(self, old: Any, new: Any) -> None:
        """An object changed from ``old`` to ``new`` (a resync passes the same object twice)."""

    def on_delete(self, obj: Any) -> None:
        """An object was deleted (a ``DeletedFinalStateUnknown`` when the deletion was missed and found by a
        relist).
        """


class FuncHandler:
    """A :class:`ResourceEventHandler` from plain functions; missing ones ignore their events.

    ``FuncHandler(on_add=lambda obj, initial: queue.add(object_key(obj)))``
    """

    __slots__ = ("on_add_func", "on_delete_func", "on_update_func")

    def __init__(
        self,
        on_add: Callable[[Any, bool], None] | None = None,
        on_update: Callable[[Any, Any], None] | None = None,
        on_delete: Callable[[Any], None] | None = None,
    ) -> None:
        self.on_add_func = on_add
        self.on_update_func = on_update
        self.on_delete_func = on_delete

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        """Call ``on_add_func``, if given."""
        if self.on_add_func is not None:
            self.on_add_func(obj, is_in_initial_list)

    def on_update(self, old: Any, new: Any) -> None:
        """Call ``on_update_func``, if given."""
        if self.on_update_func is not None:
            self.on_update_func(old, new)

    def on_delete(self, obj: Any) -> None:
        """Call ``on_delete_func``, if given."""
        if self.on_delete_func is not None:
            self.on_delete_func(obj)


class HandlerRegistration:
    """Returned by ``Informer.add_event_handler``; pass it to ``remove_event_handler``.

    ``has_synced()`` is True once the informer has synced and this handler has received every
    object of the initial list (or, for a late handler, the replay of the store): handlers are
    called synchronously, so that is the informer's own sync, as long as the handler is registered.
    """

    __slots__ = (
        "_has_synced",
        "active",
        "handler",
        "next_resync",
        "requested_resync_period",
        "resync_period",
        "syncing",
    )

    def __init__(
        self,
        handler: ResourceEventHandler,
        requested_resync_period: float,
        resync_period: float,
        has_synced: Callable[[], bool],
    ) -> None:
        self.handler = handler
        self.requested_resync_period = requested_resync_period
        self.resync_period = resync_period
        self.next_resync = time.monotonic() + resync_period
        # Sync notifications go to the handlers whose resync is due; every handler starts as
        # "due", so a relist that changed nothing still reaches handlers before any resync check
        # ran (client-go's sharedProcessor does the same).
        self.syncing = True
        self.active = True
        self._has_synced = has_synced

    def has_synced(self) -> bool:
        """Whether the handler is registered and has been given every object of the informer's first list."""
        return self.active and self._has_synced()

    def should_resync(self, now: float) -> bool:
        """Whether the handler's resync is due at ``now`` (and if so, schedule the next one)."""
        if self.resync_period <= 0:
            return False
        if now >= self.next_resync:
            self.next_resync = now + self.resync_period
            return True
        return False

    def __repr__(self) -> str:
        state = "active" if self.active else "removed"
        return f"<HandlerRegistration {self.handler!r} {state} resync={self.resync_period:g}s>"


def determine_resync_period(desired: float, check: float) -> float:
    """client-go's ``determineResyncPeriod``: 0 stays 0; no resync at all when the informer does
    not resync; never below the informer's check period."""
    if desired <= 0:
        return 0.0
    if check <= 0:
        log.warning("resync period %.1f s ignored: this informer does not resync", desired)
        return 0.0
    return max(desired, check)


class Distributor:
    """Fans notifications out to registrations, isolating each handler's exceptions."""

    __slots__ = ("name", "registrations")

    def __init__(self, name: str) -> None:
        self.name = name
        self.registrations: tuple[HandlerRegistration, ...] = ()

    def add(self, registration: HandlerRegistration) -> None:
        self.registrations = (*self.registrations, registration)

    def remove(self, registration: HandlerRegistration) -> bool:
        if registration not in self.registrations:
            return False
        registration.active = False
        self.registrations = tuple(r for r in self.registrations if r is not registration)
        return True

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        for reg in self.registrations:
            try:
                reg.handler.on_add(obj, is_in_initial_list)
            except Exception:
                self._failed(reg, "on_add")

    def on_update(self, old: Any, new: Any, is_sync: bool) -> None:
        for reg in self.registrations:
            if is_sync and not reg.syncing:
                continue
            try:
                reg.handler.on_update(old, new)
            except Exception:
                self._failed(reg, "on_update")

    def on_delete(self, obj: Any) -> None:
        for reg in self.registrations:
            try:
                reg.handler.on_delete(obj)
            except Exception:
                self._failed(reg, "on_delete")

    def should_resync(self) -> bool:
        """Recompute which handlers get the coming Sync notifications; True if any does."""
        now = time.monotonic()
        any_due = False
        for reg in self.registrations:
            reg.syncing = reg.should_resync(now)
            any_due = any_due or reg.syncing
        return any_due

    def _failed(self, reg: HandlerRegistration, method: str) -> None:
        log.exception("%s: event handler %r raised in %s; continuing", self.name, reg.handler, method)
