"""One engaged cluster of a fleet (private): its Cluster, its caches and one run of each controller,
started again (with a backoff) while the cluster cannot be reached."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, NoReturn, Protocol, runtime_checkable

from kubeop.cache.backoff import Backoff, BackoffConfig
from kubeop.cache.indexer import Indexer
from kubeop.client import Client, ClientConfig
from kubeop.cluster import Cluster
from kubeop.controller import Controller, Metrics, WritePolicy
from kubeop.controller.running import ControllerRuntime, RunningController
from kubeop.queue import Clock

if TYPE_CHECKING:
    from kubeop.manager import Runnable

log = logging.getLogger("kubeop.fleet")

#: Starting again after a cluster could not be started: ~1 s, doubling, at most ~30 s.
_RETRY = BackoffConfig(initial=1.0, cap=30.0, jitter=0.2)
#: How long a cancelled runnable beside the controllers is waited for.
_CANCEL_BOUND = 5.0


@runtime_checkable
class PerCluster(Protocol):
    """What a fleet runs once per engaged cluster beside the controllers: ``for_cluster(name)``
    gives the Runnable for cluster ``name`` (a fresh one per engagement). It runs on that cluster's
    Cluster from before the controllers start (its ``started()``, if it has one, awaited first)
    until after they stopped, when the cluster is disengaged or the fleet stops."""

    def for_cluster(self, name: str) -> Runnable: ...


class Member:
    """Cluster ``name`` of a fleet while it is engaged: :meth:`run` until ``stop`` is set."""

    def __init__(
        self,
        name: str,
        config: ClientConfig,
        connect: Callable[[], Client],
        controllers: list[Controller],
        *,
        operator: str,
        field_manager: str,
        executor: ThreadPoolExecutor,
        cache_sync_timeout: float,
        graceful_shutdown_timeout: float,
        clock: Clock | None,
        guard: Callable[[], None] | None = None,
        metrics: Metrics | None = None,
        per_cluster: list[PerCluster] | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self._connect = connect
        self._controllers = controllers
        self._operator = operator
        self._field_manager = field_manager
        self._executor = executor
        self._sync_timeout = cache_sync_timeout
        self._drain_timeout = graceful_shutdown_timeout
        self._clock = clock
        self._guard = guard
        self._metrics = metrics
        self._per_cluster = per_cluster or []
        self.cluster: Cluster | None = None
        self.ready = asyncio.Event()  # every controller started (caches synced)

    async def run(self, stop: asyncio.Event) -> None:
        """Run the controllers against this cluster until ``stop``; when they cannot start (the
        server is down, the credentials refused), try again with a backoff."""
        backoff = Backoff(_RETRY)
        while not stop.is_set():
            try:
                await self._run_once(stop)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = backoff.next_delay()
                log.warning(
                    "cluster could not be started, retrying in %.0f s: %s",
                    delay,
                    exc,
                    extra={"cluster": self.name},
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)

    async def _run_once(self, stop: asyncio.Event) -> None:
        api = self._connect()
        cluster = self.cluster = Cluster(
            api,
            name=self._operator,
            field_manager=self._field_manager,
            owns_client=True,
            policy=WritePolicy(guard=self._guard),
        )
        running: list[RunningController] = []
        beside_stop = asyncio.Event()
        beside: list[asyncio.Task[None]] = []
        try:
            runtime = ControllerRuntime(
                cluster.cache,
                cluster.client,
                cluster.recorder,
                self._metrics,
                self._executor,
                cache_sync_timeout=self._sync_timeout,
                clock=self._clock,
                probe=cluster.probe,
                cluster=self.name,
            )
            running = [RunningController(c, runtime) for c in self._controllers]
            cluster.cache.start()
            runnables = [item.for_cluster(self.name) for item in self._per_cluster]
            beside = [
                asyncio.create_task(r.run(cluster, beside_stop), name=f"fleet-{self.name}-{_name_of(r)}")
                for r in runnables
            ]

            async def start() -> None:
                # The runnables beside the controllers first (an index the handlers read), as a
                # Manager starts its caches' phase before its controllers'.
                await asyncio.gather(*(_started(r, t) for r, t in zip(runnables, beside, strict=True)))
                await asyncio.gather(*(r.start() for r in running))

            starting: asyncio.Future[Any] = asyncio.ensure_future(start())
            stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
            waiting: list[asyncio.Future[Any]] = [starting, stopping]
            try:
                await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopping.cancel()
            if not starting.done():
                starting.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await starting
                return
            starting.result()  # raises why it could not start
            self.ready.set()
            log.info("cluster engaged", extra={"cluster": self.name, "controllers": len(running)})
            await _until_stop_or_failure(beside, stop)
        finally:
            # Each step in its own finally: a cancel landing in one (the fleet's bound passed)
            # still stops what runs beside and closes the cluster's connections and informers.
            self.ready.clear()
            try:
                # Together, not one after another: the whole stop is one graceful timeout.
                await asyncio.gather(
                    *(r.stop(drain=stop.is_set(), timeout=self._drain_timeout) for r in running),
                    return_exceptions=True,
                )
            finally:
                try:
                    await self._stop_beside(beside, beside_stop)
                finally:
                    self.cluster = None
                    try:
                        await cluster.close()
                    finally:
                        _release_caches(cluster, self.name)

    async def _stop_beside(self, tasks: list[asyncio.Task[None]], stop: asyncio.Event) -> None:
        """Stop the runnables beside the controllers: ``stop`` set, then cancelled once the
        graceful shutdown timeout passed; a failure is logged."""
        if not tasks:
            return
        stop.set()
        try:
            done, late = await asyncio.wait(tasks, timeout=self._drain_timeout)
        except asyncio.CancelledError:
            # This stop was cancelled (the fleet's bound passed): none of them may outlive it.
            await _cancelled(tasks)
            raise
        for task in late:
            log.error(
                "%s did not stop within %.0f s: cancelled",
                task.get_name(),
                self._drain_timeout,
                extra={"cluster": self.name},
            )
        await _cancelled(late)
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                log.error("%s failed: %s", task.get_name(), task.exception(), extra={"cluster": self.name})


async def _cancelled(tasks: list[asyncio.Task[None]] | set[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` and wait (up to :data:`_CANCEL_BOUND`) until they ended; one that ignores
    its cancel is logged and left."""
    if not tasks:
        return
    for task in tasks:
        task.cancel()
    _, stuck = await asyncio.wait(tasks, timeout=_CANCEL_BOUND)
    for task in stuck:
        log.error("%s ignored its cancel: left running", task.get_name())


def _release_caches(cluster: Cluster, name: str) -> None:
    """Empty the stopped informers' stores of a cluster that is done with: its cached objects are
    freed now by reference counting (a cost proportional to them), even though an informer sits
    in reference cycles (its reflector's callbacks) and the objects loaded by its list were frozen
    (:mod:`kubeop.cache.gcpause`), which would keep them until a full collection. A read still
    made of them (a reconcile left running in its thread) is an error, not an empty answer."""
    for informer in cluster.cache.informers:
        informer.store.replace([])
        informer.store = _Released(name)


class _Released(Indexer):
    """The store of a disengaged cluster's informer: empty, and every read an error naming the
    cluster (an empty answer would say that objects which exist are gone)."""

    __slots__ = ("_cluster",)

    def __init__(self, cluster: str) -> None:
        super().__init__()
        self._cluster = cluster

    def _refuse(self, *_: Any) -> NoReturn:
        raise RuntimeError(
            f"cluster {self._cluster!r} was disengaged: its cache is released and answers no read "
            "(a reconcile still running there ends; it runs again if the cluster is engaged again)"
        )

    get = get_by_key = list = list_keys = by_index = index_keys = index = _refuse  # type: ignore[assignment]
    __contains__ = __iter__ = _refuse


def _name_of(runnable: Runnable) -> str:
    return str(getattr(runnable, "name", type(runnable).__name__))


async def _started(runnable: Runnable, task: asyncio.Task[None]) -> None:
    """Until ``runnable`` started (its ``started()``, else at once); its failure is raised."""
    started = getattr(runnable, "started", None)
    if started is None:
        return
    waiting = asyncio.ensure_future(started())
    try:
        await asyncio.wait({waiting, task}, return_when=asyncio.FIRST_COMPLETED)
        if not waiting.done():  # the run ended first
            task.result()  # raises why it failed
            raise RuntimeError(f"{_name_of(runnable)} returned before it started")
        waiting.result()
    finally:
        if not waiting.done():
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await waiting


async def _until_stop_or_failure(tasks: list[asyncio.Task[None]], stop: asyncio.Event) -> None:
    """Until ``stop`` is set; a runnable beside the controllers that fails meanwhile is raised
    (the cluster is started again, as when it could not start)."""
    stopping = asyncio.ensure_future(stop.wait())
    pending: set[asyncio.Future[Any]] = {stopping, *tasks}
    try:
        while not stop.is_set():
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in tasks:
                if task in done and not task.cancelled() and task.exception() is not None:
                    raise RuntimeError(f"{task.get_name()} failed: {task.exception()}") from task.exception()
    finally:
        stopping.cancel()
