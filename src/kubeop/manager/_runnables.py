"""The Manager's own runnables (private): its controllers, the informer cache, leader election,
shard membership, the webhook server and the metrics and probe servers."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubeop.controller import Controller
from kubeop.controller import Request as ReconcileRequest
from kubeop.controller.running import ControllerRuntime, RunningController
from kubeop.manager._group import until_stop
from kubeop.manager.leader import LeaderElector
from kubeop.manager.options import WebhookLimits
from kubeop.manager.rendezvous import owner as rendezvous_owner
from kubeop.manager.runnable import Phase
from kubeop.manager.server import Check, ProbeServer, is_loopback, parse_address

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from kubeop.client.httpserver import Request
    from kubeop.cluster import Cluster
    from kubeop.dashboard import DashboardServer, Recorder, Sources
    from kubeop.manager.delegated_auth import DelegatedAuth
    from kubeop.manager.manager import Manager
    from kubeop.manager.options import Dashboard
    from kubeop.manager.serving_tls import SelfSigned
    from kubeop.manager.sharding import Sharder
    from kubeop.webhook import AdmissionWebhook, Conversion, Webhooks
    from kubeop.webhook.rotator import CertRotator, CertSecret
    from kubeop.webhook.server import WebhookServer

log = logging.getLogger("kubeop.manager")


class ControllerRunnable:
    """One run of a controller: started once its caches synced; a stop drains its in-flight
    reconciles (up to ``timeout``), a cancellation (the lease was lost) does not."""

    phase = Phase.LEADER
    needs_leader = True

    def __init__(self, description: Controller, runtime: ControllerRuntime, *, timeout: float) -> None:
        self.name = f"controller {description.name}"
        self._running = RunningController(description, runtime)
        self._timeout = timeout
        self._started = asyncio.Event()

    async def started(self) -> None:
        await self._started.wait()

    async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
        running = self._running
        drain = False
        try:
            await running.start()
            self._started.set()
            await stop.wait()
            drain = True
        finally:
            await running.stop(drain=drain, timeout=self._timeout)


class CacheRunnable:
    """The shared informers: started on every replica, stopped after everything using them."""

    phase = Phase.CACHES
    needs_leader = False
    name = "informer cache"

    async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
        cluster.cache.start()
        try:
            await stop.wait()
        finally:
            await cluster.cache.stop()


class ElectionRunnable:
    """Leader election: started once the lease is held; held until stopped (then released,
    with ``release_on_cancel``) or lost (LeadershipLost: not released)."""

    phase = Phase.ELECTION
    needs_leader = False
    name = "leader election"

    def __init__(self, elector: LeaderElector) -> None:
        self.elector = elector
        self._acquired = asyncio.Event()

    async def started(self) -> None:
        await self._acquired.wait()

    async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
        elector = self.elector
        log.info(
            "waiting for leadership of lease %s/%s as %s", elector.namespace, elector.name, elector.identity
        )
        acquired, _ = await until_stop(elector.acquire(), stop)
        if acquired:
            self._acquired.set()
            await until_stop(elector.hold(), stop)  # raises LeadershipLost
        if elector.release_on_cancel:
            await elector.release()


class ShardRunnable:
    """Shard membership (and the labeller): takes no new work once the run ends, leaves the ring
    when stopped (handing its keys over), not when its lease was lost."""

    phase = Phase.ELECTION
    needs_leader = False
    name = "shard membership"

    def __init__(self, sharder: Sharder, ending: asyncio.Event) -> None:
        self.sharder = sharder
        self._ending = ending

    async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
        sharder = self.sharder
        closing = asyncio.ensure_future(self._close_when_ending())
        try:
            await until_stop(sharder.run(), stop)  # raises ShardLeaseLost
        finally:
            closing.cancel()
            sharder.close()
        await sharder.leave()

    async def _close_when_ending(self) -> None:
        await self._ending.wait()
        self.sharder.close()  # before the controllers drain: requests waiting for the ring are dropped


class WebhookRunnable:
    """The webhook server (every replica, from before the caches sync) and, with a cert Secret,
    its certificate rotator.

    Without a cert dir (a local run) a CA and a certificate for the bind address are made; with a
    cert Secret (self-managed certificates in a cluster) every replica keeps the Secret, the cert
    dir and the configurations' caBundle valid (kubeop.webhook.rotator).
    """

    phase = Phase.SERVERS
    needs_leader = False
    name = "webhook server"

    def __init__(
        self,
        webhooks: Webhooks,
        address: str,
        *,
        cert_dir: str | None,
        cert_secret: CertSecret | None,
        limits: WebhookLimits | None = None,
    ) -> None:
        self._webhooks = webhooks
        self._limits = limits or WebhookLimits()
        self._address = address
        self._cert_dir = cert_dir
        self._cert_secret = cert_secret
        self.server: WebhookServer | None = None
        self.rotator: CertRotator | None = None
        self._started = asyncio.Event()

    async def started(self) -> None:
        await self._started.wait()

    def ready(self) -> bool:
        return self.server is not None and self.server.ready()

    async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
        from kubeop.webhook.certs import default_cert_dir, local_certificates
        from kubeop.webhook.server import WebhookServer

        # Without a cert dir: this user's private one (kubeop.webhook.certs.default_cert_dir),
        # never a fixed path of the shared temp dir another local user could create first.
        cert_dir = self._cert_dir
        rotating: asyncio.Future[None] | None = None
        try:
            if self._cert_secret is not None:
                from kubeop.webhook.rotator import CertRotator

                cert_dir = cert_dir or str(default_cert_dir())
                self.rotator = CertRotator(cluster.api, self._cert_secret, cert_dir=cert_dir)
                await self.rotator.ensure()
                rotating = asyncio.ensure_future(self.rotator.run(stop))
            elif cert_dir is None:
                host = parse_address(self._address)[0]
                cert_dir = str(local_certificates(hosts=(host,)).directory)
            limits = self._limits
            self.server = WebhookServer(
                self._webhooks,
                self._address,
                cert_dir=cert_dir,
                max_body=limits.max_body,
                max_connections=limits.max_connections,
                max_bytes_in_flight=limits.max_bytes_in_flight,
                header_timeout=limits.header_timeout,
                body_timeout=limits.body_timeout,
            )
            await self.server.start()
            self._started.set()
            await stop.wait()
        finally:
            if rotating is not None:
                rotating.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await rotating
            if self.server is not None:
                await self.server.stop()


class ProbeRunnable:
    """The health probe server and the metrics one (one port for both when they share an
    address), and ``/metrics`` over HTTPS for callers the API server authenticates and RBAC
    allows (:mod:`kubeop.manager.delegated_auth`) when ``metrics_secure``."""

    phase = Phase.SERVERS
    needs_leader = False
    name = "probe server"

    def __init__(
        self,
        *,
        health_address: str | None,
        metrics_address: str | None,
        metrics_secure: bool,
        metrics_cert_dir: str | None,
        registry: CollectorRegistry | None,
        health_checks: dict[str, Check],
        ready_checks: dict[str, Check],
        synced: Check,
    ) -> None:
        self._health_address = health_address
        self._metrics_address = metrics_address
        self._metrics_secure = metrics_secure
        self._metrics_cert_dir = metrics_cert_dir
        self._registry = registry
        self._health_checks = health_checks
        self._ready_checks = ready_checks
        self._synced = synced
        self.servers: list[ProbeServer] = []
        self.metrics_auth: DelegatedAuth | None = None
        self.metrics_tls: SelfSigned | None = None
        self._started = asyncio.Event()

    async def started(self) -> None:
        await self._started.wait()

    async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
        try:
            await self._start(cluster)
            self._started.set()
            await stop.wait()
        finally:
            for server in self.servers:
                await server.stop()

    async def _start(self, cluster: Cluster) -> None:
        addresses: dict[str, ProbeServer] = {}
        metrics_address = self._metrics_address
        if self._health_address:
            addresses[self._health_address] = ProbeServer(self._health_address)
        if metrics_address and not self._metrics_secure:
            shared = addresses.get(metrics_address)
            if shared is not None and not metrics_address.endswith(":0"):
                shared.registry = self._registry  # one port serves probes and metrics
            else:
                addresses[f"metrics {metrics_address}"] = ProbeServer(
                    metrics_address, registry=self._registry
                )
        for server in addresses.values():
            server.health.update(self._health_checks)
            server.ready.update(self._ready_checks)
            server.ready["caches-synced"] = self._synced
            await server.start()
            self.servers.append(server)
        if metrics_address and self._metrics_secure:
            await self._start_secure_metrics(cluster, metrics_address)  # last in servers, as before

    async def _start_secure_metrics(self, cluster: Cluster, address: str) -> None:
        """``/metrics`` over HTTPS for callers the API server authenticates and authorizes."""
        from kubeop.manager.delegated_auth import DelegatedAuth

        self.metrics_auth = auth = DelegatedAuth(cluster.api, registry=self._registry)
        tls: Callable[[], ssl.SSLContext]
        if self._metrics_cert_dir is None:
            from kubeop.manager.serving_tls import self_signed

            # off the loop: the webhooks are being served already
            self.metrics_tls = await asyncio.to_thread(self_signed, [parse_address(address)[0]])
            context = self.metrics_tls.context

            def tls() -> ssl.SSLContext:
                return context
        else:
            from kubeop.webhook.server import CertWatcher

            directory = Path(self._metrics_cert_dir)
            tls = CertWatcher(directory / "tls.crt", directory / "tls.key").current

        async def authorize(request: Request) -> tuple[int, str] | None:
            return await auth.check(request.header("authorization"), path=request.path)

        server = ProbeServer(address, registry=self._registry, tls=tls, authorize=authorize)
        await server.start()
        self.servers.append(server)


class DashboardRunnable:
    """The dashboard (:mod:`kubeop.dashboard`): its server on every replica, from before the
    caches sync, and the recorder's drain each refresh; the log handler that keeps the
    reconciles' lines is installed for the run only."""

    phase = Phase.SERVERS
    needs_leader = False
    name = "dashboard"

    def __init__(
        self,
        options: Dashboard,
        recorder: Recorder,
        sources: Sources,
        *,
        secure: bool,
        webhooks: Webhooks | None = None,
    ) -> None:
        self._options = options
        self._webhooks = webhooks  # told the recorder of their requests for the run
        self.recorder = recorder
        self._sources = sources
        self._secure = secure
        self.server: DashboardServer | None = None
        self._started = asyncio.Event()

    async def started(self) -> None:
        await self._started.wait()

    async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
        from kubeop.dashboard import DashboardServer

        options, recorder = self._options, self.recorder
        tls: Callable[[], ssl.SSLContext] | None = None
        authorize = None
        if self._secure:
            tls, authorize = await self._protection(cluster)
        recorder.install()
        if self._webhooks is not None:
            self._webhooks.add_listener(recorder.webhooks)
        try:
            self.server = DashboardServer(
                recorder,
                self._sources,
                options.address,
                refresh=options.refresh,
                tls=tls,
                authorize=authorize,
            )
            await self.server.start()
            log.info("dashboard serving on %s", self.server.url)
            self._started.set()
            while not stop.is_set():
                recorder.drain()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(options.refresh):
                        await stop.wait()
        finally:
            recorder.uninstall()
            if self._webhooks is not None:
                self._webhooks.remove_listener(recorder.webhooks)
            if self.server is not None:
                await self.server.stop()

    async def _protection(
        self, cluster: Cluster
    ) -> tuple[Callable[[], ssl.SSLContext], Callable[[Request], Awaitable[tuple[int, str] | None]]]:
        """HTTPS and delegated authentication and authorization (``get /dashboard``)."""
        from kubeop.manager.delegated_auth import DelegatedAuth

        auth = DelegatedAuth(cluster.api)
        tls: Callable[[], ssl.SSLContext]
        if self._options.cert_dir is None:
            from kubeop.manager.serving_tls import self_signed

            context = (
                await asyncio.to_thread(self_signed, [parse_address(self._options.address)[0]])
            ).context

            def tls() -> ssl.SSLContext:
                return context
        else:
            from kubeop.webhook.server import CertWatcher

            directory = Path(self._options.cert_dir)
            tls = CertWatcher(directory / "tls.crt", directory / "tls.key").current

        async def authorize(request: Request) -> tuple[int, str] | None:
            return await auth.check(request.header("authorization"), path="/dashboard")

        return tls, authorize


def dashboard_runnable(manager: Manager) -> DashboardRunnable:
    """The dashboard of ``manager``'s run (``manager.dashboard`` set): a new recorder each run,
    reading the run's cluster and this replica's role from the manager."""
    from kubeop.dashboard import Recorder, Sources

    options = manager.dashboard
    assert options is not None
    recorder = Recorder(
        objects=options.objects,
        reconciles_per_object=options.reconciles_per_object,
        log_lines=options.log_lines,
    )

    def replica() -> dict[str, Any]:
        if manager.sharder is not None:
            sharder = manager.sharder
            return {"mode": "sharding", "identity": sharder.identity, "ring": sharder.membership.ring_name}
        if manager.elector is not None:
            elector = manager.elector
            return {
                "mode": "leader election",
                "identity": elector.identity,
                "lease": f"{elector.namespace}/{elector.name}",
                "leader": elector.is_leader,
            }
        return {"mode": "single replica", "leader": True}

    def webhooks() -> list[dict[str, Any]]:
        return [_webhook_row(w) for w in manager.webhooks or ()]

    def owner(controller: str, namespace: str, name: str) -> dict[str, Any]:
        sharder = manager.sharder
        if sharder is None:
            return {"replica": "this replica", "this_replica": True}
        return _shard_owner(sharder, controller, ReconcileRequest(namespace, name))

    sources = Sources(
        cluster=lambda: manager.cluster, replica=replica, webhooks=webhooks, name=manager.name, owner=owner
    )
    secure = options.secure
    if secure is None:  # as the metrics: protected unless only this machine (or pod) reaches it
        secure = not is_loopback(parse_address(options.address)[0])
    return DashboardRunnable(options, recorder, sources, secure=secure, webhooks=manager.webhooks)


def _shard_owner(sharder: Sharder, controller: str, request: ReconcileRequest) -> dict[str, Any]:
    """Who owns ``request``'s key for ``controller`` under the newest ring this replica has seen
    (computed here, read-only: the handover's own answers are not touched)."""
    handover = sharder.handover
    key = sharder.key(controller, request)
    member = rendezvous_owner(key, handover.members)
    return {
        "ring": sharder.membership.ring_name,
        "generation": handover.generation,
        "key": key,
        "replica": member if member is not None else "none yet (no ring)",
        "this_replica": member == sharder.identity,
    }


def _webhook_row(webhook: AdmissionWebhook | Conversion) -> dict[str, Any]:
    mutating = getattr(webhook, "mutating", None)
    kind = "conversion" if mutating is None else "mutating" if mutating else "validating"
    return {"path": webhook.path, "kind": type(webhook).__name__, "type": kind}
