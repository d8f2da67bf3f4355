"""Fleet: one operator process reconciling across several clusters (see :mod:`kubeop.fleet`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kubeop.client import Client, ClientConfig
from kubeop.cluster import Cluster
from kubeop.controller import Controller, Metrics
from kubeop.fleet._member import Member, PerCluster
from kubeop.fleet._names import check_cluster_name
from kubeop.fleet.provider import ClusterProvider
from kubeop.fleet.sharding import ClusterSharding, ClusterShards
from kubeop.manager.logs import configure_logging
from kubeop.manager.options import Runtime
from kubeop.manager.server import ProbeServer, is_loopback, parse_address
from kubeop.queue import Clock

__all__ = ["Fleet"]

log = logging.getLogger("kubeop.fleet")

#: Beyond its graceful timeouts, how long a disengaged member may take before it is cancelled.
_STOP_MARGIN = 10.0


@dataclass(frozen=True)
class _Target:
    """A cluster a provider engaged: how to reach it."""

    config: ClientConfig
    connect: Callable[[], Client]


class _Running:
    __slots__ = ("member", "stop", "target", "task")

    def __init__(
        self, member: Member, target: _Target, stop: asyncio.Event, task: asyncio.Task[None]
    ) -> None:
        self.member = member
        self.target = target
        self.stop = stop
        self.task = task


class Fleet:
    """Runs every controller added against every cluster its providers engage.

    Each engaged cluster gets its own :class:`~kubeop.cluster.Cluster` (client, caches, event
    recorder, server probe) and its own run of each controller, so one cluster's size, backoff
    or outage never delays another's reconciles: a cluster that cannot be reached is retried
    with a backoff and its keys resume when it returns, while the others go on.

    Args:
        providers: what engages clusters (:class:`~kubeop.fleet.Kubeconfigs`,
            :class:`~kubeop.fleet.KubeconfigSecrets`, or your own :class:`ClusterProvider`).
        name: the operator's name: the events' component and the default field manager.
        runtime: shutdown and sync timeouts, field manager, sync workers (as the Manager's).
        sharding: a :class:`~kubeop.fleet.ClusterSharding`: replicas split the clusters, each
            cluster run by one replica at a time (None: this process runs every cluster).
        clock: the time the controllers' queues and reconcilers see (tests).
        metrics_address: serve ``/metrics``, ``/healthz`` and ``/readyz`` there (``host:port``
            on loopback, e.g. ``127.0.0.1:8080``; port 0 picks one; None: not served). The
            controller and work-queue series carry a ``cluster`` label (:attr:`metrics`).

    Attributes:
        metrics: the fleet's series (``Metrics(per_cluster=True)``): one per controller and
            cluster, recorded when ``metrics_address`` is given; a disengaged cluster's series
            are dropped with it.
    """

    def __init__(
        self,
        *providers: ClusterProvider,
        name: str = "kubeop-operator",
        runtime: Runtime | None = None,
        sharding: ClusterSharding | None = None,
        clock: Clock | None = None,
        metrics_address: str | None = None,
    ) -> None:
        self.name = name
        self.metrics = Metrics(per_cluster=True)
        self.server: ProbeServer | None = None
        if metrics_address is not None:
            host, _ = parse_address(metrics_address)
            if not is_loopback(host):
                raise ValueError(
                    f"Fleet(metrics_address={metrics_address!r}): a fleet serves its metrics on loopback "
                    "only (e.g. 127.0.0.1:8080); put an authenticating proxy in front to scrape it "
                    "from elsewhere"
                )
            self.server = ProbeServer(metrics_address, registry=self.metrics.registry)
            self.server.ready["clusters"] = self._clusters_ready
        self.runtime = runtime or Runtime()
        self.sharding = sharding
        self.clock = clock
        self.providers: list[ClusterProvider] = []
        self.controllers: list[Controller] = []
        self.per_cluster: list[PerCluster] = []
        for provider in providers:
            self.add(provider)
        self._known: dict[str, _Target] = {}
        self._running: dict[str, _Running] = {}
        self._shards: ClusterShards | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._stop: asyncio.Event | None = None
        self._lock = asyncio.Lock()
        self._kick = asyncio.Event()

    def add(self, item: Controller | ClusterProvider | PerCluster) -> None:
        """Add a controller (run on every engaged cluster), a cluster provider, or something
        with ``for_cluster(name)`` giving a Runnable to run on each engaged cluster beside the
        controllers (started before them, stopped after them; before start)."""
        if isinstance(item, Controller):
            if item.reconciler is None:
                raise ValueError(f"controller {item.name!r} has no reconciler: call .reconcile(fn)")
            if any(c.name == item.name for c in self.controllers):
                raise ValueError(f"a controller named {item.name!r} is already added; use .named(...)")
            self.controllers.append(item)
        elif isinstance(item, PerCluster):  # first: it may have a provider's run and name too
            self.per_cluster.append(item)
        elif isinstance(item, ClusterProvider):
            self.providers.append(item)
        else:
            raise TypeError(
                f"Fleet.add takes a Controller or a cluster provider, got {type(item).__name__}: e.g. "
                "Controller.for_(Kind)...reconcile(fn), or Kubeconfigs({...})"
            )

    # -- the clusters ------------------------------------------------------------------------------
    @property
    def identity(self) -> str | None:
        """This replica's member name in the ring (with sharding, once started)."""
        return self._shards.identity if self._shards is not None else None

    @property
    def engaged(self) -> frozenset[str]:
        """The clusters the providers engaged (with sharding, also those other replicas run)."""
        return frozenset(self._known)

    @property
    def clusters(self) -> Mapping[str, Cluster]:
        """The clusters running here now (controllers started), by name."""
        return {
            name: r.member.cluster
            for name, r in self._running.items()
            if r.member.cluster is not None and r.member.ready.is_set()
        }

    def cluster(self, name: str) -> Cluster:
        """Cluster ``name``, running here (a reconciler writing to another cluster: hub -> member).

        Raises LookupError naming the running clusters when ``name`` is not one of them.
        """
        running = self._running.get(name)
        if running is None or running.member.cluster is None or not running.member.ready.is_set():
            names = ", ".join(sorted(self.clusters)) or "none"
            raise LookupError(f"cluster {name!r} is not engaged (engaged and running: {names})")
        return running.member.cluster

    async def wait_engaged(self, name: str, timeout: float) -> Cluster:
        """Wait (up to ``timeout`` s) until cluster ``name`` runs here, controllers started."""
        async with asyncio.timeout(timeout):
            while True:
                running = self._running.get(name)
                if running is not None:
                    await running.member.ready.wait()
                    if self._running.get(name) is running:
                        return self.cluster(name)
                await asyncio.sleep(0.05)

    async def engage(
        self, name: str, config: ClientConfig, *, connect: Callable[[], Client] | None = None
    ) -> None:
        """Run the controllers against cluster ``name`` (with sharding: if this replica owns
        it); with a changed config, stop its current run first (rotated credentials); with the
        same config, nothing. ``connect`` makes the cluster's client at each (re)start (default:
        ``Client(config)``)."""
        check_cluster_name(name, where="Fleet.engage")
        if self._stop is None:
            raise RuntimeError("Fleet.engage: the fleet is not running (providers call it from run())")
        target = _Target(config, connect or (lambda: Client(config)))
        async with self._lock:
            known = self._known.get(name)
            if known is not None and known.config == config:
                return
            if known is not None:
                log.info("cluster's credentials changed: engaging again", extra={"cluster": name})
            self._known[name] = target
            await self._apply()

    async def disengage(self, name: str) -> None:
        """Stop cluster ``name``'s controllers, caches and connections (nothing if not engaged)."""
        async with self._lock:
            if self._known.pop(name, None) is not None:
                await self._apply()
                log.info("cluster disengaged", extra={"cluster": name})

    async def _apply(self) -> None:
        """Make what runs here match what is engaged (and, with sharding, owned and settled)."""
        shards = self._shards
        leaving = [
            name
            for name, running in self._running.items()
            if self._known.get(name) != running.target or (shards is not None and not shards.owns(name))
        ]
        # Their members emptied their caches on the way out (freed by reference counting): no full
        # collection here, whose pause grows with every other cluster's cache. What is left in
        # frozen reference cycles (each cluster's client and informers, not its objects) is
        # collected when the next list thaws the frozen objects (kubeop.cache.gcpause).
        await asyncio.gather(*(self._stop_member(name, drain=True) for name in leaving))
        stop = self._stop
        if stop is None or stop.is_set():
            return
        for name, target in self._known.items():
            if name in self._running or (shards is not None and not shards.try_begin(name)):
                continue
            self._start_member(name, target)

    def _start_member(self, name: str, target: _Target) -> None:
        assert self._executor is not None
        runtime = self.runtime
        member = Member(
            name,
            target.config,
            target.connect,
            self.controllers,
            operator=self.name,
            field_manager=runtime.field_manager or self.name,
            executor=self._executor,
            cache_sync_timeout=runtime.cache_sync_timeout,
            graceful_shutdown_timeout=runtime.graceful_shutdown_timeout,
            clock=self.clock,
            guard=self._shards.fence if self._shards is not None else None,
            # Recorded when served, as a Manager's: unscraped bookkeeping costs every reconcile.
            metrics=self.metrics if self.server is not None else None,
            per_cluster=self.per_cluster,
        )
        stop = asyncio.Event()
        task = asyncio.create_task(member.run(stop), name=f"fleet-cluster-{name}")
        self._running[name] = _Running(member, target, stop, task)
        log.info("engaging cluster", extra={"cluster": name, "server": target.config.server})

    async def _stop_member(self, name: str, *, drain: bool) -> None:
        running = self._running.pop(name, None)
        if running is None:
            return
        running.stop.set()
        if not drain:
            running.task.cancel()
        # A member drains its controllers (together, one graceful timeout), then what runs beside
        # them (another), then closes its cluster.
        timeout = 2 * self.runtime.graceful_shutdown_timeout + _STOP_MARGIN
        try:
            await asyncio.wait_for(asyncio.shield(running.task), timeout)
        except asyncio.CancelledError:
            if not running.task.cancelled():
                raise
        except TimeoutError:
            log.error("cluster did not stop within %.0f s: cancelled", timeout, extra={"cluster": name})
            running.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await running.task
        except Exception as exc:
            log.error("cluster's run failed: %s", exc, extra={"cluster": name})
        finally:
            self.metrics.forget_cluster(name)
            if self._shards is not None:
                self._shards.end(name)

    def _clusters_ready(self) -> bool:
        """Ready: every cluster engaged here runs its controllers (caches synced)."""
        waiting = sorted(name for name, r in self._running.items() if not r.member.ready.is_set())
        if waiting:
            raise RuntimeError(f"clusters not started yet: {', '.join(waiting[:10])}")
        return True

    # -- running -----------------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask a running fleet to shut down gracefully."""
        if self._stop is not None:
            self._stop.set()

    def run(self) -> None:
        """Run until SIGTERM or SIGINT (the entry point of an operator process)."""
        if not logging.getLogger().handlers:
            configure_logging()

        async def main() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            await self.start(stop)

        asyncio.run(main())

    async def start(self, stop: asyncio.Event | None = None) -> None:
        """Run the providers (which engage clusters) until ``stop`` is set, then disengage every
        cluster (draining in-flight reconciles) and return. A provider that fails is logged and
        the others go on. With sharding, raises
        :class:`~kubeop.manager.membership.ShardLeaseLost` after stopping every cluster when this
        replica's membership Lease lapsed (the process should exit; a restart rejoins)."""
        if not self.providers:
            raise ValueError(
                "Fleet: no cluster provider: pass e.g. Kubeconfigs({...}) or KubeconfigSecrets(...)"
            )
        if not self.controllers and not self.per_cluster:
            raise ValueError("Fleet: no controller added: fleet.add(Controller.for_(Kind)...reconcile(fn))")
        self._stop = stop = stop or asyncio.Event()
        if self.server is not None:
            await self.server.start()
        self._executor = ThreadPoolExecutor(
            self.runtime.sync_workers, thread_name_prefix=f"{self.name}-reconcile"
        )
        tasks: list[asyncio.Task[None]] = []
        membership: asyncio.Task[None] | None = None
        lost: BaseException | None = None
        if self.sharding is not None:
            self._shards = ClusterShards(self.sharding, self.name, self._kick.set)
            membership = asyncio.create_task(self._shards.run(), name="fleet-membership")
            tasks.append(asyncio.create_task(self._follow_ring(stop), name="fleet-ring"))
        tasks += [
            asyncio.create_task(self._run_provider(p, stop), name=f"fleet-provider-{p.name}")
            for p in self.providers
        ]
        stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        try:
            waiting: set[asyncio.Future[Any]] = {stopping}
            if membership is not None:
                waiting.add(membership)
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if membership is not None and membership.done() and not membership.cancelled():
                lost = membership.exception()
        finally:
            stop.set()
            stopping.cancel()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            async with self._lock:
                self._known.clear()
                names = list(self._running)
                await asyncio.gather(*(self._stop_member(n, drain=lost is None) for n in names))
            if membership is not None:
                membership.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await membership
            if self._shards is not None:
                await self._shards.close(leave=lost is None)
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None
            if self.server is not None:
                await self.server.stop()
        if lost is not None:
            raise lost

    async def _follow_ring(self, stop: asyncio.Event) -> None:
        """With sharding: start and stop clusters as the ring moves (and settles)."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
                    await self._kick.wait()
            self._kick.clear()
            async with self._lock:
                await self._apply()

    async def _run_provider(self, provider: ClusterProvider, stop: asyncio.Event) -> None:
        try:
            await provider.run(self, stop)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("cluster provider %s failed", provider.name, extra={"provider": provider.name})
