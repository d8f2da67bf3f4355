"""Manager: runs controllers and other runnables on one cluster, with leader election or
sharding, probes, metrics, webhooks and a graceful shutdown.

    manager = Manager(leader_election=True, name="application-operator")
    manager.add(Controller.for_(Application).owns(Deployment).reconcile(reconcile))
    manager.add(runnable(report))   # anything else to run: kubeop.manager.runnable
    manager.run()            # until SIGTERM / SIGINT; or: await manager.start(stop_event)

Each start builds a :class:`~kubeop.cluster.Cluster` (one informer per watched kind for the
whole process, one connection pool, one event recorder) and runs every part as a
:class:`~kubeop.manager.Runnable`, phase by phase (:mod:`kubeop.manager.runnable`).
Metrics off loopback (or with ``Serving(metrics_secure=True)``) are served over HTTPS, only to
callers the API server authenticates and RBAC lets ``get /metrics``
(:mod:`kubeop.manager.delegated_auth`). On SIGTERM the manager stops taking new work, lets
in-flight reconciles finish (up to ``Runtime(graceful_shutdown_timeout=...)``), releases the
lease, stops the caches and servers, flushes events and closes everything.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from kubeop.client import Client, load_config
from kubeop.cluster import Cluster
from kubeop.controller import Controller, EventRecorder, Metrics, ReconcilerClient, WritePolicy
from kubeop.controller.journal import counting_writes
from kubeop.controller.running import ControllerRuntime
from kubeop.manager._group import RunnableGroup
from kubeop.manager._runnables import (
    CacheRunnable,
    ControllerRunnable,
    DashboardRunnable,
    ElectionRunnable,
    ProbeRunnable,
    ShardRunnable,
    WebhookRunnable,
    dashboard_runnable,
)
from kubeop.manager.leader import LeaderElector, LeadershipLost
from kubeop.manager.logs import configure_logging
from kubeop.manager.options import (
    Dashboard,
    DeprecatedKeywords,
    LeaderElection,
    Runtime,
    Serving,
    Sharding,
    _dashboard_from_env,
    _resolve,
)
from kubeop.manager.runnable import Phase, Runnable
from kubeop.manager.server import Check, ProbeServer, is_loopback, parse_address
from kubeop.queue import Clock

if TYPE_CHECKING:
    from kubeop.cache import SharedInformerFactory
    from kubeop.core.resource import ApiResource
    from kubeop.dashboard import DashboardServer
    from kubeop.manager.delegated_auth import DelegatedAuth
    from kubeop.manager.serving_tls import SelfSigned
    from kubeop.manager.sharding import Sharder

    # Imported when webhooks are used: kubeop.webhook brings pydantic and cryptography (~23 MB of
    # RSS) that an operator without webhooks never needs.
    from kubeop.webhook import AdmissionWebhook, Conversion, Webhooks
    from kubeop.webhook.rotator import CertRotator
    from kubeop.webhook.server import WebhookServer

__all__ = ["Manager"]

_STOP_MARGIN = 5.0
"""Seconds beyond graceful_shutdown_timeout a runnable has to return after its stop (the
controllers drain within the timeout, then close)."""

log = logging.getLogger("kubeop.manager")

_Added = TypeVar("_Added", bound="Controller | Runnable")


class Manager:
    """Runs controllers and other runnables on one cluster; see the module docstring.

    Args:
        client: the API client (default: one from the kubeconfig or the in-cluster service
            account, made at each start and closed after it).
        name: the operator's name: the events' component, the default field manager and lease.
        leader_election: ``True`` or a :class:`LeaderElection`: one replica runs the controllers.
        sharding: a :class:`Sharding`: every replica runs the controllers, on its share of objects.
        webhooks: admission webhooks and conversions to serve (also :meth:`add_webhook`).
        serving: a :class:`Serving`: the metrics, health probe and webhook addresses and TLS,
            and the webhook server's caps (:class:`WebhookLimits`).
        runtime: a :class:`Runtime`: shutdown and sync timeouts, resync, field manager, workers.
        dashboard: a :class:`Dashboard` (or True): serve the live web dashboard. None: as the
            ``KUBEOP_DASHBOARD`` environment variable says (``kubeop run --dashboard``), else off.
        clock: the time every controller's queue and reconciler (``ctx.now()``) sees; tests pass
            a :class:`kubeop.queue.SteppedClock` to step a schedule. None: the real one.

    The keywords of before (``metrics_address=``, ``lease_duration=``, ``graceful_shutdown_timeout=``
    ...) still work, each with a DeprecationWarning naming its place in the options objects.
    """

    def __init__(
        self,
        client: Client | None = None,
        *,
        name: str = "kubeop-operator",
        leader_election: bool | LeaderElection = False,
        sharding: Sharding | None = None,
        webhooks: Webhooks | None = None,
        serving: Serving | None = None,
        runtime: Runtime | None = None,
        clock: Clock | None = None,
        dashboard: Dashboard | bool | None = None,
        **deprecated: Unpack[DeprecatedKeywords],
    ) -> None:
        options = _resolve(leader_election, sharding, serving, runtime, deprecated)
        if options.sharding is not None and options.leader_election is not None:
            raise ValueError(
                "Manager(sharding=..., leader_election=True): choose one; with sharding every "
                "replica works, and controllers that must run once go in Sharding(unsharded=[...])"
            )
        self.name = name
        self.election = options.leader_election
        # Split the objects between replicas (kubeop.manager.sharding); its lease timings apply.
        self.sharding = options.sharding
        self.serving = options.serving
        self.runtime = options.runtime
        self.clock = clock
        if dashboard is None:  # kubeop run --dashboard (any operator: kopf's, Helm's too)
            dashboard = _dashboard_from_env(os.environ.get("KUBEOP_DASHBOARD"))
        self.dashboard: Dashboard | None = Dashboard() if dashboard is True else dashboard or None
        self._dashboard: DashboardRunnable | None = None
        self.webhooks: Webhooks | None = webhooks
        self._client = client
        self._owns_client = client is None
        self.controllers: list[Controller] = []
        self.runnables: list[Runnable] = []
        # HTTPS, and only for callers the API server authenticates and RBAC allows (see
        # kubeop.manager.delegated_auth); None: so unless the address is loopback.
        serving = self.serving
        self.metrics_secure = _metrics_secure(
            serving.metrics_address, serving.metrics_secure, serving.metrics_cert_dir, serving.health_address
        )
        self._metrics: Metrics | None = None
        self.health_checks: dict[str, Check] = {}
        self.ready_checks: dict[str, Check] = {}
        self.elector: LeaderElector | None = None
        self.sharder: Sharder | None = None
        self._stop: asyncio.Event | None = None
        self._running = False
        self._cluster: Cluster | None = None
        self._probes: ProbeRunnable | None = None
        self._webhooks: WebhookRunnable | None = None
        self._synced = False

    @property
    def metrics(self) -> Metrics:
        """The series this manager exports (controller-runtime's names), on its own registry: made on
        first use, so a manager that serves no metrics never imports prometheus_client."""
        if self._metrics is None:
            self._metrics = Metrics()
        return self._metrics

    # -- what a user adds ------------------------------------------------------------------------
    def add(self, item: _Added) -> _Added:
        """Register a controller's description or a :class:`~kubeop.manager.Runnable` (before
        :meth:`start`: a running manager refuses, as the run's parts are fixed when it starts);
        each start runs a controller anew."""
        if self._running:
            raise RuntimeError(
                f"Manager.add({_named(item)}) while the manager runs: a run's parts are fixed when it "
                "starts; add it before start() (or stop, add, and start again)"
            )
        if isinstance(item, type):
            raise TypeError(
                f"Manager.add takes an instance, got the class {item.__name__}: add {item.__name__}()"
            )
        if isinstance(item, Controller):
            if item.reconciler is None:
                raise ValueError(f"controller {item.name!r} has no reconciler: call .reconcile(fn)")
            if any(c.name == item.name for c in self.controllers):
                raise ValueError(f"a controller named {item.name!r} is already registered; use .named(...)")
            self.controllers.append(item)
        elif isinstance(item, Runnable):
            if not isinstance(item.phase, Phase) or not isinstance(item.needs_leader, bool):
                raise TypeError(
                    f"Manager.add({_named(item)}): phase must be a kubeop.manager.Phase and needs_leader "
                    f"a bool, got {item.phase!r} and {item.needs_leader!r}"
                )
            if any(added is item for added in self.runnables):
                raise ValueError(f"Manager.add({_named(item)}): this runnable is added already")
            self.runnables.append(item)
        else:
            raise TypeError(
                f"Manager.add takes a Controller, got {type(item).__name__}: build one with "
                "Controller.for_(Kind)...reconcile(fn); or a Runnable (kubeop.manager.runnable(fn))"
            )
        return item

    def add_webhook(self, webhook: AdmissionWebhook | Conversion) -> None:
        """Serve an admission webhook or a conversion (before :meth:`start`)."""
        if self.webhooks is None:
            from kubeop.webhook import Webhooks

            self.webhooks = Webhooks()
        self.webhooks.add(webhook)

    def add_health_check(self, name: str, check: Check) -> None:
        """Add a liveness check served on ``/healthz`` (a function returning, or awaiting to, True when
        healthy).
        """
        self.health_checks[name] = check

    def add_ready_check(self, name: str, check: Check) -> None:
        """Add a readiness check served on ``/readyz`` (a function returning, or awaiting to, True when
        ready).
        """
        self.ready_checks[name] = check

    # -- what a run made (None before the first start) ---------------------------------------------
    @property
    def api(self) -> Client:
        """The manager's API client; raises RuntimeError before :meth:`start`."""
        if self._client is None:
            raise RuntimeError("the manager's client exists once start() runs")
        return self._client

    @property
    def cluster(self) -> Cluster | None:
        """The cluster of the current (or last) run."""
        return self._cluster

    @property
    def cache(self) -> SharedInformerFactory | None:
        """The running cluster's shared informers (None before :meth:`start`)."""
        return self._cluster.cache if self._cluster is not None else None

    @property
    def client(self) -> ReconcilerClient | None:
        """The running cluster's reconciler client, which reads from the cache (None before :meth:`start`)."""
        return self._cluster.client if self._cluster is not None else None

    @property
    def recorder(self) -> EventRecorder | None:
        """The running cluster's event recorder (None before :meth:`start`)."""
        return self._cluster.recorder if self._cluster is not None else None

    @property
    def servers(self) -> list[ProbeServer]:
        """The running metrics and probe servers (empty before :meth:`start`)."""
        return self._probes.servers if self._probes is not None else []

    @property
    def metrics_auth(self) -> DelegatedAuth | None:
        """How ``/metrics`` authenticates and authorizes callers when served securely (None otherwise)."""
        return self._probes.metrics_auth if self._probes is not None else None

    @property
    def metrics_tls(self) -> SelfSigned | None:
        """The self-signed certificate ``/metrics`` is served with when no certificate was given (None
        otherwise).
        """
        return self._probes.metrics_tls if self._probes is not None else None

    @property
    def dashboard_server(self) -> DashboardServer | None:
        """The dashboard's server of the current run (None: no dashboard, or not started)."""
        return self._dashboard.server if self._dashboard is not None else None

    @property
    def webhook_server(self) -> WebhookServer | None:
        """The running webhook server (None without webhooks or before :meth:`start`)."""
        return self._webhooks.server if self._webhooks is not None else None

    @property
    def cert_rotator(self) -> CertRotator | None:
        """What keeps the webhook server's self-managed certificate and CA bundles current (None when it does
        not manage them).
        """
        return self._webhooks.rotator if self._webhooks is not None else None

    # -- the options of before, read ----------------------------------------------------------------
    @property
    def leader_election(self) -> bool:
        """Whether the manager runs leader election."""
        return self.election is not None

    @property
    def graceful_shutdown_timeout(self) -> float:
        """How long in-flight reconciles may finish after a stop (seconds;
        ``Runtime(graceful_shutdown_timeout=...)``).
        """
        return self.runtime.graceful_shutdown_timeout

    @property
    def cache_sync_timeout(self) -> float:
        """How long a controller waits for its caches to sync (seconds)."""
        return self.runtime.cache_sync_timeout

    @property
    def resync_period(self) -> float:
        """How often the informers hand every cached object to the handlers again (seconds; 0: never)."""
        return self.runtime.resync_period

    @property
    def field_manager(self) -> str:
        """The field manager of the manager's writes (``Runtime(field_manager=...)``, else the manager's
        name).
        """
        return self.runtime.field_manager or self.name

    @property
    def _metrics_address(self) -> str | None:
        return self.serving.metrics_address

    @property
    def _health_address(self) -> str | None:
        return self.serving.health_address

    @property
    def _metrics_cert_dir(self) -> str | None:
        return self.serving.metrics_cert_dir

    # -- running -----------------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask a running manager to shut down gracefully."""
        if self._stop is not None:
            self._stop.set()

    def run(self) -> None:
        """Run until SIGTERM or SIGINT (the entry point of an operator process).

        Without any logging set up (no handler on the root logger), logs as
        :func:`~kubeop.manager.configure_logging` does: text on stderr at INFO, or what
        ``KUBEOP_LOG_FORMAT`` / ``KUBEOP_LOG_LEVEL`` say.
        """
        if not logging.getLogger().handlers:
            configure_logging()
        asyncio.run(self._run_with_signals())

    async def _run_with_signals(self) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await self.start(stop)

    async def start(self, stop: asyncio.Event | None = None) -> None:
        """Run everything until ``stop`` is set (or :meth:`stop` is called), then shut down.

        Builds the :class:`~kubeop.cluster.Cluster`, starts the runnables phase by phase (the
        servers, the caches, leader election or shard membership, then the controllers and other
        leader-gated runnables), waits, and stops them in reverse order. Raises
        :class:`~kubeop.manager.leader.LeadershipLost` if the lease is lost, after stopping every
        controller (the process should exit; a restart rejoins the election), and the error of a
        runnable that failed (a controller whose caches did not sync...) after stopping the rest.
        """
        if self._running:
            raise RuntimeError("Manager.start(): the manager runs already; one start at a time")
        self._running = True
        try:
            await self._start(stop)
        finally:
            self._running = False

    async def _start(self, stop: asyncio.Event | None) -> None:
        self._stop = stop = stop or asyncio.Event()
        if self._client is None:
            # No client-side rate limit, as controller-runtime (>= 0.15) does: the API server's
            # priority and fairness protects it, and a 50-qps bucket would throttle a burst of
            # reconciles to a fraction of what the server can take.
            self._client = Client(load_config().with_options(qps=None))
        api = self._client
        # Nobody can scrape a manager without a metrics address: record nothing then (the
        # per-event and per-reconcile bookkeeping is a few percent of an operator's CPU).
        recording = self.metrics if self.serving.metrics_address else None
        if recording is not None:
            self._observe_requests(api)
        executor = ThreadPoolExecutor(self.runtime.sync_workers, thread_name_prefix=f"{self.name}-reconcile")
        cluster = self._cluster = self._build_cluster(api)
        try:
            ending = asyncio.Event()
            runnables = self._runnables(cluster, recording, executor, ending)
            group = RunnableGroup(
                cluster,
                runnables,
                ending=ending,
                on_started=self._all_started,
                grace=self.runtime.graceful_shutdown_timeout + _STOP_MARGIN,
            )
            await group.run(stop)
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
            await cluster.close()
            if self._owns_client:
                await api.close()
                self._client = None

    def _build_cluster(self, api: Client) -> Cluster:
        """This run's cluster, its writes fenced by the lease (or the shard leases), labelled
        with the shard (label mode) and, with a dashboard, counted per reconcile."""
        guard = self._fence if self.election is not None else self._shard_fence if self.sharding else None
        if self.dashboard is not None:
            guard = counting_writes(guard)
        labels = self._shard_labels if self.sharding is not None and self.sharding.labels else None
        return Cluster(
            api,
            name=self.name,
            field_manager=self.field_manager,
            resync_period=self.runtime.resync_period,
            policy=WritePolicy(guard=guard, labels=labels),
        )

    def _runnables(
        self, cluster: Cluster, recording: Metrics | None, executor: ThreadPoolExecutor, ending: asyncio.Event
    ) -> list[Runnable]:
        """This run's runnables: the manager's own, then the ones added, then the controllers
        (``ending``: set when the run starts to end)."""
        lease = self._lease(cluster, recording, ending)
        dashboard = self._dashboard = dashboard_runnable(self) if self.dashboard is not None else None
        if recording is not None:
            recording.observe_bookkeeping(cluster.client, cluster.recorder)
            if self.webhooks is not None:
                self.webhooks.observe(recording.registry)  # kubeop_webhook_stuck_calls
        runtime = ControllerRuntime(
            cluster.cache,
            cluster.client,
            cluster.recorder,
            recording,
            executor,
            cache_sync_timeout=self.runtime.cache_sync_timeout,
            clock=self.clock,
            shards=self.sharder,
            probe=cluster.probe,
            journal=dashboard.recorder.journal if dashboard is not None else None,
        )
        timeout = self.runtime.graceful_shutdown_timeout
        controllers = [ControllerRunnable(c, runtime, timeout=timeout) for c in self.controllers]
        servers = [*self._servers(), *([dashboard] if dashboard is not None else [])]
        return [*servers, CacheRunnable(), *lease, *self.runnables, *controllers]

    def _servers(self) -> list[Runnable]:
        """The webhook server (with webhooks) and the metrics and probe servers."""
        serving = self.serving
        servers: list[Runnable] = []
        if self.webhooks is not None and len(self.webhooks):
            self._webhooks = WebhookRunnable(
                self.webhooks,
                serving.webhook_address,
                cert_dir=serving.webhook_cert_dir,
                cert_secret=serving.webhook_cert_secret,
                limits=serving.webhook_limits,
            )
            self.ready_checks["webhook"] = self._webhooks.ready
            servers.append(self._webhooks)
        self._probes = ProbeRunnable(
            health_address=serving.health_address,
            metrics_address=serving.metrics_address,
            metrics_secure=self.metrics_secure,
            metrics_cert_dir=serving.metrics_cert_dir,
            registry=self.metrics.registry if serving.metrics_address else None,
            health_checks=self.health_checks,
            ready_checks=self.ready_checks,
            synced=self._caches_synced,
        )
        return [*servers, self._probes]

    def _lease(self, cluster: Cluster, recording: Metrics | None, ending: asyncio.Event) -> list[Runnable]:
        """Shard membership (with sharding) or leader election (with it), or nothing."""
        api = cluster.api
        if self.sharding is not None:
            from kubeop.manager.sharding import Sharder  # with sharding only

            sharding = self.sharding
            self.sharder = Sharder(
                sharding,
                api,
                cluster.cache,
                name=self.name,
                namespace=api.namespace or "default",
                lease_duration=sharding.lease_duration,
                renew_deadline=sharding.renew_deadline,
                retry_period=sharding.retry_period,
                registry=recording.registry if recording is not None else None,
                recorder=cluster.recorder,
            )
            return [ShardRunnable(self.sharder, ending)]
        if self.election is not None:
            election = self.election
            lease = election.id or f"{self.name}-leader"
            gauge = self.metrics.leader.labels(lease)
            gauge.set(0)
            self.elector = LeaderElector(
                api,
                lease,
                election.namespace or api.namespace or "default",
                lease_duration=election.lease_duration,
                renew_deadline=election.renew_deadline,
                retry_period=election.retry_period,
                release_on_cancel=election.release_on_cancel,
                on_change=lambda leading: gauge.set(1 if leading else 0),
            )
            return [ElectionRunnable(self.elector)]
        return []

    def _all_started(self, seconds: float) -> None:
        self._synced = True
        log.info("all controllers started", extra={"seconds": round(seconds, 3)})

    def _caches_synced(self) -> bool:
        return self._synced or (self.elector is not None and not self.elector.is_leader)

    def _fence(self) -> None:
        """Refuse a controller's write unless this process holds the lease right now."""
        elector = self.elector
        if elector is not None and not elector.holds():
            raise LeadershipLost(
                f"not writing: lease {elector.namespace}/{elector.name} is not held "
                f"(no renewal within {elector.renew_deadline:.0f} s)"
            )

    def _shard_fence(self) -> None:
        """Refuse a controller's write unless this replica's shard lease is held right now."""
        if self.sharder is not None:
            self.sharder.fence()

    def _shard_labels(self, resource: ApiResource, obj: dict[str, Any]) -> dict[str, str] | None:
        """The shard labels of an object written (label mode: children carry their owner's)."""
        return self.sharder.labels_for(resource, obj) if self.sharder is not None else None

    def _observe_requests(self, api: Client) -> None:
        """Export the client's requests as controller-runtime's rest_client_* series."""
        from urllib.parse import urlsplit

        host = urlsplit(api.config.server).netloc
        counters: dict[tuple[str, str], Any] = {}
        latency: dict[str, Any] = {}
        requests, durations = self.metrics.rest_requests, self.metrics.rest_latency

        def observe(method: str, code: str, seconds: float) -> None:
            counter = counters.get((method, code))
            if counter is None:
                counter = counters[(method, code)] = requests.labels(code, method, host)
            counter.inc()
            histogram = latency.get(method)
            if histogram is None:
                histogram = latency[method] = durations.labels(method, host)
            histogram.observe(seconds)

        api.transport.observer = observe


def _named(item: object) -> str:
    name = getattr(item, "name", None)
    return repr(name) if isinstance(name, str) else type(item).__name__


def _metrics_secure(
    address: str | None, secure: bool | None, cert_dir: str | None, health_address: str | None
) -> bool:
    """Whether ``/metrics`` is served over HTTPS with authentication: as asked, or by default
    unless the address is loopback (only this machine, or this pod, can reach it there)."""
    if address is None:
        return False
    host = parse_address(address)[0]
    if secure is None:
        secure = not is_loopback(host)
    if cert_dir is not None and not secure:
        raise ValueError(
            "Manager(metrics_cert_dir=...) is for HTTPS metrics, but metrics_secure is off: "
            "drop metrics_cert_dir or pass metrics_secure=True"
        )
    if secure and address == health_address and parse_address(address)[1] != 0:  # port 0: two ports
        raise ValueError(
            f"Manager: metrics_address and health_address are both {address!r}, but HTTPS metrics need "
            "their own port (the kubelet probes plain HTTP): e.g. metrics_address='0.0.0.0:8443'"
        )
    return secure
