"""Informer: one watch, one indexed cache, any number of event handlers.

This is client-go's ``SharedIndexInformer`` on asyncio: a :class:`~kubeop.cache.watcher.Watcher`
feeds a :class:`~kubeop.cache.reflector.Reflector`, which writes into a
:class:`~kubeop.cache.delta_fifo.DeltaFIFO`; a processing task pops each key's deltas, applies
them to the :class:`~kubeop.cache.indexer.Indexer` (``informer.store``) and tells every handler:

- ``Added`` / ``Updated`` / ``Replaced`` / ``Sync`` of an object the store does not have:
  ``on_add(obj, is_in_initial_list)``; of one it has: ``on_update(old, new)``. An update whose
  resourceVersion did not change (a resync, or a relist that found the object unchanged) goes
  only to handlers whose resync period is due, as in client-go;
- ``Deleted``: ``on_delete(obj)``, where ``obj`` is a tombstone when a relist found it gone.

Handlers can be added at any time; one added after objects were cached first gets an ``on_add``
for each of them (``is_in_initial_list=True``), synchronously inside ``add_event_handler``.

Tasks: the watch (supervised: if it ever fails it is logged and restarted, so a cache can go
stale only loudly), the processing loop, and, with mutation detection on, the detector. Every
method is meant for the event loop that runs the informer.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from kubeop.cache.backoff import Backoff
from kubeop.cache.delta_fifo import DELETED, SYNC, DeltaFIFO, Deltas, FIFOClosed
from kubeop.cache.gcpause import GcPause
from kubeop.cache.handler import (
    MINIMUM_RESYNC_PERIOD,
    Distributor,
    HandlerRegistration,
    ResourceEventHandler,
    determine_resync_period,
)
from kubeop.cache.indexer import Indexer, IndexFunc
from kubeop.cache.listwatch import ListerWatcher
from kubeop.cache.mutation import MutationDetector, mutation_detection_enabled
from kubeop.cache.reflector import Reflector
from kubeop.cache.tombstone import DeletedFinalStateUnknown
from kubeop.cache.transform import Transform, compact
from kubeop.cache.watcher import Config, Watcher

__all__ = ["Informer"]

log = logging.getLogger("kubeop.cache")

# Processing yields to the event loop after this many keys, so a large (re)list does not block
# other tasks for its whole duration.
_BATCH = 512


class Informer:
    """A shared, indexed cache of one collection with event handlers (see the module docs).

    Args:
        source: what to list and watch (a :class:`~kubeop.cache.listwatch.ListWatch` for a client).
        resync_period: default resync period of handlers, in seconds (0: no resyncs). A resync
            re-delivers every cached object as ``on_update(obj, obj)`` without any API call.
        transform: applied to every object before it is cached; ``compact`` by default (drops
            managedFields, shares repeated strings), None to keep objects as decoded.
        indexers: extra index functions (the namespace index is always there).
        config: watcher settings (page size, streaming lists, timeouts, backoff).
        detect_mutations: check that nobody mutates cached objects (default: the
            ``KUBEOP_CACHE_MUTATION_DETECTOR`` environment variable); see :mod:`kubeop.cache.mutation`.
    """

    def __init__(
        self,
        source: ListerWatcher,
        *,
        resync_period: float = 0.0,
        transform: Transform | None = compact,
        indexers: Mapping[str, IndexFunc] | None = None,
        config: Config | None = None,
        detect_mutations: bool | None = None,
        name: str | None = None,
    ) -> None:
        self.source = source
        self.name = name or source.description
        self.store = Indexer(indexers)
        self._fifo = DeltaFIFO(known_objects=self.store, name=self.name)
        config = config if config is not None else Config()
        self.watcher = Watcher(source, dataclasses.replace(config, transform=transform))
        self._default_resync = max(resync_period, 0.0)
        self._resync_check_period = self._default_resync
        self._distributor = Distributor(self.name)
        self._reflector = Reflector(
            self._fifo,
            self.watcher,
            should_resync=self._distributor.should_resync,
            name=self.name,
            on_list=self._on_list if config.gc_pause > 0 else None,
        )
        self._gc_pause_seconds = config.gc_pause
        self._gc_pause: GcPause | None = None  # held from a list's start until it is processed
        self._list_loaded = False
        enabled = mutation_detection_enabled() if detect_mutations is None else detect_mutations
        self.mutation_detector = MutationDetector(self.name) if enabled else None
        self._tasks: list[asyncio.Task[None]] = []
        self._applied_rv = ""
        self._last_applied: Any = None  # the newest object the store has applied
        self._started = False
        self._stopped = False

    def __repr__(self) -> str:
        return f"<Informer {self.name} objects={len(self.store)} synced={self.has_synced()}>"

    # -- state ------------------------------------------------------------------------------------

    def has_synced(self) -> bool:
        """True once the first complete list has been applied to the store and delivered."""
        return self._fifo.has_synced()

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait until :meth:`has_synced` (at most ``timeout`` seconds); returns whether it did."""
        if self.has_synced():
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._fifo.wait_synced()
        except TimeoutError:
            return False
        return True

    @property
    def last_sync_resource_version(self) -> str:
        """The resourceVersion up to which the store reflects every change the watch delivered.

        client-go's ``LastSyncResourceVersion`` is the reflector's: received, possibly still
        queued. Here it only moves when nothing is queued, so a reader that sees it at or past
        the version of its own write knows the store has applied that write (read-your-writes).
        """
        if len(self._fifo) == 0:
            self._applied_rv = self.watcher.resource_version
        return self._applied_rv

    def has_applied(self, resource_version: str) -> bool:
        """Has the store applied a change at or after ``resource_version`` (an etcd revision)?

        For read-your-writes: once the store has applied anything at or after the version a write
        returned, the store's copy (or its absence, after a delete) is at least as new as the
        write. Watch events arrive in revision order, so the newest applied object tells.
        """
        if not resource_version.isdigit():
            return False
        wanted = int(resource_version)
        last = self._last_applied
        applied = (last.get("metadata") or {}).get("resourceVersion") or "" if last is not None else ""
        if applied.isdigit() and int(applied) >= wanted:
            return True
        synced = self.last_sync_resource_version  # a relist applies objects in any order
        return synced.isdigit() and int(synced) >= wanted

    @property
    def started(self) -> bool:
        """True once the informer has been started."""
        return self._started

    # -- handlers and indexers --------------------------------------------------------------------

    def add_event_handler(
        self, handler: ResourceEventHandler, resync_period: float | None = None
    ) -> HandlerRegistration:
        """Subscribe ``handler``; objects already cached are replayed to it as adds right away.

        ``resync_period`` (seconds) defaults to the informer's. Periods below 1 s are raised to
        1 s; once the informer runs, periods below its resync check period are raised to it, and
        an informer started without resyncs cannot add them later (client-go's rules). Before
        start, a shorter period lowers the check period instead.
        """
        if self._stopped:
            raise RuntimeError(f"informer {self.name} is stopped: cannot add an event handler")
        requested = self._default_resync if resync_period is None else resync_period
        if requested > 0:
            if requested < MINIMUM_RESYNC_PERIOD:
                log.warning(
                    "resync period %.3f s raised to the minimum of %.0f s", requested, MINIMUM_RESYNC_PERIOD
                )
                requested = MINIMUM_RESYNC_PERIOD
            if self._resync_check_period <= 0 or requested < self._resync_check_period:
                if not self._started:
                    self._resync_check_period = requested
                    for reg in self._distributor.registrations:
                        reg.resync_period = determine_resync_period(reg.requested_resync_period, requested)
                elif self._resync_check_period > 0:
                    requested = self._resync_check_period
        reg = HandlerRegistration(
            handler, requested, determine_resync_period(requested, self._resync_check_period), self.has_synced
        )
        self._distributor.add(reg)
        for obj in self.store.list():
            try:
                handler.on_add(obj, True)
            except Exception:
                log.exception(
                    "%s: event handler %r raised in on_add (replay); continuing", self.name, handler
                )
        return reg

    def remove_event_handler(self, registration: HandlerRegistration) -> None:
        """Unsubscribe; no notification reaches the handler after this returns."""
        self._distributor.remove(registration)

    @property
    def handlers(self) -> tuple[HandlerRegistration, ...]:
        """The registrations of the event handlers added to the informer."""
        return self._distributor.registrations

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add index functions to the store (allowed at any time; cached objects get indexed)."""
        self.store.add_indexers(indexers)

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> None:
        """Start watching and processing, as tasks on the running event loop (idempotent)."""
        if self._stopped:
            raise RuntimeError(f"informer {self.name} was stopped and cannot be restarted")
        if self._started:
            return
        self._started = True
        loop = asyncio.get_running_loop()
        self._reflector.resync_period = self._resync_check_period
        self._tasks = [
            loop.create_task(self._run_reflector(), name=f"informer watch {self.name}"),
            loop.create_task(self._process(), name=f"informer processing {self.name}"),
        ]
        if self.mutation_detector is not None:
            self._tasks.append(
                loop.create_task(self.mutation_detector.run(), name=f"mutation detector {self.name}")
            )
        for task in self._tasks:
            task.add_done_callback(self._task_done)

    async def stop(self) -> None:
        """Stop the tasks and wait for them; raises
        :class:`~kubeop.cache.mutation.CacheMutationError` if mutation detection found any."""
        if self._stopped:
            return
        self._stopped = True
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._fifo.close()
        self._resume_gc()
        if self.mutation_detector is not None:
            self.mutation_detector.check()

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or self._stopped:
            return
        exc = task.exception()
        log.critical(
            "%s: informer task %s ended (%r); the cache is no longer updated", self.name, task.get_name(), exc
        )

    async def _run_reflector(self) -> None:
        backoff = Backoff()
        while True:
            try:
                await self._reflector.run()
                log.error("%s: the watch ended unexpectedly; restarting it", self.name)
            except Exception:
                log.exception("%s: the watch failed; restarting it", self.name)
            await asyncio.sleep(backoff.next_delay())

    def _on_list(self, started: bool) -> None:
        """The reflector began a (re)list (``started``) or handed it to the FIFO (or failed):
        the garbage collector is paused until the listed objects are processed (see
        :mod:`kubeop.cache.gcpause`)."""
        if started:
            self._list_loaded = False
            if self._gc_pause is None or self._gc_pause.released:
                self._gc_pause = GcPause(self._gc_pause_seconds)
            return
        self._list_loaded = True
        if len(self._fifo) == 0:
            self._resume_gc()

    def _resume_gc(self) -> None:
        if self._gc_pause is not None:
            self._gc_pause.release()
            self._gc_pause = None

    async def _process(self) -> None:
        fifo = self._fifo
        handle = self._handle
        while True:
            try:
                item = await fifo.pop()
            except FIFOClosed:
                return
            handle(*item)
            done = 1
            while (next_item := fifo.pop_nowait()) is not None:
                handle(*next_item)
                done += 1
                if done >= _BATCH:
                    done = 0
                    await asyncio.sleep(0)
            if self._gc_pause is not None and self._list_loaded:
                self._resume_gc()  # the list's objects are in the store

    def _handle(self, key: str, deltas: Deltas, is_in_initial_list: bool) -> None:
        store = self.store
        dist = self._distributor
        detector = self.mutation_detector
        for delta in deltas:
            obj: Any = delta.object
            try:
                if delta.type is DELETED:
                    store.delete_key(key)
                    if type(obj) is not DeletedFinalStateUnknown:
                        self._last_applied = obj
                    dist.on_delete(obj)
                    continue
                if delta.type is not SYNC:  # a resync re-delivers an older object
                    self._last_applied = obj
                old = store.put(key, obj)
                if detector is not None:
                    detector.add_object(obj)
                if old is None:
                    dist.on_add(obj, is_in_initial_list)
                else:
                    # Same resourceVersion: a resync or an unchanged relisted object.
                    is_sync = old["metadata"].get("resourceVersion") == obj["metadata"].get("resourceVersion")
                    dist.on_update(old, obj, is_sync)
            except Exception:
                log.exception("%s: could not process a %s delta; skipped", self.name, delta.type.value)
