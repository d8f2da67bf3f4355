"""StallGuard: notices a watch stream that has gone silent, which TCP alone would not for minutes.

Used by the watcher (see :mod:`kubeop.cache.watcher`); the API server sends a bookmark about every
minute on a healthy watch, so a long silence means a dead connection (a frozen proxy, a dropped
NAT entry) rather than a quiet collection.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["StallGuard"]


class StallGuard:
    """Cancels ``task`` when it has waited on a stream for ``timeout`` seconds.

    The consumer sets ``waiting_since`` (``time.monotonic()``, the event loop's clock) before
    each wait and clears it after, so time spent by whoever iterates the watcher never counts as
    a stall. Checks run every ``timeout / 4``: a stall is noticed after 1 to 1.25 times the
    timeout, for a few timer callbacks per minute instead of a timer per event. The watcher must
    be iterated from one task (as reflectors and informers do): that task is the one cancelled.
    Nothing fires until ``armed``: the server has been seen sending bookmarks, so that a server
    (or aggregated API) without them does not get its quiet watches restarted, and relisted once
    their version is compacted, every ``timeout``; those watches still end at the transport's
    deadline (timeoutSeconds + 60 s).
    """

    __slots__ = (
        "_cancelling",
        "_fired",
        "_handle",
        "_loop",
        "_period",
        "_task",
        "_timeout",
        "armed",
        "waiting_since",
    )

    def __init__(
        self, loop: asyncio.AbstractEventLoop, timeout: float, task: asyncio.Task[Any] | None
    ) -> None:
        self._loop = loop
        self._timeout = timeout
        self._period = timeout / 4
        self._task = task
        self._fired = False
        self._cancelling = 0
        self.armed = False
        self.waiting_since: float | None = None
        self._handle: asyncio.TimerHandle | None = None
        if timeout > 0 and task is not None:
            self._handle = loop.call_later(self._period, self._check)

    def _check(self) -> None:
        since = self.waiting_since
        task = self._task
        if task is None or task.done():
            self._handle = None
            return
        if self.armed and since is not None and self._loop.time() - since >= self._timeout:
            self._fired = True
            self._cancelling = task.cancelling()
            self._handle = None
            task.cancel()
            return
        self._handle = self._loop.call_later(self._period, self._check)

    def stalled(self) -> bool:
        """On CancelledError: True when the cancellation was this guard's (and no one else's)."""
        if not self._fired or self._task is None:
            return False
        self._fired = False
        return self._task.uncancel() <= self._cancelling

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
