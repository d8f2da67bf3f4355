"""The running controller a manager makes of a :class:`~kubeop.controller.Controller`.

Used by :mod:`kubeop.manager` (and whoever runs controllers without one); not exported from
``kubeop.controller``, whose users describe controllers and let a manager run them.

A description says what to watch and reconcile; a :class:`RunningController` is one run of it:
its queue, its workers, its handlers on the shared informers and its metric series, all made
when it is built and ended by :meth:`RunningController.stop`. A manager builds one for each
description it was given, each time it starts, so one description can run in several managers.
"""

from __future__ import annotations

import asyncio
import concurrent.futures.thread
import contextvars
import inspect
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kubeop.cache import (
    Backoff,
    BackoffConfig,
    DeletedFinalStateUnknown,
    FuncHandler,
    HandlerRegistration,
    Informer,
    ServerProbe,
    SharedInformerFactory,
)
from kubeop.client.unavailable import server_unavailable
from kubeop.controller.context import SYSTEM_CLOCK, Context, SyncClient, _running
from kubeop.controller.controller import Controller, RateLimiterSource, kind_name
from kubeop.controller.handler import EventHandler, enqueue_for_owner
from kubeop.controller.journal import ControllerLoad, ReconcileJournal, ReconcileRecord
from kubeop.controller.predicate import Predicate
from kubeop.controller.request import Request, Result, TerminalError, request_for
from kubeop.core.model import ModelMismatch
from kubeop.core.resource import ApiResource
from kubeop.queue import Clock, MetricsProvider, QueueShutDown, RateLimiter, RateLimitingQueue

if TYPE_CHECKING:
    from kubeop.controller.client import ReconcilerClient
    from kubeop.controller.events import EventRecorder
    from kubeop.controller.metrics import ControllerSeries, Metrics
    from kubeop.controller.shard import ShardGate

__all__ = ["ControllerRuntime", "RunningController"]

log = logging.getLogger("kubeop.controller")


@dataclass(slots=True)
class _Streak:
    """A request's run of failed reconciles: logged in full once, then briefly, then its end."""

    error: str
    attempts: int = 1
    since: float = field(default_factory=time.monotonic)


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_FRAMEWORK_FRAMES = (__file__, concurrent.futures.thread.__file__)


def _exc_info(exc: BaseException) -> tuple[type[BaseException], BaseException, TracebackType | None]:
    """``exc`` for a log line, its traceback starting at the reconciler: the worker's own frames
    (and the thread pool's, for a sync reconciler) are left out."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename in _FRAMEWORK_FRAMES:
        tb = tb.tb_next
    return type(exc), exc, tb


def _seconds(delay: float) -> str:
    return f"{delay * 1000:.0f} ms" if delay < 1.0 else f"{delay:.3g} s"


def _fields(ctx: Context | None, **more: str) -> dict[str, str]:
    """A reconcile's log fields (for any formatter), plus ``more``; only on lines being logged."""
    fields = ctx.log_fields() if ctx is not None else {}
    fields.update(more)
    return fields


#: Retries of requests parked on an unavailable server, when the readiness probe does not end the
#: wait first: 0.2 s doubling to 30 s (each stretched by up to 2x), from 0.2 s again once the
#: server is seen back or after 2 minutes without such failures.
UNAVAILABLE_BACKOFF = BackoffConfig(initial=0.2, cap=30.0)


def _from_any_thread(add: Callable[[Request], None]) -> Callable[[Request], None]:
    """``add`` for a trigger, which may be called from any thread (a sync reconciler's worker
    thread, another library's callback): the queue belongs to the event loop running now, so a
    call from another thread is handed to that loop."""
    loop = asyncio.get_running_loop()
    loop_thread = threading.get_ident()

    def add_from_any_thread(request: Request) -> None:
        if threading.get_ident() == loop_thread:
            add(request)
        else:
            loop.call_soon_threadsafe(add, request)

    return add_from_any_thread


def _rate_limiter(source: RateLimiterSource | None) -> RateLimiter[Request] | None:
    """A run's rate limiter: the description's own, or a new one from its factory."""
    if source is None or hasattr(source, "when"):
        return source  # type: ignore[return-value]
    return source()  # a factory: one limiter per run


@dataclass
class ControllerRuntime:
    """What a running controller borrows from its manager."""

    cache: SharedInformerFactory
    client: ReconcilerClient
    recorder: EventRecorder
    metrics: Metrics | None
    executor: ThreadPoolExecutor | None = None
    cache_sync_timeout: float = 120.0
    clock: Clock | None = None  # None: the real time (the event loop's clock)
    shards: ShardGate | None = None  # None: this replica reconciles every object
    #: The API server's readiness probe, which ends the wait of parked requests (None: the cache's).
    probe: ServerProbe | None = None
    #: The cluster's name in a fleet (requests and log lines carry it); "" for a Manager's one.
    cluster: str = ""
    #: Where finished reconciles are recorded for an observer (the dashboard); None: nowhere.
    journal: ReconcileJournal | None = None


class RunningController:
    """One run of a :class:`Controller`: :meth:`start` once, then :meth:`stop` (which is also
    safe before :meth:`start` and a second time)."""

    def __init__(self, description: Controller, runtime: ControllerRuntime) -> None:
        reconciler = description.reconciler
        if reconciler is None:
            raise ValueError(f"controller {description.name!r} has no reconciler: call .reconcile(fn)")
        self.description = description
        self.name = description.name
        self._runtime = runtime
        self._reconciler: Callable[..., Any] = reconciler
        self._is_async = inspect.iscoroutinefunction(reconciler)
        self._clock = runtime.clock or SYSTEM_CLOCK
        self._workers = description._workers
        self._kind = kind_name(description._for.what)
        queue_metrics: MetricsProvider | None = (
            runtime.metrics.queue_provider(runtime.cluster) if runtime.metrics else None
        )
        self._journal = runtime.journal
        if self._journal is not None:  # an observer (the dashboard): count the adds for it
            load = ControllerLoad(lambda: len(self._queue), self._busy, self._workers, self._kind)
            queue_metrics = self._journal.register(self.name, load, queue_metrics)
        self._queue: RateLimitingQueue[Request] = RateLimitingQueue(
            _rate_limiter(description._rate_limiter),
            name=self.name,
            metrics=queue_metrics,
            clock=runtime.clock,
        )
        self._series: ControllerSeries | None = (
            runtime.metrics.controller(self.name, runtime.cluster) if runtime.metrics else None
        )
        self._registrations: list[tuple[Informer, HandlerRegistration]] = []
        self._primary: Informer | None = None  # the primary kind's, once started
        self._disconnects: list[Callable[[], None]] = []
        self._sync_client: SyncClient | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._parked: set[Request] = set()
        self._unpark_task: asyncio.Task[None] | None = None
        self._unavailable = Backoff(UNAVAILABLE_BACKOFF)
        self._failing: dict[Request, _Streak] = {}
        self._started = False
        self._stopped = False

    def _busy(self) -> int:
        return self._queue.processing

    # -- starting ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Register the watches, wait for the caches, then start the workers (returns at once
        after that; :meth:`stop` ends it)."""
        if self._stopped:
            raise RuntimeError(f"controller {self.name!r} was stopped; a manager starts a new run")
        if self._started:
            raise RuntimeError(f"controller {self.name!r} was started already")
        self._started = True
        runtime = self._runtime
        description = self.description
        if self._series is not None:
            self._series.max_concurrent.set(self._workers)
        client = runtime.client
        primary = await client.resource(description._for.what)
        self._kind = primary.kind or self._kind
        owner = enqueue_for_owner(primary.group, primary.kind)
        try:
            await self._register(primary, owner)
            await self._wait_for_caches()
        finally:
            if self._stopped:  # stopped while it started: take back what was registered since
                self._unregister()
        if self._stopped:
            return
        if not self._is_async:
            self._sync_client = SyncClient(client, asyncio.get_running_loop())
        add = self._queue.add if runtime.shards is None else self._sharded_add(runtime.shards)
        from_any_thread = _from_any_thread(add)
        self._disconnects = [trigger.connect(from_any_thread) for trigger in description._triggers]
        if runtime.shards is not None:
            runtime.shards.attach(self.name, self._enqueue_owned, self._queue.__len__)
        self._tasks = [
            asyncio.create_task(self._worker(), name=f"{self.name}-worker-{i}") for i in range(self._workers)
        ]
        started: dict[str, object] = {"controller": self.name, "workers": self._workers}
        if runtime.cluster:
            started["cluster"] = runtime.cluster
        log.info("controller started", extra=started)

    async def _register(self, primary: ApiResource, owner: EventHandler) -> None:
        """Put this run's handlers on the informers of its watches (none once it is stopped)."""
        runtime = self._runtime
        description = self.description
        client = runtime.client
        for watch in (description._for, *description._watches):
            res = primary if watch is description._for else await client.resource(watch.what)
            if self._stopped:
                return
            selector = watch.label_selector
            if runtime.shards is not None:  # label mode: this shard only
                if watch is description._for:
                    selector = runtime.shards.label_selector(self.name, res, watch.namespace, selector)
                elif watch.handler is None:  # owns(): the children of this shard's objects
                    selector = runtime.shards.label_selector(
                        self.name, res, watch.namespace, selector, owner=primary
                    )
            informer = runtime.cache.informer(
                res,
                namespace=watch.namespace,
                label_selector=selector,
                metadata_only=watch.metadata_only,
            )
            if not watch.metadata_only:
                client.use_informer(res, informer)
            reg = informer.add_event_handler(
                self._event_handler(watch.handler or owner, (*watch.predicates, *description._filters))
            )
            self._registrations.append((informer, reg))
            if self._primary is None:
                self._primary = informer

    def _unregister(self) -> None:
        registrations, self._registrations = self._registrations, []
        for informer, reg in registrations:
            informer.remove_event_handler(reg)

    async def _wait_for_caches(self) -> None:
        """Wait on each informer's synced event (one timeout for all of them)."""
        timeout = self._runtime.cache_sync_timeout
        informers = {id(informer): informer for informer, _ in self._registrations}.values()
        try:
            async with asyncio.timeout(timeout):
                await asyncio.gather(*(informer.wait_for_sync() for informer in informers))
        except TimeoutError:
            late = ", ".join(sorted({str(i.name) for i in informers if not i.has_synced()}))
            raise TimeoutError(
                f"controller {self.name!r}: caches did not sync within {timeout:.0f} s ({late}; "
                "check RBAC for list/watch on the watched kinds)"
            ) from None

    def _event_handler(self, handler: EventHandler, predicates: Sequence[Predicate]) -> FuncHandler:
        add: Callable[[Request], None] = self._queue.add
        gate = self._runtime.shards
        if gate is not None:
            add = self._sharded_add(gate)
        mapper = handler.map
        map_old = handler.map_old_on_update

        def on_add(obj: Any, is_in_initial_list: bool = False) -> None:
            for p in predicates:
                if not p.create(obj):
                    return
            for req in mapper(obj):
                add(req)

        def on_update(old: Any, new: Any) -> None:
            for p in predicates:
                if not p.update(old, new):
                    return
            for req in mapper(new):
                add(req)
            if map_old:
                for req in mapper(old):
                    add(req)

        def on_delete(obj: Any) -> None:
            if isinstance(obj, DeletedFinalStateUnknown):
                obj = obj.obj
                if obj is None:
                    return
            for p in predicates:
                if not p.delete(obj):
                    return
            for req in mapper(obj):
                add(req)

        return FuncHandler(on_add=on_add, on_update=on_update, on_delete=on_delete)

    def _sharded_add(self, gate: ShardGate) -> Callable[[Request], None]:
        add, admits, name = self._queue.add, gate.admits, self.name

        def add_if_owned(req: Request) -> None:
            if admits(name, req):
                add(req)

        return add_if_owned

    def _enqueue_owned(self) -> list[Any]:
        """Enqueue every cached primary object this replica owns (keys moved here); them."""
        gate = self._runtime.shards
        assert gate is not None and self._primary is not None
        owned = []
        for obj in self._primary.store.list():
            req = request_for(obj)
            if gate.admits(self.name, req):
                owned.append(obj)
                self._queue.add(req)
        return owned

    def enqueue(self, request: Request) -> None:
        """Ask for a reconcile of ``request``."""
        self._queue.add(request)

    # -- working -------------------------------------------------------------------------------
    async def _worker(self) -> None:
        queue = self._queue
        gate = self._runtime.shards
        name = self.name
        while True:
            try:
                req = await queue.get()
            except QueueShutDown:
                return
            try:
                if gate is None:
                    await self._reconcile_one(req)
                elif await gate.begin(name, req):
                    try:
                        await self._reconcile_one(req)
                    finally:
                        gate.end(name, req)
                else:
                    queue.forget(req)  # another replica's now
            finally:
                queue.done(req)

    async def _reconcile_one(self, req: Request) -> None:
        runtime = self._runtime
        series = self._series
        queue = self._queue
        started = time.perf_counter()
        if series is not None:
            series.active.inc()
        ctx: Context | None = None
        # In a fleet the reconciler's request names the cluster; the queue keys do not need to.
        asked = Request(req.namespace, req.name, runtime.cluster) if runtime.cluster else req
        journal = self._journal
        wall = time.time() if journal is not None else 0.0
        outcome, after = "", 0.0  # for the journal: "" (cancelled) records nothing
        failure: BaseException | None = None
        retry_in: float | None = None
        try:
            # The reconcile is this task's (or worker thread's) running context only while the
            # reconciler runs: tasks it starts inherit it, and anything started later must not.
            if self._is_async:
                ctx = Context(asked, runtime.client, runtime.recorder, self.name, self._clock, self._kind)
                token = _running.set(ctx)
                try:
                    result = await self._reconciler(asked, ctx)
                finally:
                    _running.reset(token)
            else:
                ctx = Context(asked, self._sync_client, runtime.recorder, self.name, self._clock, self._kind)  # type: ignore[arg-type]
                scope = contextvars.copy_context()
                scope.run(_running.set, ctx)
                loop = asyncio.get_running_loop()
                call: Callable[..., Result | None] = scope.run
                result = await loop.run_in_executor(runtime.executor, call, self._reconciler, asked, ctx)
        except asyncio.CancelledError:
            raise
        except (TerminalError, ModelMismatch) as exc:
            outcome, failure = "terminal", exc
            queue.forget(req)
            if series is not None:
                series.terminal.inc()
                series.errors.inc()
                series.results["error"].inc()
            streak = self._failing.pop(req, None)
            log.error(
                "%s: reconcile of %s failed (terminal, not retried%s): %s",
                self.name,
                req,
                f", after {streak.attempts} failed attempts" if streak else "",
                exc,
                extra=_fields(ctx, error=_error_text(exc)),
            )
        except Exception as exc:
            outcome, failure = "error", exc
            if series is not None:
                series.errors.inc()
                series.results["error"].inc()
            if server_unavailable(exc):
                outcome = "parked"
                self._park(req, ctx, exc)
            else:
                delay = retry_in = queue.rate_limiter.when(req)
                queue.add_after(req, delay)
                self._log_failure(req, ctx, exc, delay)
        else:
            if result is None or (not result.requeue and not result.requeue_after):
                queue.forget(req)
                outcome = "success"
            elif result.requeue_after:
                queue.forget(req)
                queue.add_after(req, result.requeue_after)
                outcome, after = "requeue_after", result.requeue_after
            else:
                queue.add_rate_limited(req)
                outcome = "requeue"
            if series is not None:
                series.results[outcome].inc()
            if self._failing:
                streak = self._failing.pop(req, None)
                if streak is not None:
                    log.info(
                        "%s: reconcile of %s recovered after %d failed attempts (%.1f s)",
                        self.name,
                        req,
                        streak.attempts,
                        time.monotonic() - streak.since,
                        extra=_fields(ctx),
                    )
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "%s: reconciled %s in %.1f ms%s",
                    self.name,
                    req,
                    (time.perf_counter() - started) * 1000,
                    f", requeue after {result.requeue_after:g} s"
                    if outcome == "requeue_after"
                    else (", requeue" if outcome == "requeue" else ""),
                    extra=_fields(ctx),
                )
        finally:
            if series is not None:
                series.active.dec()
                series.time.observe(time.perf_counter() - started)
            if journal is not None and outcome:
                streak = self._failing.get(req) if outcome == "error" else None
                journal.records.append(
                    ReconcileRecord(
                        self.name,
                        self._kind,
                        req,
                        wall,
                        time.perf_counter() - started,
                        outcome,
                        failure,
                        after,
                        retry_in,
                        streak.attempts if streak is not None else int(failure is not None),
                        ctx.reconcile_id if ctx is not None else "",
                        ctx.writes if ctx is not None else 0,
                    )
                )

    def _log_failure(self, req: Request, ctx: Context | None, exc: Exception, delay: float) -> None:
        """The first failure of a streak at ERROR with its traceback; the retries that fail again
        in one short line, at INFO when the error changed or the next try is a second or more
        away (the exponential backoff keeps those few), at DEBUG otherwise."""
        error = _error_text(exc)
        streak = self._failing.get(req)
        if streak is None:
            self._failing[req] = _Streak(error)
            log.error(
                "%s: reconcile of %s failed, will retry: %s",
                self.name,
                req,
                error,
                exc_info=_exc_info(exc),
                extra=_fields(ctx, error=error),
            )
            return
        streak.attempts += 1
        level = logging.INFO if (error != streak.error or delay >= 1.0) else logging.DEBUG
        streak.error = error
        if log.isEnabledFor(level):
            log.log(
                level,
                "%s: reconcile of %s failed again (attempt %d, next in %s): %s",
                self.name,
                req,
                streak.attempts,
                _seconds(delay),
                error,
                extra=_fields(ctx, error=error),
            )

    def _park(self, req: Request, ctx: Context | None = None, exc: BaseException | None = None) -> None:
        """Hold a request that failed because the API server was unreachable or not serving.

        The failure is the server's, not the object's, so it goes through neither the per-item
        backoff nor the controller's token bucket: an outage fails every pending request again
        and again, and once charged to the rate limiter those failures pushed the retries of the
        whole queue seconds to minutes past the server's return (the bucket's debt), including
        any request that failed once more while the server was warming up. Parked requests are
        retried together, all at once as soon as the shared readiness probe sees the server go
        down and come back, otherwise after the controller's own backoff for an unavailable
        server (0.2 s doubling to 30 s, reset when the server is seen back).

        Logged once per outage (each request at DEBUG): the server's failure is not the object's.
        """
        self._parked.add(req)
        if self._unpark_task is None or self._unpark_task.done():
            if exc is not None:
                log.warning(
                    "%s: the API server is unavailable (%s); failed requests wait for it",
                    self.name,
                    _error_text(exc),
                    extra=_fields(ctx, error=_error_text(exc)),
                )
            self._unpark_task = asyncio.create_task(
                self._unpark(), name=f"{self.name}-unpark", context=contextvars.Context()
            )
        elif exc is not None and log.isEnabledFor(logging.DEBUG):
            log.debug(
                "%s: reconcile of %s waits for the API server: %s",
                self.name,
                req,
                _error_text(exc),
                extra=_fields(ctx, error=_error_text(exc)),
            )

    async def _unpark(self) -> None:
        runtime = self._runtime
        probe = runtime.probe if runtime.probe is not None else runtime.cache.probe
        backoff = self._unavailable
        while self._parked:
            back = await probe.wait(backoff.next_delay())
            if back:
                backoff.reset()  # requests that fail again while it warms up retry within 0.4 s
            parked, self._parked = self._parked, set()
            log.info(
                "%s: retrying %d requests now",
                "API server is back" if back else "API server unavailable",
                len(parked),
                extra={"controller": self.name},
            )
            queue = self._queue
            for req in parked:
                queue.add_after(req, 0.0)  # a retry (counted as one), handed out now

    # -- stopping ------------------------------------------------------------------------------
    async def stop(self, *, drain: bool = True, timeout: float = 30.0) -> None:
        """Stop taking work; with ``drain``, let in-flight reconciles finish (up to ``timeout``).

        Safe before :meth:`start` (nothing ran: the queue is shut) and a second time (no-op)."""
        if self._stopped:
            return
        self._stopped = True
        for disconnect in self._disconnects:
            disconnect()
        self._unregister()
        queue = self._queue
        try:
            if drain and self._tasks:
                try:
                    await asyncio.wait_for(queue.shut_down_with_drain(), timeout)
                except TimeoutError:
                    log.warning(
                        "controller %s: in-flight reconciles still running after %.0f s", self.name, timeout
                    )
        finally:  # also when this stop is cancelled while draining: no reconcile outlives it
            queue.shut_down()
            if self._unpark_task is not None:
                self._unpark_task.cancel()
            tasks = self._tasks
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
