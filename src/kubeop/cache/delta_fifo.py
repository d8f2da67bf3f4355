"""DeltaFIFO: a queue of per-object change lists, between a reflector and an informer.

This is client-go's ``DeltaFIFO`` (k8s.io/client-go/tools/cache/delta_fifo.go) on asyncio. For
every key it accumulates the changes (*deltas*) that happened since the consumer last popped that
key, and it hands keys out in the order they first became dirty:

- ``add`` / ``update`` / ``delete`` append an ``Added`` / ``Updated`` / ``Deleted`` delta;
- ``replace(objects)`` (a relist) appends ``Replaced`` for every listed object and a ``Deleted``
  delta carrying a :class:`~kubeop.cache.tombstone.DeletedFinalStateUnknown` for every key that
  is known (queued, or in ``known_objects``: the informer's store) but was not listed: the object
  vanished while the watch was down; ``begin_replace`` / ``replace_add`` / ``end_replace`` do
  the same with the objects handed over as they arrive, so the consumer applies a list while the
  rest of it is still on the wire;
- ``resync()`` appends ``Sync`` for every known object that has nothing queued;
- two consecutive deletions of one key collapse into one (the one with the real object wins
  over a tombstone).

``has_synced()`` turns true once the first ``replace`` has been popped completely (or the first
add/update/delete came before any replace), which is what "the cache has synced" means.

Everything runs on one event loop; no method awaits except :meth:`DeltaFIFO.pop`, so each call
is atomic with respect to other tasks, and a consumer that processes what it popped without
awaiting sees a store consistent with the queue (client-go's "process under lock").
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Iterable
from enum import StrEnum
from typing import Any, NamedTuple, Protocol

from kubeop.cache.keys import KeyFunc, object_key
from kubeop.cache.tombstone import DeletedFinalStateUnknown

__all__ = ["Delta", "DeltaFIFO", "DeltaType", "Deltas", "FIFOClosed", "KnownObjects", "Popped"]


class DeltaType(StrEnum):
    """What happened to an object, as a delta of a DeltaFIFO: added, updated, deleted, replaced by a relist,
    or resynced.
    """

    ADDED = "Added"
    UPDATED = "Updated"
    DELETED = "Deleted"
    #: Listed by a relist (or the first list); it may or may not have changed.
    REPLACED = "Replaced"
    #: A periodic resync: the object as the cache already has it.
    SYNC = "Sync"


class Delta(NamedTuple):
    """One change: its type and the object *after* it (for a deletion, the last known state)."""

    type: DeltaType
    object: Any


#: The changes to one object, oldest first; never empty.
Deltas = list[Delta]


class Popped(NamedTuple):
    """What ``pop`` hands out: a key, all its deltas, and whether they are part of the initial
    list (popped before the queue had synced)."""

    key: str
    deltas: Deltas
    is_in_initial_list: bool


_new_popped = tuple.__new__  # skips NamedTuple's Python-level __new__: one pop per object per sync

ADDED = DeltaType.ADDED
UPDATED = DeltaType.UPDATED
DELETED = DeltaType.DELETED
REPLACED = DeltaType.REPLACED
SYNC = DeltaType.SYNC


class FIFOClosed(Exception):
    """Raised by ``pop`` once the queue is closed and empty."""


class KnownObjects(Protocol):
    """What the consumer already holds (the informer's store): consulted by delete, replace, resync."""

    def list_keys(self) -> list[str]: ...

    def get(self, key: str) -> Any | None: ...


class DeltaFIFO:
    """A producer/consumer queue of :data:`Deltas`, keyed by object key.

    Guarantees:
        - A key is queued at most once; ``pop`` returns all of its deltas at once, oldest first.
        - Keys are popped in the order in which they first got a delta since their last pop.
        - After ``replace``, every previously known key that was not listed gets exactly one
          ``Deleted`` delta with a tombstone (unless a deletion is already queued for it).
        - ``delete`` of a key that is neither queued nor known is ignored (it was already
          reported as deleted by a relist).

    Args:
        key_func: the key of an object; :func:`~kubeop.cache.keys.object_key` by default.
        known_objects: the store the consumer keeps (usually the informer's Indexer). Without it
            deletions of keys that are not queued are ignored, replace only detects vanished
            keys among the queued ones, and resync does nothing.
        emit_delta_type_replaced: emit ``Replaced`` for listed objects (True, the default), or
            ``Sync`` as client-go did before ``Replaced`` existed.
    """

    __slots__ = (
        "_closed",
        "_getters",
        "_had_queued",
        "_initial_population_count",
        "_items",
        "_key_func",
        "_known",
        "_known_empty",
        "_listed",
        "_populated",
        "_queue",
        "_replace_action",
        "_synced",
        "name",
    )

    def __init__(
        self,
        *,
        key_func: KeyFunc = object_key,
        known_objects: KnownObjects | None = None,
        emit_delta_type_replaced: bool = True,
        name: str = "DeltaFIFO",
    ) -> None:
        self.name = name
        self._key_func = key_func
        self._known = known_objects
        self._replace_action = REPLACED if emit_delta_type_replaced else SYNC
        self._items: dict[str, Deltas] = {}
        self._queue: deque[str] = deque()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._populated = False
        self._initial_population_count = 0
        self._closed = False
        self._synced = asyncio.Event()
        self._listed: set[str] | None = None  # the keys of the replace in progress
        self._had_queued = False
        self._known_empty = True

    # -- state ------------------------------------------------------------------------------------

    def __len__(self) -> int:
        """How many keys are queued."""
        return len(self._queue)

    def has_synced(self) -> bool:
        """True once the first replace has been fully popped (or an add/update/delete came first)."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        """Wait until the items of the first list have all been popped."""
        await self._synced.wait()

    def _check_synced(self) -> None:
        if self._populated and self._initial_population_count == 0 and not self._synced.is_set():
            self._synced.set()

    @property
    def closed(self) -> bool:
        """True once the queue is closed: pops return nothing more."""
        return self._closed

    def key_of(self, obj: Any) -> str:
        """The key of an object, a tombstone, or a Deltas list (the key of its newest object)."""
        if isinstance(obj, list):
            if not obj:
                raise ValueError("empty Deltas have no key")
            obj = obj[-1].object
        return self._key_func(obj)

    def list_keys(self) -> list[str]:
        """The queued keys, in pop order."""
        return list(self._queue)

    def get(self, key: str) -> Deltas | None:
        """A copy of the deltas queued for ``key``."""
        deltas = self._items.get(key)
        return list(deltas) if deltas is not None else None

    def list(self) -> list[Any]:
        """The newest object of every queued key."""
        return [self._items[k][-1].object for k in self._queue]

    # -- producer ---------------------------------------------------------------------------------

    def add(self, obj: Any) -> None:
        """Queue an Added delta for ``obj``."""
        self._populate()
        self._known_empty = False  # (for a replace in progress: the known store gets more)
        self._queue_action(ADDED, obj)

    def update(self, obj: Any) -> None:
        """Queue an Updated delta for ``obj``."""
        self._populate()
        self._known_empty = False
        self._queue_action(UPDATED, obj)

    def delete(self, obj: Any) -> None:
        """Queue a deletion, unless the key is neither queued nor known (already reported)."""
        key = self._key_func(obj)
        self._populate()
        if key not in self._items and (self._known is None or self._known.get(key) is None):
            return
        self._known_empty = False
        self._queue_action(DELETED, obj, key)

    def add_if_not_present(self, deltas: Deltas) -> None:
        """Put popped deltas back unless something was queued for the key meanwhile."""
        key = self.key_of(deltas)
        self._populate()
        if key in self._items:
            return
        self._known_empty = False
        self._items[key] = list(deltas)
        self._queue.append(key)
        self._wake_one()

    def replace(self, objects: Iterable[Any], resource_version: str = "") -> None:
        """Queue ``Replaced`` for every object and tombstone deletions for vanished keys."""
        self.begin_replace()
        add = self.replace_add
        for obj in objects:
            add(obj)
        self.end_replace(resource_version)

    def begin_replace(self) -> None:
        """Start a replace that receives its objects one at a time (:meth:`replace_add`), so the
        consumer can pop and apply them while the rest of the list is still arriving; it ends
        with :meth:`end_replace`, which reports the vanished keys. A new ``begin_replace`` drops
        an unfinished one: what it queued stays queued (objects as the server listed them), and
        only the new list decides what vanished."""
        self._listed = set()
        self._had_queued = bool(self._items)
        self._known_empty = self._known is None or not self._known.list_keys()

    def replace_add(self, obj: Any) -> None:
        """Queue ``Replaced`` for one listed object of the replace in progress."""
        listed = self._listed
        if listed is None:
            raise RuntimeError(f"{self.name}: replace_add without begin_replace")
        key = self._key_func(obj)
        listed.add(key)
        deltas = self._items.get(key)
        if deltas is None:
            self._items[key] = [Delta(self._replace_action, obj)]
            self._queue.append(key)
            if not self._populated:
                self._initial_population_count += 1
            if self._getters:
                self._wake_one()
        else:
            deltas.append(Delta(self._replace_action, obj))

    def end_replace(self, resource_version: str = "") -> None:
        """End the replace in progress: tombstone deletions for every key that is queued or
        known and was not listed; the first replace's keys then count for :meth:`has_synced`."""
        listed = self._listed
        if listed is None:
            raise RuntimeError(f"{self.name}: end_replace without begin_replace")
        self._listed = None
        items = self._items
        queued_deletions = 0
        # Keys queued before the replace began and not listed (during it, only listed keys are
        # queued); popped ones are in the known store now and are found below.
        for key, deltas in list(items.items()) if self._had_queued else ():
            if key in listed:
                continue
            last = deltas[-1].object
            if type(last) is DeletedFinalStateUnknown:
                last = last.obj
            # (already queued: no new entry for has_synced to wait for)
            self._queue_action(DELETED, DeletedFinalStateUnknown(key, last), key)

        # The known store holds only what this replace listed (popped meanwhile) when it was
        # empty at the start and nothing was queued then: the first list skips the walk.
        if self._known is not None and not (self._known_empty and not self._had_queued):
            for key in self._known.list_keys():
                if key in listed or key in items:
                    continue
                queued_deletions += 1
                self._queue_action(DELETED, DeletedFinalStateUnknown(key, self._known.get(key)), key)

        if not self._populated:
            self._populated = True
            self._initial_population_count += queued_deletions
            self._check_synced()
        self._wake_all()

    def resync(self) -> None:
        """Queue ``Sync`` for every known object whose key has nothing queued."""
        if self._known is None:
            return
        for key in self._known.list_keys():
            if key in self._items:
                # A queued change is newer than what the store holds: syncing the store's copy
                # now would deliver an older state after it.
                continue
            obj = self._known.get(key)
            if obj is not None:
                self._queue_action(SYNC, obj, key)

    def _populate(self) -> None:
        if not self._populated:
            self._populated = True
            self._check_synced()

    def _queue_action(self, action: DeltaType, obj: Any, key: str | None = None) -> None:
        if key is None:
            key = self._key_func(obj)
        deltas = self._items.get(key)
        if deltas is None:
            self._items[key] = [Delta(action, obj)]
            self._queue.append(key)
            self._wake_one()
            return
        if action is DELETED and deltas[-1].type is DELETED:
            # Two deletions in a row: keep the one with more information (a real object beats a
            # tombstone), as client-go's dedupDeltas does.
            if type(deltas[-1].object) is DeletedFinalStateUnknown:
                deltas[-1] = Delta(action, obj)
            return
        deltas.append(Delta(action, obj))

    # -- consumer ---------------------------------------------------------------------------------

    def pop_nowait(self) -> Popped | None:
        """The oldest queued key with its deltas and whether they belong to the initial list, or
        None when nothing is queued. Process them before awaiting anything (see the module doc)."""
        if not self._queue:
            return None
        is_in_initial_list = not self._synced.is_set()
        key = self._queue.popleft()
        if self._initial_population_count > 0:
            self._initial_population_count -= 1
            self._check_synced()
        return _new_popped(Popped, (key, self._items.pop(key), is_in_initial_list))

    async def pop(self) -> Popped:
        """Wait for a queued key and pop it (see :meth:`pop_nowait`); raises :class:`FIFOClosed`
        once the queue is closed and empty."""
        while True:
            item = self.pop_nowait()
            if item is not None:
                return item
            if self._closed:
                raise FIFOClosed(f"{self.name} is closed")
            fut = asyncio.get_running_loop().create_future()
            self._getters.append(fut)
            try:
                await fut
            finally:
                if not fut.done():
                    fut.cancel()
                    with contextlib.suppress(ValueError):
                        self._getters.remove(fut)

    def close(self) -> None:
        """Make waiting and future ``pop`` calls raise :class:`FIFOClosed` once the queue is empty."""
        self._closed = True
        self._wake_all()

    def _wake_one(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)
                return

    def _wake_all(self) -> None:
        while self._getters:
            fut = self._getters.popleft()
            if not fut.done():
                fut.set_result(None)

    def __repr__(self) -> str:
        return f"<DeltaFIFO {self.name!r} queued={len(self._queue)} synced={self.has_synced()}>"
