"""Reflector: applies a watcher's events to a store, swapping in each (re)list atomically.

``await Reflector(store, watcher(...)).run()`` keeps ``store`` equal to the server's collection:
``Apply`` becomes ``store.add`` (ADDED) or ``store.update`` (MODIFIED), ``Delete`` becomes
``store.delete``, and the objects between ``Init`` and ``InitDone`` form a (re)list. A store
that takes a list piece by piece (:class:`IncrementalStore`: the
:class:`~kubeop.cache.delta_fifo.DeltaFIFO` informers use) gets each object as it arrives, so the
informer applies the list while the rest of it is still on the wire instead of after the last
object (on 2 cores, a third of a 100,000-object sync was that tail); any other store gets them
buffered, in one ``store.replace(objects, resource_version)`` call, so its readers never see half
a relist: an :class:`~kubeop.cache.indexer.Indexer` for a plain cache (kube-rs
``reflector(writer, watcher)``).

With ``resync_period`` the reflector also calls ``store.resync()`` periodically (when
``should_resync()`` agrees), client-go's resync: no API call, the store re-emits what it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterable, Callable
from typing import Any, Protocol, runtime_checkable

from kubeop.cache.watcher import Apply, Delete, Init, InitApply, InitDone, Watcher, WatcherEvent

__all__ = ["IncrementalStore", "Reflector", "ReflectorStore", "reflector"]

log = logging.getLogger("kubeop.cache")


class ReflectorStore(Protocol):
    """What a reflector writes to (client-go ``ReflectorStore``)."""

    def add(self, obj: Any) -> None:
        """An object was added."""

    def update(self, obj: Any) -> None:
        """An object was updated."""

    def delete(self, obj: Any) -> None:
        """An object was deleted."""

    def replace(self, objects: list[Any], resource_version: str) -> None:
        """A (re)list: ``objects`` are now the whole content, as of ``resource_version``."""

    def resync(self) -> None:
        """A periodic resync: hand every object on again."""


@runtime_checkable
class IncrementalStore(ReflectorStore, Protocol):
    """A store that takes a (re)list one object at a time: ``begin_replace()``, then
    ``replace_add(obj)`` per object, then ``end_replace(resource_version)``; a new
    ``begin_replace`` drops an unfinished one (the list failed and starts over)."""

    def begin_replace(self) -> None: ...

    def replace_add(self, obj: Any) -> None: ...

    def end_replace(self, resource_version: str) -> None: ...


class Reflector:
    """Feeds ``store`` from ``events`` (normally a :class:`~kubeop.cache.watcher.Watcher`).

    ``run()`` returns only if the event stream ends, which a Watcher never does; a store method
    that raises is logged and the event skipped, so one bad object cannot stop the cache.
    """

    def __init__(
        self,
        store: ReflectorStore,
        events: AsyncIterable[WatcherEvent],
        *,
        resync_period: float = 0.0,
        should_resync: Callable[[], bool] | None = None,
        name: str = "",
        on_list: Callable[[bool], None] | None = None,
    ) -> None:
        self.store = store
        self.events = events
        self.resync_period = resync_period
        self.should_resync = should_resync
        self.name = name or (events.description if isinstance(events, Watcher) else "reflector")
        self._last_sync_rv = ""
        # Told True when a (re)list starts, False once it is in the store or has failed.
        self.on_list = on_list
        self._listing = False

    @property
    def last_sync_resource_version(self) -> str:
        """The resourceVersion of the last list or event applied (client-go's
        ``LastSyncResourceVersion``): where a new watch would resume."""
        if isinstance(self.events, Watcher):
            return self.events.resource_version
        return self._last_sync_rv

    async def run(self) -> None:
        """List, then watch, and keep the store in step (with resyncs when configured), until cancelled."""
        resync: asyncio.Task[None] | None = None
        if self.resync_period > 0:
            resync = asyncio.get_running_loop().create_task(self._resync_loop(), name=f"resync {self.name}")
        try:
            await self._apply_events()
        finally:
            if resync is not None:
                resync.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await resync

    async def _apply_events(self) -> None:
        try:
            await self._apply_all()
        finally:
            self._list_ended()

    def _list_started(self) -> None:
        if not self._listing:
            self._listing = True
            if self.on_list is not None:
                self.on_list(True)

    def _list_ended(self) -> None:
        if self._listing:
            self._listing = False
            if self.on_list is not None:
                self.on_list(False)

    async def _apply_all(self) -> None:
        store = self.store
        incremental = store if isinstance(store, IncrementalStore) else None
        buffer: list[Any] = []
        add = buffer.append if incremental is None else incremental.replace_add
        async for event in self.events:
            try:
                if type(event) is InitApply:
                    add(event.object)
                elif type(event) is Apply:
                    obj = event.object
                    if event.added:
                        store.add(obj)
                    else:
                        store.update(obj)
                    self._last_sync_rv = obj["metadata"].get("resourceVersion") or self._last_sync_rv
                elif type(event) is Delete:
                    obj = event.object
                    store.delete(obj)
                    self._last_sync_rv = obj["metadata"].get("resourceVersion") or self._last_sync_rv
                elif type(event) is Init:
                    self._list_started()
                    if incremental is not None:
                        incremental.begin_replace()
                    else:
                        buffer = []
                        add = buffer.append
                elif type(event) is InitDone:
                    try:
                        if incremental is not None:
                            incremental.end_replace(event.resource_version)
                        else:
                            objects, buffer = buffer, []
                            add = buffer.append
                            store.replace(objects, event.resource_version)
                    finally:
                        self._list_ended()
                    self._last_sync_rv = event.resource_version
            except Exception:
                log.exception("%s: could not apply %s to the store; skipped", self.name, type(event).__name__)

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.resync_period)
            if self.should_resync is None or self.should_resync():
                try:
                    self.store.resync()
                except Exception:
                    log.exception("%s: resync failed", self.name)


async def reflector(
    store: ReflectorStore, events: AsyncIterable[WatcherEvent], *, resync_period: float = 0.0
) -> None:
    """Keep ``store`` in step with ``events`` until cancelled (see :class:`Reflector`)."""
    await Reflector(store, events, resync_period=resync_period).run()
