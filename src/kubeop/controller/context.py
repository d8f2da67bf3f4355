"""The per-reconcile context: request, client, logger, event recorder, reconcile id, clock."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from kubeop.controller.request import Request
from kubeop.queue import Clock, LoopClock

if TYPE_CHECKING:
    from kubeop.controller.client import ReconcilerClient
    from kubeop.controller.events import EventRecorder

__all__ = ["Context", "SyncClient"]

T = TypeVar("T")

#: The clock of every controller whose manager was given none: the real time.
SYSTEM_CLOCK: Clock = LoopClock()


class Context:
    """What a reconciler gets besides the request. Cheap to build: the logger and the reconcile
    id are made only when used.

    ``ctx.now()`` is the time to act on (a UTC datetime) and ``ctx.clock`` the clock it comes
    from: the manager's (``Manager(clock=...)``), which also times the controller's queue, so a
    test that steps a :class:`~kubeop.queue.SteppedClock` moves both what a reconciler sees and
    when its ``Result(requeue_after=...)`` comes back.
    """

    __slots__ = ("_id", "_log", "client", "clock", "controller", "recorder", "request")

    def __init__(
        self,
        request: Request,
        client: ReconcilerClient,
        recorder: EventRecorder,
        controller: str,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.request = request
        self.client = client
        self.recorder = recorder
        self.controller = controller
        self.clock = clock
        self._id: str | None = None
        self._log: logging.LoggerAdapter[logging.Logger] | None = None

    def now(self) -> dt.datetime:
        """The wall time (timezone-aware, UTC) from the manager's clock; use it, not
        ``datetime.now()``, for anything a test should be able to step."""
        return self.clock.utcnow()

    @property
    def reconcile_id(self) -> str:
        """A random id that tags every log line of this reconcile."""
        if self._id is None:
            self._id = os.urandom(6).hex()
        return self._id

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        if self._log is None:
            self._log = logging.LoggerAdapter(
                logging.getLogger(f"kubeop.controller.{self.controller}"),
                {
                    "controller": self.controller,
                    "object_namespace": self.request.namespace,
                    "object_name": self.request.name,
                    "reconcile_id": self.reconcile_id,
                },
            )
        return self._log


class SyncClient:
    """The reconciler client for sync reconcilers, which run in worker threads: every method
    runs the async one on the manager's event loop and waits for it."""

    def __init__(self, client: ReconcilerClient, loop: asyncio.AbstractEventLoop) -> None:
        self._client = client
        self._loop = loop

    def _run(self, aw: Awaitable[T]) -> T:
        return asyncio.run_coroutine_threadsafe(aw, self._loop).result()  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Callable[..., Any]:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr  # type: ignore[no-any-return]

        def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            if asyncio.iscoroutine(result):
                return self._run(result)
            return result

        return call
