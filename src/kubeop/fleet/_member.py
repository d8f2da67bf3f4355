"""One engaged cluster of a fleet (private): its Cluster, its caches and one run of each controller,
started again (with a backoff) while the cluster cannot be reached."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubeop.cache.backoff import Backoff, BackoffConfig
from kubeop.client import Client, ClientConfig
from kubeop.cluster import Cluster
from kubeop.controller import Controller, Metrics, WritePolicy
from kubeop.controller.running import ControllerRuntime, RunningController
from kubeop.queue import Clock

log = logging.getLogger("kubeop.fleet")

#: Starting again after a cluster could not be started: ~1 s, doubling, at most ~30 s.
_RETRY = BackoffConfig(initial=1.0, cap=30.0, jitter=0.2)


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
            starting: asyncio.Future[Any] = asyncio.ensure_future(
                asyncio.gather(*(r.start() for r in running))
            )
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
            await stop.wait()
        finally:
            self.ready.clear()
            for r in running:
                with contextlib.suppress(Exception):
                    await r.stop(drain=stop.is_set(), timeout=self._drain_timeout)
            await cluster.close()
            self.cluster = None
