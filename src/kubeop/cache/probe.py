"""ServerProbe: notice quickly that an API server which was down is back.

A watcher that fails backs off (0.8 s doubling to 30 s, see :mod:`kubeop.cache.backoff`), so
after an outage of a few seconds client-go's informers are still asleep when the server returns
and converge ~9 s later. Shortening the backoff would hammer a server that is struggling;
instead, while at least one watcher waits out a delay caused by an unreachable or failing server,
one probe per API server asks ``/readyz`` every ``interval`` seconds (one cheap request,
whatever the number of informers). A waiter is released early only when the probe saw the server *down*
and then *ready*: the down-to-up transition is the news. "Down" may have been seen before the
wait began (the last check before it, within ``memory`` seconds), because a server often comes
back while a watcher is between two waits, busy failing its last attempt. A server that answers
``/readyz`` but fails the watch anyway (a broken proxy, an RBAC problem) is never seen down and
releases nobody early; a server that flaps releases each waiter at most once per down-to-up
transition, while the backoff keeps growing, so it is never hit harder than its own flapping
plus one probe per interval.

Released waiters are spread over ``spread`` seconds so that a hundred informers do not re-watch
in the same millisecond.

There is no registry: whoever builds the cache of one API server makes its probe
(:meth:`ServerProbe.for_client`; :class:`~kubeop.cache.SharedInformerFactory` does, as
``factory.probe``) and hands it to everything that waits for that server: the factory's watchers,
the controllers' runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import warnings
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["ReturnGuard", "ServerProbe", "probe_for"]

log = logging.getLogger("kubeop.cache")

#: ``True`` when the server is ready; ``False`` or an exception when it is not.
ReadyCheck = Callable[[], Awaitable[bool]]


class _Waiter:
    __slots__ = ("future", "seen_down")

    def __init__(self, future: asyncio.Future[bool]) -> None:
        self.future = future
        self.seen_down = False


class ServerProbe:
    """Shared "is the server back?" signal for everything that watches one API server.

    Args:
        check: one readiness check (``/readyz`` through the client's transport, by default).
        interval: seconds between checks while someone waits (each check also waits for the
            previous one to finish).
        spread: released waiters wake up at random within this many seconds.
    """

    def __init__(
        self,
        check: ReadyCheck,
        *,
        interval: float = 0.5,
        spread: float = 0.1,
        memory: float = 120.0,
        rng: random.Random | None = None,
    ) -> None:
        self._check = check
        self.interval = interval
        self.spread = spread
        self.memory = memory
        self._last_down: float | None = None  # loop time of the last check that saw "not ready"
        self._last_up: float | None = None
        self._rng = rng or random.Random()
        self._waiters: set[_Waiter] = set()
        self._task: asyncio.Task[None] | None = None
        self.checks = 0  # how many checks were made (for tests and metrics)

    @classmethod
    def for_client(cls, client: Any, *, path: str = "/readyz", **options: Any) -> ServerProbe:
        """A probe of the API server ``client`` (a :class:`~kubeop.client.Client`) talks to.

        Ready means ``path`` answered 200; 401/403 also count (the server is serving, we just may
        not read its health: anonymous access is often disabled), every other answer or no answer
        means not ready. ``options`` are the constructor's (``interval``, ``spread``, ...). Make
        one per API server and share it: each probe checks on its own.
        """

        async def check() -> bool:
            status = await client.transport.probe(path)
            return status == 200 or status in (401, 403)

        return cls(check, **options)

    @property
    def seen(self) -> str:
        """What the last check saw: ``"ready"``, ``"not ready"``, or ``"unchecked"`` (the probe
        checks only while a watch or a controller waits on the server: nothing has failed)."""
        up, down = self._last_up, self._last_down
        if up is None and down is None:
            return "unchecked"
        return "not ready" if down is not None and (up is None or down > up) else "ready"

    async def wait(self, delay: float) -> bool:
        """Sleep ``delay`` seconds, or less when the server comes back meanwhile.

        Returns True when released early because the server was seen down and then ready.
        """
        if delay <= 0:
            return False
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop.create_future())
        down = self._last_down
        if down is not None and (self._last_up is None or down > self._last_up):
            waiter.seen_down = loop.time() - down < self.memory
        self._waiters.add(waiter)
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run(), name="kubeop-server-probe")
        try:
            async with asyncio.timeout(delay):
                return await waiter.future
        except TimeoutError:
            return False
        finally:
            self._waiters.discard(waiter)
            if not waiter.future.done():
                waiter.future.cancel()
            if not self._waiters and self._task is not None:
                # Nobody waits any more: stop probing now rather than after the next interval
                # (and leave no task behind when the last informer stops).
                self._task.cancel()
                self._task = None

    async def _run(self) -> None:
        try:
            while self._waiters:
                ready = await self._ready()
                self.checks += 1
                if ready:
                    self._last_up = asyncio.get_running_loop().time()
                else:
                    self._last_down = asyncio.get_running_loop().time()
                for waiter in list(self._waiters):
                    if not ready:
                        waiter.seen_down = True
                    elif waiter.seen_down and not waiter.future.done():
                        self._waiters.discard(waiter)
                        self._release(waiter)
                if not self._waiters:
                    break
                await asyncio.sleep(self.interval)
        finally:
            if self._task is asyncio.current_task():
                self._task = None

    async def _ready(self) -> bool:
        try:
            return await self._check()
        except asyncio.CancelledError:
            raise
        except Exception:
            return False

    def _release(self, waiter: _Waiter) -> None:
        delay = self._rng.uniform(0, self.spread) if self.spread > 0 else 0.0
        if delay <= 0:
            waiter.future.set_result(True)
            return

        def fire() -> None:
            if not waiter.future.done():
                waiter.future.set_result(True)

        asyncio.get_running_loop().call_later(delay, fire)

    async def close(self) -> None:
        """Stop probing."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class ReturnGuard:
    """Cancels ``task`` if ``probe`` sees the server come back within ``window`` seconds.

    For a request sent to a server that was failing: an idempotent request (a watch, a list) is
    retried by the client's transport on connection errors and 503s, with pauses growing to
    seconds, blind to the server's return, so the request can still be asleep in those pauses
    seconds after the server is back. The owner ``stop()`` s the guard once the request has
    answered; if a ``CancelledError`` arrives first it asks :meth:`fired`, and when that is True
    (the cancellation was the guard's alone) sends the request again at once. Costs one task while
    armed, and probes only while the request is outstanding.
    """

    __slots__ = ("_cancelling", "_fired", "_task", "_waiter")

    def __init__(self, probe: ServerProbe, task: asyncio.Task[Any], window: float = 15.0) -> None:
        self._task = task
        self._fired = False
        self._cancelling = 0
        self._waiter: asyncio.Task[None] | None = asyncio.get_running_loop().create_task(
            self._watch(probe, window), name="kubeop-return-guard"
        )

    async def _watch(self, probe: ServerProbe, window: float) -> None:
        if await probe.wait(window) and self._waiter is not None and not self._task.done():
            self._fired = True
            self._cancelling = self._task.cancelling()
            self._task.cancel()

    def stop(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.cancel()

    def fired(self) -> bool:
        """On CancelledError: True when the cancellation was this guard's (and no one else's)."""
        if not self._fired:
            return False
        self._fired = False
        return self._task.uncancel() <= self._cancelling


# Only for the deprecated probe_for (removed with it); nothing in kubeop reads it.
_DEPRECATED_PROBES: weakref.WeakKeyDictionary[Any, ServerProbe] = weakref.WeakKeyDictionary()


def probe_for(client: Any, *, path: str = "/readyz") -> ServerProbe:
    """Deprecated: the probe of ``client`` made by the first call for it.

    Use the probe of the cache you watch with (``SharedInformerFactory.probe``), or make one with
    :meth:`ServerProbe.for_client` and pass it on (``ListWatch(..., probe=probe)``).
    """
    warnings.warn(
        "kubeop.cache.probe_for is deprecated: use SharedInformerFactory(...).probe, or make one "
        "probe per API server with ServerProbe.for_client(client) and pass it on (probe=...)",
        DeprecationWarning,
        stacklevel=2,
    )
    probe = _DEPRECATED_PROBES.get(client)
    if probe is None:
        probe = _DEPRECATED_PROBES[client] = ServerProbe.for_client(client, path=path)
    return probe
