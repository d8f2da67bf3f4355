"""WatchQueue: the bounded queue between a storage's writes (or its etcd watch) and one watch.

Events are put without waiting; a watch that falls ``size`` events behind is ended rather than
let the queue grow (kube-apiserver ends a slow watcher too), and resumes from its last version.
The end marker always gets a place: the oldest waiting events make room for it. While nothing
arrives for the bookmark interval and nothing is waiting, the watch is sent a BOOKMARK.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kubeop.apiserver.status import StatusError
from kubeop.apiserver.storage import StorageEvent, WatchOptions

__all__ = ["WatchQueue"]

_END = object()


class WatchQueue:
    """At most ``size`` events waiting for one watch; see the module docstring."""

    __slots__ = ("_queue", "ended")

    def __init__(self, size: int) -> None:
        self._queue: asyncio.Queue[StorageEvent | StatusError | object] = asyncio.Queue(size)
        self.ended = False

    def put(self, item: StorageEvent | StatusError) -> None:
        """Queue an event (or an error the watch raises); a full queue ends the watch."""
        if self.ended:
            return
        try:
            self._queue.put_nowait(item)
        except asyncio.QueueFull:
            self.end()

    def end(self) -> None:
        """End the watch once what is queued before the end is delivered (dropping the oldest if full)."""
        if self.ended:
            return
        self.ended = True
        while True:  # make room for the end marker: the watcher resumes from its last version
            try:
                self._queue.put_nowait(_END)
                return
            except asyncio.QueueFull:
                self._queue.get_nowait()

    async def next(self, options: WatchOptions, bookmark_version: Callable[[], int]) -> StorageEvent | None:
        """The next event, None at the end (an error put is raised). With ``options.bookmarks``, a
        BOOKMARK at ``bookmark_version()`` after a quiet ``bookmark_interval`` with nothing waiting
        (every change up to that version was delivered)."""
        while True:
            try:
                async with asyncio.timeout(options.bookmark_interval if options.bookmarks else None):
                    item = await self._queue.get()
            except TimeoutError:
                if self._queue.empty():
                    version = bookmark_version()
                    return StorageEvent("BOOKMARK", {"metadata": {"resourceVersion": str(version)}}, version)
                continue
            if item is _END:
                return None
            if isinstance(item, StatusError):
                raise item
            assert isinstance(item, StorageEvent)
            return item
