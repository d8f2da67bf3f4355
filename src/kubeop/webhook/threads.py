"""HandlerThreads: the few threads one webhook runs its synchronous code on.

A synchronous handler (or conversion) runs in a thread so that it cannot stall the event loop.
A thread cannot be cancelled: a call still running at its deadline keeps its thread until the
function returns, and is *stuck* until then. So that stuck calls of one webhook never delay
another's, each webhook has its own threads (``size`` of them, started on demand), and:

- a call waits for a thread only behind calls still within their deadline, and only until its
  own deadline (a call whose deadline passes before it starts is dropped, never run, and its
  arguments are let go at once: a decoded object does not wait in the queue for a thread that
  may never come back);
- when every thread of the webhook is held by a stuck call, a new call is refused at once
  (:class:`Saturated`) rather than queued behind calls that may never return;
- :attr:`HandlerThreads.stuck` counts the stuck calls (a metric reads it) and drops back as
  each one finally returns.

The threads are daemon threads: a call stuck forever does not hold up the process's exit (the
executors of :mod:`concurrent.futures` join their threads at exit).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import queue
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["DEFAULT_THREADS", "HandlerThreads", "Saturated"]

# Threads per webhook: under the GIL more only help code that blocks on I/O (better made async);
# calls beyond them wait for a thread, within their deadline.
DEFAULT_THREADS = 4


class _Work:
    """One queued call; ``call`` (the function and its arguments) is cleared when it is cancelled
    before a thread takes it, so the queue never holds a dropped call's objects."""

    __slots__ = ("call", "future")

    def __init__(self, future: concurrent.futures.Future[Any], call: Callable[[], Any]) -> None:
        self.future = future
        self.call: Callable[[], Any] | None = call


class Saturated(Exception):
    """Every thread of the webhook is held by a call past its deadline; the call was not queued."""

    def __init__(self, stuck: int) -> None:
        super().__init__(f"{stuck} calls still running past their deadline")
        self.stuck = stuck


class HandlerThreads:
    """Up to ``size`` threads for one webhook's synchronous calls (see the module docstring)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a webhook needs at least one thread, not {size}")
        self.size = size
        self._lock = threading.Lock()
        self._work: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._threads = 0
        self._idle = 0
        self._waiting = 0
        self._stuck = 0

    @property
    def stuck(self) -> int:
        """Calls whose caller gave up (deadline, cancellation) and that still hold their thread."""
        return self._stuck

    async def run(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on one of the threads, with the caller's context variables.

        Cancelling the caller (a deadline) drops a call not started yet; a started one runs on
        and counts as stuck until it returns. :class:`Saturated` when all threads are stuck."""
        stuck = self._stuck
        if stuck >= self.size:
            raise Saturated(stuck)
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        work = _Work(future, functools.partial(contextvars.copy_context().run, fn, *args, **kwargs))
        self._submit(work)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if future.cancel():  # not started: it never will, and what it holds goes now
                work.call = None
            else:  # it has started (or just finished): it runs on
                with self._lock:
                    self._stuck += 1
                future.add_done_callback(self._returned)  # at once if it is done already
            raise

    def _returned(self, _future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._stuck -= 1

    def _submit(self, work: _Work) -> None:
        with self._lock:
            self._work.put(work)
            self._waiting += 1
            start = self._waiting > self._idle and self._threads < self.size
            if start:
                self._threads += 1
        if start:
            threading.Thread(target=self._serve, name="kubeop-webhook", daemon=True).start()

    def _serve(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            work = self._work.get()
            with self._lock:
                self._idle -= 1
                self._waiting -= 1
            _run(work)
            del work  # nothing of a finished call stays referenced by an idle thread


def _run(work: _Work) -> None:
    future = work.future
    if not future.set_running_or_notify_cancel():
        return  # its caller gave up before it started
    call, work.call = work.call, None
    try:
        if call is None:  # cleared only once cancelled, and a cancelled call never gets here
            raise RuntimeError("a cancelled call was started")
        result = call()
    except BaseException as exc:  # handed to the caller, as concurrent.futures does
        future.set_exception(exc)
    else:
        future.set_result(result)
