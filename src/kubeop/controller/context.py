"""The per-reconcile context: request, client, logger, event recorder, reconcile id, clock."""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import logging
import os
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from kubeop.controller.request import Request
from kubeop.queue import Clock, LoopClock

if TYPE_CHECKING:
    from kubeop.controller.client import ReconcilerClient
    from kubeop.controller.events import EventRecorder
    from kubeop.controller.workflow import WorkflowResult

__all__ = ["Context", "SyncClient", "current_reconcile"]

T = TypeVar("T")

#: The clock of every controller whose manager was given none: the real time.
SYSTEM_CLOCK: Clock = LoopClock()

# Reconcile ids: a counter from a random start, shown scrambled (multiplying by an odd constant
# modulo 2**40 is a bijection, so ids stay unique while neighbours do not look alike). Taking
# one costs a next() per reconcile; the text is made only when a line shows it.
_MASK = (1 << 40) - 1
_ids = itertools.count(int.from_bytes(os.urandom(5), "big"))

_running: ContextVar[Context | None] = ContextVar("kubeop_reconcile", default=None)


def current_reconcile() -> Context | None:
    """The context of the reconcile running in this task or thread, if any (what the log
    formatter and the reconciler client's change lines name)."""
    return _running.get()


class Context:
    """What a reconciler gets besides the request: ``ctx.client``, ``ctx.recorder``, ``ctx.log``,
    ``ctx.now()``.

    Log through ``ctx.log`` (or any logger: while the reconcile runs, kubeop's formatter tags
    every line with it)::

        async def reconcile(req: Request, ctx: Context) -> None:
            ctx.log.info("scaling to %d replicas", 3)
            # ... INFO kubeop.controller.memcached: scaling to 3 replicas
            #     controller=memcached kind=Memcached object=default/web reconcileID=5c1e09a2f3

    ``ctx.now()`` is the time to act on (a UTC datetime) and ``ctx.clock`` the clock it comes
    from: the manager's (``Manager(clock=...)``), which also times the controller's queue, so a
    test that steps a :class:`~kubeop.queue.SteppedClock` moves both what a reconciler sees and
    when its ``Result(requeue_after=...)`` comes back.

    Cheap to build: the logger and the text of the reconcile id are made only when used.
    """

    __slots__ = (
        "_log",
        "_n",
        "client",
        "clock",
        "controller",
        "dependents",
        "kind",
        "recorder",
        "request",
        "writes",
    )

    def __init__(
        self,
        request: Request,
        client: ReconcilerClient,
        recorder: EventRecorder,
        controller: str,
        clock: Clock = SYSTEM_CLOCK,
        kind: str = "",
    ) -> None:
        self.request = request
        self.client = client
        self.recorder = recorder
        self.controller = controller
        self.clock = clock
        self.kind = kind
        self._n = next(_ids)
        #: The dependents' states of this reconcile (a :class:`~kubeop.controller.WorkflowResult`)
        #: when the controller has a workflow (``Controller.dependents``), else None.
        self.dependents: WorkflowResult | None = None
        #: The write requests this reconcile sent to the API server, counted only while an
        #: observer asks for them (the dashboard: :func:`kubeop.controller.journal.counting_writes`);
        #: else 0.
        self.writes = 0
        self._log: logging.LoggerAdapter[logging.Logger] | None = None

    def now(self) -> dt.datetime:
        """The wall time (timezone-aware, UTC) from the manager's clock; use it, not
        ``datetime.now()``, for anything a test should be able to step."""
        return self.clock.utcnow()

    @property
    def reconcile_id(self) -> str:
        """A short id, unique per reconcile, that tags every log line of this reconcile."""
        return format((self._n * 0x9E3779B97F4A7C15) & _MASK, "010x")

    def log_fields(self) -> dict[str, str]:
        """This reconcile as LogRecord attributes (``extra=``): controller, kind,
        object_namespace, object_name, reconcile_id, and cluster in a fleet (``name`` and
        ``namespace`` would clash with LogRecord's own ``name``)."""
        fields = {
            "controller": self.controller,
            "kind": self.kind,
            "object_namespace": self.request.namespace,
            "object_name": self.request.name,
            "reconcile_id": self.reconcile_id,
        }
        if self.request.cluster:
            fields["cluster"] = self.request.cluster
        return fields

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger (``kubeop.controller.<controller>``) whose lines carry this reconcile's
        controller, kind, object and reconcile id, also for formatters other than kubeop's."""
        if self._log is None:
            self._log = logging.LoggerAdapter(
                logging.getLogger(f"kubeop.controller.{self.controller}"), self.log_fields()
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
