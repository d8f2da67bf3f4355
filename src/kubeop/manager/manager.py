"""Manager: runs controllers with shared caches and clients, leader election, probes, metrics,
and a graceful shutdown.

    manager = Manager(leader_election=True, name="application-operator")
    manager.add(Controller.for_(Application).owns(Deployment).reconcile(reconcile))
    manager.run()            # until SIGTERM / SIGINT; or: await manager.start(stop_event)

One informer per watched kind for the whole process, one connection pool, one event recorder.
Metrics off loopback (or with ``metrics_secure=True``) are served over HTTPS, only to callers the
API server authenticates and RBAC lets ``get /metrics`` (:mod:`kubeop.manager.delegated_auth`).
On SIGTERM the manager stops taking new work, lets in-flight reconciles finish (up to
``graceful_shutdown_timeout``), flushes events, releases the lease and closes everything.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import ssl
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubeop.cache import SharedInformerFactory
from kubeop.client import Client, load_config
from kubeop.client._httpserver import Request
from kubeop.controller import Controller, EventRecorder, Metrics, ReconcilerClient, WritePolicy
from kubeop.controller.running import ControllerRuntime, RunningController
from kubeop.manager.leader import LeaderElector, LeadershipLost
from kubeop.manager.logs import configure_logging
from kubeop.manager.server import Check, ProbeServer, parse_address
from kubeop.manager.sharding import Sharder, Sharding
from kubeop.queue import Clock

if TYPE_CHECKING:
    from kubeop.manager.delegated_auth import DelegatedAuth
    from kubeop.manager.serving_tls import SelfSigned

    # Imported when webhooks are used: kubeop.webhook brings pydantic and cryptography (~23 MB of
    # RSS) that an operator without webhooks never needs.
    from kubeop.webhook import AdmissionWebhook, Conversion, Webhooks
    from kubeop.webhook.rotator import CertRotator, CertSecret
    from kubeop.webhook.server import WebhookServer

__all__ = ["Manager"]

_LOOPBACK_NAMES = ("localhost", "localhost.")

log = logging.getLogger("kubeop.manager")


class Manager:
    """Owns what controllers share; see the module docstring."""

    def __init__(
        self,
        client: Client | None = None,
        *,
        name: str = "kubeop-operator",
        metrics_address: str | None = "127.0.0.1:8080",
        health_address: str | None = "127.0.0.1:8081",
        metrics_secure: bool | None = None,
        metrics_cert_dir: str | None = None,
        leader_election: bool = False,
        leader_election_id: str | None = None,
        leader_election_namespace: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_cancel: bool = True,
        graceful_shutdown_timeout: float = 30.0,
        cache_sync_timeout: float = 120.0,
        resync_period: float = 0.0,
        field_manager: str | None = None,
        sync_workers: int = 8,
        webhooks: Webhooks | None = None,
        webhook_address: str = "127.0.0.1:9443",
        webhook_cert_dir: str | None = None,
        webhook_cert_secret: CertSecret | None = None,
        clock: Clock | None = None,
        sharding: Sharding | None = None,
    ) -> None:
        if sharding is not None and leader_election:
            raise ValueError(
                "Manager(sharding=..., leader_election=True): choose one; with sharding every "
                "replica works, and controllers that must run once go in Sharding(unsharded=[...])"
            )
        # Split the objects between replicas (kubeop.manager.sharding); the lease timings apply.
        self.sharding = sharding
        self.sharder: Sharder | None = None
        self.name = name
        # The time every controller's queue and reconciler (ctx.now()) sees; None: the real one.
        # Tests pass a kubeop.queue.SteppedClock to step a schedule.
        self.clock = clock
        self._client = client
        self._owns_client = client is None
        self.controllers: list[Controller] = []
        self._metrics_address = metrics_address
        self._health_address = health_address
        # HTTPS, and only for callers the API server authenticates and RBAC allows (see
        # kubeop.manager.delegated_auth); None: so unless the address is loopback.
        self.metrics_secure = _metrics_secure(
            metrics_address, metrics_secure, metrics_cert_dir, health_address
        )
        self._metrics_cert_dir = metrics_cert_dir
        self.metrics_auth: DelegatedAuth | None = None
        self.metrics_tls: SelfSigned | None = None
        self.leader_election = leader_election
        self._le_id = leader_election_id or f"{name}-leader"
        self._le_ns = leader_election_namespace
        self._le_timing = (lease_duration, renew_deadline, retry_period)
        self._release_on_cancel = release_on_cancel
        self.graceful_shutdown_timeout = graceful_shutdown_timeout
        self.cache_sync_timeout = cache_sync_timeout
        self.resync_period = resync_period
        self.field_manager = field_manager or name
        self._sync_workers = sync_workers
        self.metrics = Metrics()
        self.health_checks: dict[str, Check] = {}
        self.ready_checks: dict[str, Check] = {}
        self._stop: asyncio.Event | None = None
        self.elector: LeaderElector | None = None
        self.cache: SharedInformerFactory | None = None
        self.client: ReconcilerClient | None = None
        self.recorder: EventRecorder | None = None
        self.servers: list[ProbeServer] = []
        self._synced = False
        # Webhooks are served by every replica, leader or not, from before the caches sync.
        # Without a cert dir (a local run) a CA and a certificate for the bind address are made;
        # with a cert Secret (self-managed certificates in a cluster) every replica keeps the
        # Secret, the cert dir and the configurations' caBundle valid (kubeop.webhook.rotator).
        self.webhooks: Webhooks | None = webhooks
        self._webhook_address = webhook_address
        self._webhook_cert_dir = webhook_cert_dir
        self._webhook_cert_secret = webhook_cert_secret
        self.webhook_server: WebhookServer | None = None
        self.cert_rotator: CertRotator | None = None
        self._rotating: asyncio.Task[None] | None = None

    def add(self, controller: Controller) -> Controller:
        """Register a controller's description (before :meth:`start`); each start runs it anew."""
        if not isinstance(controller, Controller):
            raise TypeError(
                f"Manager.add takes a Controller, got {type(controller).__name__}: "
                "build one with Controller.for_(Kind)...reconcile(fn)"
            )
        if controller.reconciler is None:
            raise ValueError(f"controller {controller.name!r} has no reconciler: call .reconcile(fn)")
        if any(c.name == controller.name for c in self.controllers):
            raise ValueError(f"a controller named {controller.name!r} is already registered; use .named(...)")
        self.controllers.append(controller)
        return controller

    def add_webhook(self, webhook: AdmissionWebhook | Conversion) -> None:
        """Serve an admission webhook or a conversion (before :meth:`start`)."""
        if self.webhooks is None:
            from kubeop.webhook import Webhooks

            self.webhooks = Webhooks()
        self.webhooks.add(webhook)

    def add_health_check(self, name: str, check: Check) -> None:
        self.health_checks[name] = check

    def add_ready_check(self, name: str, check: Check) -> None:
        self.ready_checks[name] = check

    @property
    def api(self) -> Client:
        if self._client is None:
            raise RuntimeError("the manager's client exists once start() runs")
        return self._client

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

        Raises :class:`~kubeop.manager.leader.LeadershipLost` if the lease is lost, after stopping
        every controller (the process should exit; a restart rejoins the election).
        """
        self._stop = stop or asyncio.Event()
        if self._client is None:
            # No client-side rate limit, as controller-runtime (>= 0.15) does: the API server's
            # priority and fairness protects it, and a 50-qps bucket would throttle a burst of
            # reconciles to a fraction of what the server can take.
            self._client = Client(load_config().with_options(qps=None))
        api = self._client
        metrics = self.metrics
        # Nobody can scrape a manager without a metrics address: record nothing then (the
        # per-event and per-reconcile bookkeeping is a few percent of an operator's CPU).
        recording = metrics if self._metrics_address else None
        if recording is not None:
            self._observe_requests(api)
        executor = ThreadPoolExecutor(self._sync_workers, thread_name_prefix=f"{self.name}-reconcile")
        self.cache = SharedInformerFactory(api, resync_period=self.resync_period)
        self.recorder = EventRecorder(api, self.name)
        policy = WritePolicy(guard=self._fence if self.leader_election else None)
        if self.sharding is not None:
            self.sharder = Sharder(
                self.sharding,
                api,
                self.cache,
                name=self.name,
                namespace=self._le_ns or api.namespace or "default",
                lease_duration=self._le_timing[0],
                renew_deadline=self._le_timing[1],
                retry_period=self._le_timing[2],
                registry=metrics.registry if recording is not None else None,
                recorder=self.recorder,
            )
            policy = WritePolicy(
                guard=self.sharder.fence,
                # label mode: children carry their owner's label
                labels=self.sharder.labels_for if self.sharder.labeller is not None else None,
            )
        self.client = ReconcilerClient(api, self.cache, field_manager=self.field_manager, policy=policy)
        if recording is not None:
            recording.observe_bookkeeping(self.client, self.recorder)
            if self.webhooks is not None:
                self.webhooks.observe(recording.registry)  # kubeop_webhook_stuck_calls
        runtime = ControllerRuntime(
            self.cache,
            self.client,
            self.recorder,
            recording,
            executor,
            cache_sync_timeout=self.cache_sync_timeout,
            clock=self.clock,
            shards=self.sharder,
        )
        hold_task: asyncio.Task[None] | None = None
        running: list[RunningController] = []
        starts: list[asyncio.Future[None]] = []
        try:
            await self._start_servers()
            if self.leader_election:
                namespace = self._le_ns or api.namespace or "default"
                lease_duration, renew_deadline, retry_period = self._le_timing
                gauge = metrics.leader.labels(self._le_id)
                gauge.set(0)
                self.elector = LeaderElector(
                    api,
                    self._le_id,
                    namespace,
                    lease_duration=lease_duration,
                    renew_deadline=renew_deadline,
                    retry_period=retry_period,
                    release_on_cancel=self._release_on_cancel,
                    on_change=lambda leading: gauge.set(1 if leading else 0),
                )
                log.info(
                    "waiting for leadership of lease %s/%s as %s",
                    namespace,
                    self._le_id,
                    self.elector.identity,
                )
                acquire = asyncio.ensure_future(self.elector.acquire())
                waiter = asyncio.ensure_future(self._stop.wait())
                await asyncio.wait({acquire, waiter}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                if not acquire.done():
                    acquire.cancel()
                    return
                hold_task = asyncio.ensure_future(self.elector.hold())
            self.cache.start()
            if self.sharder is not None:
                hold_task = asyncio.ensure_future(self.sharder.run())
            t0 = time.monotonic()
            running = [RunningController(c, runtime) for c in self.controllers]
            starts = [asyncio.ensure_future(r.start()) for r in running]
            starting: asyncio.Future[Any] = asyncio.ensure_future(asyncio.gather(*starts))
            stopping: asyncio.Future[Any] = asyncio.ensure_future(self._stop.wait())
            await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
            if not starting.done():  # asked to stop while caches were still syncing
                starting.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await starting
                return
            stopping.cancel()
            starting.result()  # a controller that could not start (e.g. caches never synced) ends the run
            self._synced = True
            log.info("all controllers started", extra={"seconds": round(time.monotonic() - t0, 3)})
            waiter = asyncio.ensure_future(self._stop.wait())
            waits: set[asyncio.Future[Any]] = {waiter}
            if hold_task is not None:
                waits.add(hold_task)
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if hold_task is not None and hold_task in done:
                hold_task.result()  # raises LeadershipLost
        finally:
            lost = (
                hold_task is not None
                and hold_task.done()
                and not hold_task.cancelled()
                and isinstance(hold_task.exception(), LeadershipLost)
            )
            if self.sharder is not None:
                self.sharder.close()
            for start in starts:  # those still syncing when another failed, or when asked to stop
                start.cancel()
            await asyncio.gather(*starts, return_exceptions=True)
            await asyncio.gather(
                *(r.stop(drain=not lost, timeout=self.graceful_shutdown_timeout) for r in running),
                return_exceptions=True,
            )
            if self.recorder is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.recorder.flush(), 5)
            if hold_task is not None and not hold_task.done():
                hold_task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await hold_task
            if self.elector is not None and self._release_on_cancel and not lost:
                await self.elector.release()
            if self.sharder is not None and not lost:
                await self.sharder.leave()
            if self.cache is not None:
                await self.cache.stop()
            for server in self.servers:
                await server.stop()
            if self._rotating is not None:
                self._rotating.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._rotating
            if self.webhook_server is not None:
                await self.webhook_server.stop()
            executor.shutdown(wait=False, cancel_futures=True)
            if self._owns_client:
                await api.close()
                self._client = None

    def _fence(self) -> None:
        """Refuse a controller's write unless this process holds the lease right now."""
        elector = self.elector
        if elector is not None and not elector.holds():
            raise LeadershipLost(
                f"not writing: lease {elector.namespace}/{elector.name} is not held "
                f"(no renewal within {elector.renew_deadline:.0f} s)"
            )

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

    async def _start_servers(self) -> None:
        def synced() -> bool:
            return self._synced or (self.elector is not None and not self.elector.is_leader)

        if self.webhooks is not None and len(self.webhooks):
            from kubeop.webhook.certs import default_cert_dir, local_certificates
            from kubeop.webhook.server import WebhookServer

            # Without a cert dir: this user's private one (kubeop.webhook.certs.default_cert_dir),
            # never a fixed path of the shared temp dir another local user could create first.
            cert_dir = self._webhook_cert_dir
            if self._webhook_cert_secret is not None:
                from kubeop.webhook.rotator import CertRotator

                cert_dir = cert_dir or str(default_cert_dir())
                self.cert_rotator = CertRotator(self.api, self._webhook_cert_secret, cert_dir=cert_dir)
                await self.cert_rotator.ensure()
                assert self._stop is not None
                self._rotating = asyncio.ensure_future(self.cert_rotator.run(self._stop))
            elif cert_dir is None:
                host = parse_address(self._webhook_address)[0]
                cert_dir = str(local_certificates(hosts=(host,)).directory)
            self.webhook_server = WebhookServer(self.webhooks, self._webhook_address, cert_dir=cert_dir)
            await self.webhook_server.start()
            self.ready_checks["webhook"] = self.webhook_server.ready
        addresses: dict[str, ProbeServer] = {}
        if self._health_address:
            addresses[self._health_address] = ProbeServer(self._health_address)
        if self._metrics_address and not self.metrics_secure:
            shared = addresses.get(self._metrics_address)
            if shared is not None and not self._metrics_address.endswith(":0"):
                shared.registry = self.metrics.registry  # one port serves probes and metrics
            else:
                addresses[f"metrics {self._metrics_address}"] = ProbeServer(
                    self._metrics_address, registry=self.metrics.registry
                )
        for server in addresses.values():
            server.health.update(self.health_checks)
            server.ready.update(self.ready_checks)
            server.ready["caches-synced"] = synced
            await server.start()
            self.servers.append(server)
        if self._metrics_address and self.metrics_secure:
            await self._start_secure_metrics(self._metrics_address)  # last in self.servers, as before

    async def _start_secure_metrics(self, address: str) -> None:
        """``/metrics`` over HTTPS for callers the API server authenticates and authorizes."""
        from kubeop.manager.delegated_auth import DelegatedAuth

        self.metrics_auth = DelegatedAuth(self.api, registry=self.metrics.registry)
        if self._metrics_cert_dir is None:
            from kubeop.manager.serving_tls import self_signed

            # off the loop: the webhooks are being served already
            self.metrics_tls = await asyncio.to_thread(self_signed, [parse_address(address)[0]])
        auth = self.metrics_auth
        if self.metrics_tls is not None:
            context = self.metrics_tls.context

            def tls() -> ssl.SSLContext:
                return context
        else:
            from kubeop.webhook.server import CertWatcher

            directory = Path(self._metrics_cert_dir or ".")
            tls = CertWatcher(directory / "tls.crt", directory / "tls.key").current

        async def authorize(request: Request) -> tuple[int, str] | None:
            return await auth.check(request.header("authorization"), path=request.path)

        server = ProbeServer(address, registry=self.metrics.registry, tls=tls, authorize=authorize)
        await server.start()
        self.servers.append(server)


def _metrics_secure(
    address: str | None, secure: bool | None, cert_dir: str | None, health_address: str | None
) -> bool:
    """Whether ``/metrics`` is served over HTTPS with authentication: as asked, or by default
    unless the address is loopback (only this machine, or this pod, can reach it there)."""
    if address is None:
        return False
    host = parse_address(address)[0]
    if secure is None:
        secure = not _is_loopback(host)
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


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
