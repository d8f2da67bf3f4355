"""Daemons and timers: handlers that live alongside each object (kopf's ``kopf.daemon`` and
``kopf.timer``).

A daemon starts once per object (after ``initial_delay``), gets a ``stopped`` flag, and is
stopped when the object is being deleted or is gone: the flag is set, after
``cancellation_backoff`` its task is cancelled, and the finalizer is released once it exited (or
``cancellation_timeout`` passed). A daemon that fails is restarted like a failed handler
(``TemporaryError`` delay, ``backoff`` for other exceptions); one that returns is done.

A timer calls its handler every ``interval`` seconds (after ``initial_delay``; with ``idle``, only
once the object's essence has not changed for that long). Its return value goes to
``status.<timer id>`` and its ``patch`` is written after each call.

Both see the object as the cache last saw it (``body``, ``spec``... are refreshed each cycle).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import enum
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeop.kopf.bodies import Patch
from kubeop.kopf.diffs import FieldPath, resolve
from kubeop.kopf.errors import PermanentError, TemporaryError
from kubeop.kopf.events import current_body
from kubeop.kopf.handlers import MISSING, ErrorsMode, Filter, check, prematches
from kubeop.kopf.settings import default_backoff

__all__ = [
    "AsyncDaemonStopped",
    "AsyncDaemonStopperChecker",
    "DaemonStopped",
    "DaemonStoppingReason",
    "Spawned",
    "SpawningHandler",
    "SyncDaemonStopped",
    "SyncDaemonStopperChecker",
]

# How these kopf names behave on kubeop where it is not as in kopf (read by scripts/kopf_compat.py
# into the compatibility table of docs/migration/from-kopf.md; a name not listed behaves as kopf's).
_DIFFERS = {
    "DaemonStopped": "The daemons' `stopped` flag says whether to stop; it has no `stopped.reason`.",
    "DaemonStoppingReason": "Exists with kopf's members; daemons are not told the reason "
    "(no `stopped.reason`).",
}


@dataclass(frozen=True)
class SpawningHandler:
    fn: Callable[..., Any]
    id: str
    resource: str
    kind: str  # "daemon" or "timer"
    field: FieldPath = ()
    value: Filter = None
    labels: Mapping[str, Filter] | None = None
    annotations: Mapping[str, Filter] | None = None
    when: Callable[..., bool] | None = None
    errors: ErrorsMode = ErrorsMode.TEMPORARY
    timeout: float | None = None
    retries: int | None = None
    backoff: float | None = None  # None: settings.execution.default_backoff
    param: Any = None
    initial_delay: float = 0.0
    interval: float | None = None
    idle: float | None = None
    sharp: bool = False
    cancellation_backoff: float | None = None
    cancellation_timeout: float | None = None
    requires_finalizer: bool = True

    def __str__(self) -> str:
        return f"{self.kind.capitalize()} {self.id!r}"

    def fits(self, body: Mapping[str, Any], kwargs: Mapping[str, Any]) -> bool:
        if not prematches(self, body, kwargs):
            return False
        if not self.field:
            return True
        value = resolve(body, self.field, MISSING)
        if self.value is None:
            return value is not MISSING
        return check(self.value, value, kwargs)


class DaemonStopped:
    """The ``stopped`` flag of a daemon: false while it should run, true once asked to stop."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def __bool__(self) -> bool:
        return self._event.is_set()

    def is_set(self) -> bool:
        """Whether the daemon has been asked to stop."""
        return self._event.is_set()

    def set(self) -> None:
        """Ask the daemon to stop."""
        self._event.set()

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {'stopped' if self else 'running'}>"


class SyncDaemonStopped(DaemonStopped):
    """The ``stopped`` flag of a synchronous daemon (kopf's ``SyncDaemonStopperChecker``): true once it should
    stop; ``wait()`` blocks its thread.
    """

    def wait(self, timeout: float | None = None) -> bool:
        """Block the daemon's thread until stopped or ``timeout`` (True if stopped)."""
        return self._event.wait(timeout)


class AsyncDaemonStopped(DaemonStopped):
    """The ``stopped`` flag of an async daemon (kopf's ``AsyncDaemonStopperChecker``): true once it should
    stop; ``await wait()`` sleeps until then.
    """

    async def wait(self, timeout: float | None = None) -> bool:
        """Sleep until stopped or ``timeout`` (True if stopped)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._event.is_set():
            left = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
            if left <= 0:
                return False
            await asyncio.sleep(left)
        return True


SyncDaemonStopperChecker = SyncDaemonStopped
"""kopf's deprecated name of a sync daemon's ``stopped`` flag."""
AsyncDaemonStopperChecker = AsyncDaemonStopped
"""kopf's deprecated name of an async daemon's ``stopped`` flag."""


class DaemonStoppingReason(enum.Flag):
    """Why a daemon is asked to stop (kopf's flags; kubeop's ``stopped`` flag is one boolean)."""

    DONE = enum.auto()
    FILTERS_MISMATCH = enum.auto()
    RESOURCE_DELETED = enum.auto()
    OPERATOR_PAUSING = enum.auto()
    OPERATOR_EXITING = enum.auto()
    DAEMON_SIGNALLED = enum.auto()
    DAEMON_CANCELLED = enum.auto()
    DAEMON_ABANDONED = enum.auto()


Kwargs = Callable[[Patch], dict[str, Any]]
Writer = Callable[[Patch], Awaitable[None]]


@dataclass
class Spawned:
    """The daemons and timers of one object."""

    logger: logging.LoggerAdapter[logging.Logger]
    kwargs: Kwargs  # the handler kwargs for the object as last seen
    write: Writer  # writes a patch to the object
    body: Mapping[str, Any] = field(default_factory=dict)
    changed_at: float = field(default_factory=time.monotonic)
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    flags: dict[str, DaemonStopped] = field(default_factory=dict)
    handlers: dict[str, SpawningHandler] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)

    def ensure(self, handlers: list[SpawningHandler]) -> None:
        """Start the handlers that are not running (nor done) for this object."""
        for h in handlers:
            if h.id in self.tasks or h.id in self.done:
                continue
            self.handlers[h.id] = h
            if h.kind == "daemon":
                flag: DaemonStopped = (
                    AsyncDaemonStopped() if inspect.iscoroutinefunction(h.fn) else SyncDaemonStopped()
                )
                self.flags[h.id] = flag
                coro = self._daemon(h, flag)
            else:
                coro = self._timer(h)
            self.tasks[h.id] = asyncio.create_task(coro, name=f"kopf {h}")

    async def stop(self) -> None:
        """Stop every daemon and timer of the object (kopf's order: flag, backoff, cancel)."""
        for hid, flag in self.flags.items():
            if hid in self.tasks and not self.tasks[hid].done():
                self.logger.debug("%s is signalled to exit gracefully.", self.handlers[hid])
            flag.set()
        waits = []
        for hid, task in list(self.tasks.items()):
            waits.append(self._stop_one(self.handlers[hid], task))
        await asyncio.gather(*waits, return_exceptions=True)
        self.tasks.clear()

    async def _stop_one(self, h: SpawningHandler, task: asyncio.Task[None]) -> None:
        if h.cancellation_backoff:
            await asyncio.wait({task}, timeout=h.cancellation_backoff)
        sync_daemon = h.kind == "daemon" and not inspect.iscoroutinefunction(h.fn)
        if not task.done() and sync_daemon and h.cancellation_timeout is None:
            # A thread cannot be interrupted; kopf waits for a sync daemon to notice `stopped`
            # and return (its result and patch count), unless a cancellation_timeout is set.
            await asyncio.wait({task})
            return
        if not task.done():
            if h.kind == "daemon":
                self.logger.debug("%s is signalled to exit by force.", h)
            task.cancel()
        done, _ = await asyncio.wait({task}, timeout=h.cancellation_timeout)
        if not done:
            self.logger.warning("%s did not exit in time. Leaving it orphaned.", h)

    async def _call(self, h: SpawningHandler, kwargs: dict[str, Any]) -> Any:
        token = current_body.set(self.body)
        try:
            if inspect.iscoroutinefunction(h.fn):
                return await h.fn(**kwargs)
            # A thread cannot be interrupted: on cancellation, wait for it to notice `stopped`.
            future = asyncio.ensure_future(asyncio.to_thread(h.fn, **kwargs))
            try:
                return await asyncio.shield(future)
            except asyncio.CancelledError:
                self.logger.warning("%s is cancelled. Will escalate.", h)
                with contextlib.suppress(BaseException):
                    await future
                raise
        finally:
            current_body.reset(token)

    async def _attempt(
        self, h: SpawningHandler, retry: int, started: float, extra: dict[str, Any]
    ) -> tuple[bool, float | None]:
        """One call; returns (final, delay before the next attempt)."""
        patch = Patch()
        kwargs = dict(
            self.kwargs(patch),
            retry=retry,
            started=dt.datetime.fromtimestamp(started, dt.UTC),
            runtime=dt.timedelta(seconds=time.time() - started),
            param=h.param,
            **extra,
        )
        final, delay = True, None
        try:
            result = await self._call(h, kwargs)
        except asyncio.CancelledError:
            if not inspect.iscoroutinefunction(h.fn):
                raise  # _call said it
            self.logger.warning("%s is cancelled. Will escalate.", h)
            raise
        except TemporaryError as exc:
            self.logger.error("%s failed temporarily: %s", h, str(exc) or repr(exc))
            final, delay = False, exc.delay or 0
        except PermanentError as exc:
            self.logger.error("%s failed permanently: %s", h, str(exc) or repr(exc))
        except Exception as exc:
            if h.errors is ErrorsMode.TEMPORARY:
                backoff = default_backoff(h.backoff)
                self.logger.exception(
                    "%s failed with an exception and will try again in %s seconds: %s", h, backoff, exc
                )
                final, delay = False, backoff
            else:
                self.logger.exception("%s failed with an exception and will stop now: %s", h, exc)
        else:
            self.logger.info("%s succeeded.", h)
            if result is not None:
                status = patch.setdefault("status", {})
                if isinstance(result, Mapping):
                    status.setdefault(h.id, {}).update(result)
                else:
                    status[h.id] = result
        if patch:
            try:
                await self.write(patch)
            except Exception as exc:
                self.logger.warning("%s: could not write its patch: %s", h, exc)
        if not final and h.retries is not None and retry + 1 >= h.retries:
            self.logger.error("%s has exceeded %d retries.", h, h.retries)
            final = True
        return final, delay

    async def _daemon(self, h: SpawningHandler, flag: DaemonStopped) -> None:
        try:
            if h.initial_delay and await _sleep_unless(flag, h.initial_delay):
                return
            retry, started = 0, time.time()
            while not flag:
                final, delay = await self._attempt(h, retry, started, {"stopped": flag})
                if final:
                    break
                retry += 1
                if await _sleep_unless(flag, delay or 0):
                    break
            self.done.add(h.id)
            how = "on request" if flag else "on its own"
            self.logger.debug("%s has exited %s and will not be retried or restarted.", h, how)
        except asyncio.CancelledError:
            self.logger.debug("%s has exited on request and will not be retried or restarted.", h)
            raise

    async def _timer(self, h: SpawningHandler) -> None:
        await asyncio.sleep(h.initial_delay)
        retry, started = 0, time.time()
        while True:
            while h.idle and (idle_for := time.monotonic() - self.changed_at) < h.idle:  # noqa: ASYNC110
                await asyncio.sleep(h.idle - idle_for)  # a change meanwhile moves changed_at on
            t0 = time.monotonic()
            final, delay = await self._attempt(h, retry, started, {})
            if final:
                retry, started = 0, time.time()
                if h.interval is None:
                    self.done.add(h.id)
                    return
                wait = h.interval - ((time.monotonic() - t0) if h.sharp else 0.0)
            else:
                retry += 1
                wait = delay or 0
            await asyncio.sleep(max(0.0, wait))


async def _sleep_unless(flag: DaemonStopped, seconds: float) -> bool:
    """Sleep ``seconds`` unless stopped first; True if stopped."""
    deadline = time.monotonic() + seconds
    while not flag:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        await asyncio.sleep(min(left, 0.1))
    return True
