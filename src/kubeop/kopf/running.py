"""Running kopf handlers: a kubeop Manager with one controller per handled resource.

``kopf.run()`` blocks until SIGTERM/SIGINT (or ``stop_flag``); ``await kopf.operator(...)`` runs
inside a loop, ``ready_flag``/``stop_flag`` being a ``threading.Event``, an ``asyncio.Event`` or
a future as in kopf; ``kopf.build_manager()`` gives the Manager for embedding (add native
controllers, webhooks, checks). Each resource gets one shared informer, one level-based work
queue and one :class:`~kubeop.kopf.processing.Processor` as its reconciler.

The operator's life, as kopf's: startup handlers, login (the login handlers'
:class:`~kubeop.kopf.activities.ConnectionInfo`, renewed by running them again after a 401 or
their expiration; else kubeop's own configuration), the ready
flag, the handlers until the stop flag, cleanup handlers, then the tasks the handlers left
behind get 5 s to finish before they are cancelled. Peering maps to kubeop's leader election:
``standalone=False`` waits for the Lease named after the peering (``peering_name``, default
``kopf-default``) before handling anything; priorities do not exist there (the first replica
leads, the others wait until its Lease expires).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import logging
import signal
import sys
import threading
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from kubeop.client import Client, ClientConfig, load_config
from kubeop.controller import Controller
from kubeop.core.resource import ApiResource
from kubeop.kopf._on_import import when_imported
from kubeop.kopf.activities import Activity, ActivityHandler, LoginError, run_activity
from kubeop.kopf.admission import AdmissionHandler, admission_handlers
from kubeop.kopf.admission import webhooks as admission_webhooks
from kubeop.kopf.credentials import Vault, connect
from kubeop.kopf.events import use_recorder
from kubeop.kopf.handlers import ChangingHandler
from kubeop.kopf.indexing import IndexSet, indexing_handlers
from kubeop.kopf.logins import login_via_client
from kubeop.kopf.namespaces import NamespacePattern, Namespaces, filtered
from kubeop.kopf.probing import Probes, parse_endpoint
from kubeop.kopf.probing import serve as serve_liveness
from kubeop.kopf.processing import Memo, Processor
from kubeop.kopf.registry import Registry, default_registry
from kubeop.kopf.resource import of_api_resource
from kubeop.kopf.selectors import UnresolvedResource, resolve_all
from kubeop.kopf.settings import OperatorSettings, current_settings, reset_settings, use_settings
from kubeop.kopf.spawning import SpawningHandler
from kubeop.kopf.watching import EventDispatcher, WatchingHandler
from kubeop.manager import LeaderElection, Manager, Phase, Serving
from kubeop.manager.server import ProbeServer

if TYPE_CHECKING:
    from kubeop.cluster import Cluster

__all__ = [
    "Flag",
    "LogFormat",
    "build_manager",
    "configure",
    "login",
    "login_via_kubeop",
    "operator",
    "processors",
    "run",
    "run_manager",
    "run_tasks",
    "spawn_tasks",
]

# How these kopf names behave on kubeop where it is not as in kopf (read by scripts/kopf_compat.py
# into the compatibility table of docs/migration/from-kopf.md; a name not listed behaves as kopf's).
_DIFFERS = {
    "run": "Peering (`peering_name=`, `standalone=False`) is leader election with a Lease named "
    "`kopf-<peering name>`: handling starts once the Lease is held; `priority=` has no effect (the "
    "first replica leads, the others wait until its Lease expires).",
    "operator": "As `kopf.run()`: peering is leader election with a Lease, `priority=` has no effect.",
    "configure": "`log_format=`, `log_prefix=` and `log_refkey=` are accepted; the lines always have "
    "kopf's full format (`[time] logger [LEVEL] [namespace/name] message`).",
    "LogFormat": "Accepted by `kopf.configure()`; the lines keep the full format.",
}
# kopf names that exist and raise an error naming what to use instead.
_UNSUPPORTED = {
    "spawn_tasks": "`await kopf.operator(...)` (the operator runs as one task).",
    "run_tasks": "`await kopf.operator(...)` (the operator runs as one task).",
}

Flag = asyncio.Event | threading.Event | asyncio.Future[Any] | concurrent.futures.Future[Any]
"""kopf's flag types for ``stop_flag`` and ``ready_flag``."""

log = logging.getLogger("kubeop.kopf")
probe_log = logging.getLogger("kubeop.kopf.activities.probe")

# The Manager's keywords of before the options objects: given one, kopf's defaults use them too.
_SERVING_KEYWORDS = frozenset(("metrics_address", "health_address", "metrics_secure", "metrics_cert_dir"))
_ELECTION_KEYWORDS = frozenset(
    ("leader_election_id", "leader_election_namespace", "lease_duration", "renew_deadline", "retry_period")
)


def build_manager(
    *,
    registry: Registry | None = None,
    namespace: NamespacePattern | None = None,
    namespaces: Iterable[NamespacePattern] = (),
    memo: Mapping[str, Any] | None = None,
    client: Client | None = None,
    workers: int | None = None,
    settings: OperatorSettings | None = None,
    _resolved: Mapping[str, list[ApiResource]] | None = None,
    **manager_options: Any,
) -> Manager:
    """A Manager that runs ``registry``'s handlers (the default registry: the decorated ones)
    in ``namespaces`` (names or kopf's patterns, see :mod:`kubeop.kopf.namespaces`; none: all)."""
    scope = Namespaces.of(namespaces=namespaces, namespace=namespace)
    targets = scope.targets()
    registry = registry if registry is not None else default_registry()
    settings = settings if settings is not None else current_settings()
    if not (len(registry) or admission_handlers(registry) or indexing_handlers(registry)):
        raise ValueError("no kopf handlers are registered: decorate functions with @kopf.on.* first")
    if workers is None:
        workers = settings.execution.max_workers or 16
    manager_options.setdefault("name", "kopf-operator")
    if any(key in manager_options for key in _SERVING_KEYWORDS):  # the keywords of before
        manager_options.setdefault("metrics_address", None)
        manager_options.setdefault("health_address", None)
    else:
        manager_options.setdefault("serving", Serving(metrics_address=None, health_address=None))
    manager = Manager(client, **manager_options)
    admitting = admission_handlers(registry)
    if settings.admission.server is not None and admitting:
        manager.add(_Admission(admitting, settings, memo or {}, _resolved))
    elif settings.admission.managed is not None and admitting:
        raise ValueError(
            f"settings.admission.managed={settings.admission.managed!r} needs a server to point the "
            "configurations at: set settings.admission.server = kopf.WebhookAutoServer() (or another)"
        )
    else:
        # kubeop.webhook (pydantic, cryptography: ~20 MB of RSS) only when there is something to serve
        hooks = admission_webhooks(admitting, memo=memo or {}, resources=_resolved) if admitting else ()
        for hook in hooks:
            manager.add_webhook(hook)
    indexing = indexing_handlers(registry)
    indexes = IndexSet(indexing, memo or {}, resolved=_resolved) if indexing else None
    if indexes is not None:
        manager.add(_Indexing(indexes, scope))
    spawning: list[Processor] = []
    for resource, keys in _served(registry, _resolved).items():
        processor = Processor(
            resource,
            [_bind(h, resource) for k in keys for h in registry.changing(k)],
            memo=Memo(memo or {}),
            spawners=[_bind(h, resource) for k in keys for h in registry.spawning(k)],
            finalizer=settings.persistence.finalizer,
            indexes=indexes,
        )
        for target in targets:  # one informer per named namespace, else one for all
            only = scope.predicate(target)
            controller = (
                Controller.for_(resource, *([only] if only else []), namespace=target)
                .named(f"kopf-{resource}" if len(targets) == 1 else f"kopf-{resource}@{target}")
                .max_concurrent(workers)
                .reconcile(processor.reconcile)
            )
            manager.add(controller)
        if processor.spawners:
            spawning.append(processor)
        watchers = [_bind(h, resource) for k in keys for h in registry.watching(k)]
        if watchers:
            manager.add(_Dispatch(resource, scope, EventDispatcher(watchers, memo or {})))
    if spawning:
        manager.add(_Daemons(spawning))
    return manager


H = TypeVar("H", ChangingHandler, SpawningHandler, WatchingHandler)


def _served(registry: Registry, resolved: Mapping[str, list[ApiResource]] | None) -> dict[str, list[str]]:
    """Each resource to serve and the registry's selector keys that select it (without
    ``resolved``, each key names its resource as it is)."""
    out: dict[str, list[str]] = {}
    for key in registry.resources():
        found = resolved.get(key) if resolved is not None else None
        if found is None and key.startswith("Selector("):
            raise ValueError(
                f"handlers for {key} select resources by discovery: run them with kopf.operator() or "
                "kopf.run(), which resolve selectors at start, or name one resource (plural.version.group)"
            )
        names = [key] if found is None else [f"{r.plural}.{r.version}.{r.group}" for r in found]
        for name in names:
            out.setdefault(name, []).append(key)
    return out


def _bind(handler: H, resource: str) -> H:
    return handler if handler.resource == resource else replace(handler, resource=resource)


async def _resolve(registry: Registry, client: Client) -> dict[str, list[ApiResource]]:
    """The handlers' selectors (of the resource, indexing and admission handlers) resolved against
    the server's discovery, as kopf does at start (refreshing discovery once if something is not
    found: a CRD installed a moment ago)."""
    watched = [*registry.resources(), *(h.resource for h in indexing_handlers(registry))]
    admitted = [h.resource for h in admission_handlers(registry)]
    keys = list(dict.fromkeys([*watched, *admitted]))
    unwatched = set(admitted) - set(watched)
    patching = {k for k in keys if any(registry.changing(k)) or any(registry.spawning(k))}
    mapper = await client.discovery.mapper()
    try:
        return resolve_all(keys, mapper.resources, mapper.groups, patching=patching, unwatched=unwatched)
    except UnresolvedResource:
        mapper = await client.discovery.refresh()
        return resolve_all(keys, mapper.resources, mapper.groups, patching=patching, unwatched=unwatched)


async def _until_stop(work: Awaitable[None], stop: asyncio.Event) -> None:
    """Run ``work`` until ``stop`` is set (then cancel it); its error is raised."""
    working = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({working, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (working, stopping):
            task.cancel()
        await asyncio.gather(working, stopping, return_exceptions=True)
    failed = working.exception() if working.done() and not working.cancelled() else None
    if failed is not None:
        raise failed


@dataclass(eq=False)
class _Dispatch:
    """The event handlers of one resource: a runnable subscribing them to the resource's shared
    informers as the caches start (objects already cached are replayed), on every replica."""

    resource: str
    scope: Namespaces
    dispatcher: EventDispatcher
    phase: Phase = Phase.CACHES
    needs_leader: bool = False

    @property
    def name(self) -> str:
        return f"kopf events {self.resource}"

    def for_cluster(self, name: str) -> _Dispatch:
        """This resource's event handlers on a fleet's cluster ``name``: their own dispatch (queue,
        order), ``cluster=name`` in their kwargs."""
        d = self.dispatcher
        return replace(self, dispatcher=EventDispatcher(d.handlers, d.memo, cluster=name))

    async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
        await _until_stop(self._feed(cluster), stop)

    async def _feed(self, cluster: Cluster) -> None:
        if self.dispatcher.cluster:  # a fleet's: the handlers' events go to their cluster
            use_recorder(cluster.recorder, here=True)
        res = await cluster.client.resource(self.resource)
        self.dispatcher.resource = of_api_resource(res)
        for target in self.scope.targets() if res.namespaced else [None]:
            informer = cluster.cache.informer(res, namespace=target)
            informer.add_event_handler(filtered(self.dispatcher.informer_handler(), self.scope, target))
        await self.dispatcher.run()


@dataclass(eq=False)
class _Indexing:
    """The ``@kopf.index`` indices: a runnable feeding them from the shared informers, started
    once their first listing is indexed (the handlers using them wait for that too)."""

    indexes: IndexSet
    scope: Namespaces
    phase: Phase = Phase.CACHES
    needs_leader: bool = False
    name: str = "kopf indices"

    parent: IndexSet | None = None  # a fleet's cluster's: the indices it was made of
    cluster: str = ""

    def for_cluster(self, name: str) -> _Indexing:
        """The indices of a fleet's cluster ``name``: fed from its informers alone, seen by its
        handlers alone, dropped when it is disengaged."""
        return replace(self, indexes=self.indexes.for_cluster(name), parent=self.indexes, cluster=name)

    async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
        try:
            await _until_stop(self.indexes.run(cluster, self.scope), stop)
        finally:
            if self.parent is not None:
                self.parent.forget(self.cluster, self.indexes)

    async def started(self) -> None:
        await self.indexes.ready.wait()


@dataclass(eq=False)
class _Daemons:
    """The daemons and timers of the processors: on a fleet's cluster, stopped when the cluster
    is disengaged (after its controllers stopped). On one cluster it only waits: they stop when
    the operator does (:func:`run_manager`), as in kopf."""

    processors: list[Processor]
    cluster: str = ""
    phase: Phase = Phase.CACHES
    needs_leader: bool = False
    name: str = "kopf daemons"

    def for_cluster(self, name: str) -> _Daemons:
        return replace(self, cluster=name)

    async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
        await stop.wait()
        if self.cluster:
            await asyncio.gather(*(p.stop_cluster(self.cluster) for p in self.processors))


@dataclass(eq=False)
class _Admission:
    """The admission handlers served with ``settings.admission.server`` (kubeop.kopf.serving) on
    every replica; at stop the webhook configurations are cleaned up while it still serves, and an
    admission server that cannot serve fails the operator, as kopf's does."""

    handlers: list[AdmissionHandler]
    settings: OperatorSettings
    memo: Mapping[str, Any]
    resolved: Mapping[str, list[ApiResource]] | None
    phase: Phase = Phase.SERVERS
    needs_leader: bool = False
    name: str = "kopf admission"

    async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
        from kubeop.kopf.serving import serve_admission

        await serve_admission(
            self.handlers,
            settings=self.settings,
            client=cluster.api,
            memo=self.memo,
            stop=stop,
            resolved=self.resolved,
        )


def dispatchers(manager: Manager) -> list[_Dispatch]:
    """The event handlers' dispatchers of a manager built by :func:`build_manager`."""
    return [r for r in manager.runnables if isinstance(r, _Dispatch)]


def processors(manager: Manager) -> list[Processor]:
    """The kopf processors of a manager built by :func:`build_manager` (their write counters)."""
    found = (getattr(c.reconciler, "__self__", None) for c in manager.controllers)
    return list({id(p): p for p in found if isinstance(p, Processor)}.values())


def _index_set(manager: Manager) -> IndexSet | None:
    """The ``@kopf.index`` indices of a manager built by :func:`build_manager`, if it has any."""
    return next((r.indexes for r in manager.runnables if isinstance(r, _Indexing)), None)


async def run_manager(manager: Manager, stop_flag: asyncio.Event | None = None) -> None:
    """Run a manager from :func:`build_manager`; its daemons and timers stop with it."""
    try:
        await manager.start(stop_flag)
    finally:
        await asyncio.gather(*(p.stop_all() for p in processors(manager)), return_exceptions=True)


class LogFormat(enum.Enum):
    """kopf's log formats (``configure(log_format=...)``; kubeop's lines are always FULL's)."""

    PLAIN = "%(message)s"
    FULL = "[%(asctime)s] %(name)-20.20s [%(levelname)-8.8s] %(message)s"
    JSON = "-json-"


_NO_TASKS = (
    "kopf.{} is not supported by kubeop.kopf: kubeop runs the operator as one task, not as kopf's "
    "task set; use `await kopf.operator(registry=..., settings=..., stop_flag=..., ready_flag=...)` "
    "(or kopf.run() in a thread) instead"
)


async def spawn_tasks(**_: Any) -> list[asyncio.Task[Any]]:
    """kopf's low-level task spawner: an error naming :func:`operator`, which kubeop.kopf has instead."""
    raise NotImplementedError(_NO_TASKS.format("spawn_tasks()"))


async def run_tasks(root_tasks: Any = None, **_: Any) -> None:
    """kopf's low-level task runner: an error naming :func:`operator`, which kubeop.kopf has instead."""
    raise NotImplementedError(_NO_TASKS.format("run_tasks()"))


def configure(
    *,
    debug: bool | None = None,
    verbose: bool | None = None,
    quiet: bool | None = None,
    log_format: Any = None,
    log_prefix: bool | None = None,
    log_refkey: str | None = None,
) -> None:
    """kopf's logging setup: one stderr handler on the root logger, DEBUG with ``verbose``/
    ``debug``, WARNING with ``quiet``, INFO otherwise (``log_format`` etc. are accepted: kubeop's
    lines are ``[time] logger [LEVEL] [namespace/name] message``)."""
    level = logging.DEBUG if debug or verbose else logging.WARNING if quiet else logging.INFO
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_kopf_configured", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler._kopf_configured = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)


LOG_FORMAT = "[%(asctime)s] %(name)-20.20s [%(levelname)-8.8s] %(message)s"


_library_default: list[object] = [None]
"""The kubernetes library's default configuration as the last default login left it."""


def _set_by_operator(configuration: Any) -> bool:
    """Whether the kubernetes library's default configuration was set by someone else than the
    default login, to something other than the library's blank one."""
    current = getattr(configuration, "_default", None)
    if current is None or current is _library_default[0]:
        return False
    try:
        return bool(current.host != configuration().host)
    except Exception:  # not the library's Configuration: nothing to keep
        return False


def login_via_kubeop(logger: logging.Logger, **_: Any) -> ClientConfig:
    """The login handler used when none is registered (kopf's ``login_via_client`` analogue):
    kubeop's own configuration, in kubectl's order (``$KUBECONFIG``, ``~/.kube/config``, the
    in-cluster service account). When the ``kubernetes`` library is installed, its default
    client is configured too (as kopf's fallback login does), so that handlers calling
    ``kubernetes.client.CoreV1Api()`` without loading a configuration work as under kopf: at
    once if the operator imported it, else when it first does. A default the operator set
    itself (``kubernetes.config.load_kube_config(context=...)`` before) is left as it is."""
    config = load_config()
    logger.debug("Client is configured by kubeop from %s.", config.source)

    def configure_kubernetes() -> None:
        configuration = getattr(getattr(sys.modules.get("kubernetes"), "client", None), "Configuration", None)
        if _set_by_operator(configuration):
            logger.debug("The kubernetes library's default client is left as the operator configured it.")
            return
        try:
            login_via_client(logger=logger)
        except Exception as exc:  # LoginError, or the library's own
            logger.debug("The kubernetes library's default client is not configured: %s", exc)
        else:
            _library_default[0] = getattr(configuration, "_default", None)

    # Now if the operator imported the library, else when it does (never importing it here:
    # ~20 MB for an operator that does not use it).
    when_imported("kubernetes", configure_kubernetes)
    return config.with_options(qps=None)


async def login(registry: Registry, *, memo: Memo, settings: OperatorSettings) -> Client:
    """The operator's client, from the login handlers (or :func:`login_via_kubeop` when none is
    registered). The handlers' :class:`~kubeop.kopf.ConnectionInfo` go into a
    :class:`~kubeop.kopf.credentials.Vault`, which runs the handlers again when the API server
    answers 401 or the credentials expire; a ``ClientConfig`` (kubeop's own configuration) is
    used as it is: kubeop renews its token files and exec credentials itself."""
    handlers = registry.activities(Activity.AUTHENTICATION) or [
        ActivityHandler(fn=login_via_kubeop, id="login_via_kubeop", activity=Activity.AUTHENTICATION)
    ]
    activity_log = logging.getLogger("kubeop.kopf.activities.authentication")

    async def run_handlers() -> dict[str, Any]:
        results = await run_activity(
            handlers,
            Activity.AUTHENTICATION,
            logger=activity_log,
            kwargs=_activity_kwargs(activity_log, memo, settings),
        )
        return {hid: info for hid, info in results.items() if info is not None}

    activity_log.info("Initial authentication has been initiated.")
    results = await run_handlers()
    for info in results.values():
        if isinstance(info, ClientConfig):
            activity_log.info("Initial authentication has finished.")
            return Client(info)
    vault = Vault(run_handlers)
    vault.populate(results)
    if not results:
        activity_log.warning(
            "Initial authentication has failed: no credentials were retrieved from the login handlers."
        )
        raise LoginError(
            "no login handler returned credentials: return a kopf.ConnectionInfo from @kopf.on.login"
        )
    activity_log.info("Initial authentication has finished.")
    return await connect(vault)


def _activity_kwargs(logger: logging.Logger, memo: Memo, settings: OperatorSettings) -> dict[str, Any]:
    return {"logger": logger, "memo": memo, "settings": settings}


def _set(flag: Flag | None) -> None:
    if flag is None:
        return
    if isinstance(flag, asyncio.Event | threading.Event):
        flag.set()
    elif not flag.done():
        flag.set_result(None)


async def _wait(flag: Flag, into: asyncio.Event) -> None:
    """Set ``into`` when ``flag`` is set (a threading.Event is polled, as kopf does)."""
    if isinstance(flag, asyncio.Event):
        await flag.wait()
    elif isinstance(flag, threading.Event):
        while not flag.is_set():  # noqa: ASYNC110 - a thread's event cannot be awaited
            await asyncio.sleep(0.1)
    else:
        await asyncio.wrap_future(flag) if isinstance(flag, concurrent.futures.Future) else await flag
    into.set()


async def operator(
    *,
    registry: Registry | None = None,
    settings: OperatorSettings | None = None,
    namespace: NamespacePattern | None = None,
    namespaces: Iterable[NamespacePattern] = (),
    clusterwide: bool = False,
    standalone: bool | None = None,
    priority: int | None = None,
    peering_name: str | None = None,
    liveness_endpoint: str | None = None,
    memo: Mapping[str, Any] | None = None,
    stop_flag: Flag | None = None,
    ready_flag: Flag | None = None,
    **manager_options: Any,
) -> None:
    """Run the handlers until ``stop_flag`` is set (kopf's ``kopf.operator()``)."""
    registry = registry if registry is not None else default_registry()
    settings = settings if settings is not None else OperatorSettings()
    scope = Namespaces.of(namespaces=namespaces, namespace=namespace, clusterwide=clusterwide)
    if peering_name is not None:
        settings.peering.name = peering_name
    if priority is not None:
        settings.peering.priority = priority
    if standalone is not None:
        settings.peering.standalone = standalone
    elif peering_name is None and not settings.peering.mandatory:
        settings.peering.standalone = True  # kopf: standalone when no peering is set up
    if not settings.peering.standalone and any(key in manager_options for key in _ELECTION_KEYWORDS):
        manager_options.setdefault("leader_election", True)  # with the keywords of before
        manager_options.setdefault("leader_election_id", f"kopf-{settings.peering.name}")
        if settings.peering.namespace:
            manager_options.setdefault("leader_election_namespace", settings.peering.namespace)
    elif not settings.peering.standalone and manager_options.get("leader_election", True) is True:
        manager_options["leader_election"] = LeaderElection(
            id=f"kopf-{settings.peering.name}", namespace=settings.peering.namespace or None
        )
    if liveness_endpoint:
        parse_endpoint(liveness_endpoint)  # a bad URL fails before anything starts
    token = use_settings(settings)
    root_memo = Memo(memo or {})
    stop = asyncio.Event()
    ours = asyncio.current_task()
    before = asyncio.all_tasks()
    watching = asyncio.create_task(_wait(stop_flag, stop)) if stop_flag is not None else None
    client: Client | None = None
    liveness: ProbeServer | None = None
    started = False
    try:
        log.debug("Starting kopf's handlers on kubeop.")
        startup_log = logging.getLogger("kubeop.kopf.activities.startup")
        await run_activity(
            registry.activities(Activity.STARTUP),
            Activity.STARTUP,
            logger=startup_log,
            kwargs=_activity_kwargs(startup_log, root_memo, settings),
            stop=stop,
        )
        started = True
        client = await login(registry, memo=root_memo, settings=settings)
        resolved = await _resolve(registry, client)
        manager = build_manager(
            _resolved=resolved,
            registry=registry,
            namespaces=scope.patterns,
            memo=root_memo,
            client=client,
            settings=settings,
            **manager_options,
        )
        if liveness_endpoint:
            indices = _indices(manager)
            probes = Probes(
                registry.activities(Activity.PROBE),
                lambda: dict(_activity_kwargs(probe_log, root_memo, settings), **indices),
            )
            liveness = await serve_liveness(liveness_endpoint, probes)
        _set(ready_flag)
        await run_manager(manager, stop)
    finally:
        if liveness is not None:
            await liveness.stop()
        try:
            if started:
                cleanup_log = logging.getLogger("kubeop.kopf.activities.cleanup")
                await run_activity(
                    registry.activities(Activity.CLEANUP),
                    Activity.CLEANUP,
                    logger=cleanup_log,
                    kwargs=_activity_kwargs(cleanup_log, root_memo, settings),
                )
        finally:
            if watching is not None:
                watching.cancel()
            log.debug("Root tasks are stopped: finishing normally; tasks left: set()")
            await _stop_hung({t for t in asyncio.all_tasks() - before if t is not ours and t is not watching})
            if client is not None:
                await client.close()
            reset_settings(token)


async def _stop_hung(tasks: set[asyncio.Task[Any]], grace: float = 5.0) -> None:
    """The tasks the handlers left running get ``grace`` seconds, then are cancelled (as kopf)."""
    if not tasks:
        log.debug("Hung tasks stopping is skipped: no tasks given.")
        return
    _, pending = await asyncio.wait(tasks, timeout=grace)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.wait(pending, timeout=grace)
    log.debug("Hung tasks are stopped: %d cancelled after %.0f s.", len(pending), grace)


def _indices(manager: Manager) -> Mapping[str, Any]:
    """The ``@kopf.index`` indices of a manager from :func:`build_manager`, by handler id."""
    found = _index_set(manager)
    return found.indices if found is not None else {}


def run(
    *,
    registry: Registry | None = None,
    settings: OperatorSettings | None = None,
    namespace: NamespacePattern | None = None,
    namespaces: Iterable[NamespacePattern] = (),
    clusterwide: bool = False,
    standalone: bool | None = None,
    priority: int | None = None,
    peering_name: str | None = None,
    liveness_endpoint: str | None = None,
    memo: Mapping[str, Any] | None = None,
    stop_flag: Flag | None = None,
    ready_flag: Flag | None = None,
    **manager_options: Any,
) -> None:
    """Run the handlers until SIGTERM/SIGINT or ``stop_flag`` (kopf's ``kopf.run()``).
    ``standalone=False`` turns on leader election (kubeop's Lease-based one, in place of kopf's
    peering). Signals are handled only when called from the main thread."""

    async def main() -> None:
        stop = asyncio.Event()
        if threading.current_thread() is threading.main_thread():
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
        waiting = asyncio.create_task(_wait(stop_flag, stop)) if stop_flag is not None else None
        try:
            await operator(
                registry=registry,
                settings=settings,
                namespace=namespace,
                namespaces=namespaces,
                clusterwide=clusterwide,
                standalone=standalone,
                priority=priority,
                peering_name=peering_name,
                liveness_endpoint=liveness_endpoint,
                memo=memo,
                stop_flag=stop,
                ready_flag=ready_flag,
                **manager_options,
            )
        finally:
            if waiting is not None:
                waiting.cancel()

    asyncio.run(main())
