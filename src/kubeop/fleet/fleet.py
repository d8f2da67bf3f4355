"""Fleet: one operator process reconciling across several clusters (see :mod:`kubeop.fleet`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from kubeop.client import Client, ClientConfig
from kubeop.cluster import Cluster
from kubeop.controller import Controller
from kubeop.fleet._member import Member
from kubeop.fleet._names import check_cluster_name
from kubeop.fleet.provider import ClusterProvider
from kubeop.manager.logs import configure_logging
from kubeop.manager.options import Runtime
from kubeop.queue import Clock

__all__ = ["Fleet"]

log = logging.getLogger("kubeop.fleet")


class _Engaged:
    __slots__ = ("member", "stop", "task")

    def __init__(self, member: Member, stop: asyncio.Event, task: asyncio.Task[None]) -> None:
        self.member = member
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
        clock: the time the controllers' queues and reconcilers see (tests).
    """

    def __init__(
        self,
        *providers: ClusterProvider,
        name: str = "kubeop-operator",
        runtime: Runtime | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.name = name
        self.runtime = runtime or Runtime()
        self.clock = clock
        self.providers: list[ClusterProvider] = []
        self.controllers: list[Controller] = []
        for provider in providers:
            self.add(provider)
        self._engaged: dict[str, _Engaged] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._stop: asyncio.Event | None = None
        self._lock = asyncio.Lock()

    def add(self, item: Controller | ClusterProvider) -> None:
        """Add a controller (run on every engaged cluster) or a cluster provider (before start)."""
        if isinstance(item, Controller):
            if item.reconciler is None:
                raise ValueError(f"controller {item.name!r} has no reconciler: call .reconcile(fn)")
            if any(c.name == item.name for c in self.controllers):
                raise ValueError(f"a controller named {item.name!r} is already added; use .named(...)")
            self.controllers.append(item)
        elif isinstance(item, ClusterProvider):
            self.providers.append(item)
        else:
            raise TypeError(
                f"Fleet.add takes a Controller or a cluster provider, got {type(item).__name__}: e.g. "
                "Controller.for_(Kind)...reconcile(fn), or Kubeconfigs({...})"
            )

    # -- the clusters ------------------------------------------------------------------------------
    @property
    def clusters(self) -> Mapping[str, Cluster]:
        """The engaged clusters that are running now, by name."""
        return {
            name: e.member.cluster
            for name, e in self._engaged.items()
            if e.member.cluster is not None and e.member.ready.is_set()
        }

    def cluster(self, name: str) -> Cluster:
        """Engaged cluster ``name`` (a reconciler writing to another cluster: hub -> member).

        Raises LookupError naming the engaged clusters when ``name`` is not engaged or not running.
        """
        engaged = self._engaged.get(name)
        if engaged is None or engaged.member.cluster is None or not engaged.member.ready.is_set():
            running = ", ".join(sorted(self.clusters)) or "none"
            raise LookupError(f"cluster {name!r} is not engaged (engaged and running: {running})")
        return engaged.member.cluster

    async def wait_engaged(self, name: str, timeout: float) -> Cluster:
        """Wait (up to ``timeout`` s) until cluster ``name`` is engaged and its controllers run."""
        async with asyncio.timeout(timeout):
            while True:
                engaged = self._engaged.get(name)
                if engaged is not None:
                    await engaged.member.ready.wait()
                    return self.cluster(name)
                await asyncio.sleep(0.05)

    async def engage(
        self, name: str, config: ClientConfig, *, connect: Callable[[], Client] | None = None
    ) -> None:
        """Run the controllers against cluster ``name``; with a changed config, stop its current
        run first (rotated credentials); with the same config, nothing. ``connect`` makes the
        cluster's client at each (re)start (default: ``Client(config)``)."""
        check_cluster_name(name, where="Fleet.engage")
        if self._stop is None or self._executor is None:
            raise RuntimeError("Fleet.engage: the fleet is not running (providers call it from run())")
        async with self._lock:
            current = self._engaged.get(name)
            if current is not None:
                if current.member.config == config:
                    return
                log.info("cluster's credentials changed: engaging again", extra={"cluster": name})
                await self._stop_member(name)
            if self._stop.is_set():
                return
            runtime = self.runtime
            member = Member(
                name,
                config,
                connect or (lambda: Client(config)),
                self.controllers,
                operator=self.name,
                field_manager=runtime.field_manager or self.name,
                executor=self._executor,
                cache_sync_timeout=runtime.cache_sync_timeout,
                graceful_shutdown_timeout=runtime.graceful_shutdown_timeout,
                clock=self.clock,
            )
            stop = asyncio.Event()
            task = asyncio.create_task(member.run(stop), name=f"fleet-cluster-{name}")
            self._engaged[name] = _Engaged(member, stop, task)
            log.info("engaging cluster", extra={"cluster": name, "server": config.server})

    async def disengage(self, name: str) -> None:
        """Stop cluster ``name``'s controllers, caches and connections (nothing if not engaged)."""
        async with self._lock:
            if await self._stop_member(name):
                log.info("cluster disengaged", extra={"cluster": name})

    async def _stop_member(self, name: str) -> bool:
        engaged = self._engaged.pop(name, None)
        if engaged is None:
            return False
        engaged.stop.set()
        timeout = self.runtime.graceful_shutdown_timeout + 10
        try:
            await asyncio.wait_for(asyncio.shield(engaged.task), timeout)
        except TimeoutError:
            log.error("cluster did not stop within %.0f s: cancelled", timeout, extra={"cluster": name})
            engaged.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await engaged.task
        except Exception as exc:
            log.error("cluster's run failed: %s", exc, extra={"cluster": name})
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
        the others go on; the fleet keeps the clusters it engaged."""
        if not self.providers:
            raise ValueError(
                "Fleet: no cluster provider: pass e.g. Kubeconfigs({...}) or KubeconfigSecrets(...)"
            )
        if not self.controllers:
            raise ValueError("Fleet: no controller added: fleet.add(Controller.for_(Kind)...reconcile(fn))")
        self._stop = stop = stop or asyncio.Event()
        self._executor = ThreadPoolExecutor(
            self.runtime.sync_workers, thread_name_prefix=f"{self.name}-reconcile"
        )
        providers = [
            asyncio.create_task(self._run_provider(p, stop), name=f"fleet-provider-{p.name}")
            for p in self.providers
        ]
        try:
            await stop.wait()
        finally:
            stop.set()
            for task in providers:
                task.cancel()
            await asyncio.gather(*providers, return_exceptions=True)
            async with self._lock:
                await asyncio.gather(*(self._stop_member(n) for n in list(self._engaged)))
            self._executor.shutdown(wait=False, cancel_futures=True)
            self._executor = None

    async def _run_provider(self, provider: ClusterProvider, stop: asyncio.Event) -> None:
        try:
            await provider.run(self, stop)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("cluster provider %s failed", provider.name, extra={"provider": provider.name})
