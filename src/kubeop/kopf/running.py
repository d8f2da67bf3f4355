"""Running kopf handlers: a kubeop Manager with one controller per handled resource.

``kopf.run()`` blocks until SIGTERM/SIGINT; ``await kopf.operator(stop_flag=event)`` runs inside
a loop; ``kopf.build_manager()`` gives the Manager for embedding (add native controllers,
webhooks, checks). Each resource gets one shared informer, one level-based work queue and one
:class:`~kubeop.kopf.processing.Processor` as its reconciler.
"""

from __future__ import annotations

import asyncio
import signal
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeop.client import Client
from kubeop.controller import Controller
from kubeop.kopf.processing import Memo, Processor
from kubeop.kopf.registry import Registry, default_registry
from kubeop.kopf.watching import EventDispatcher
from kubeop.manager import Manager

__all__ = ["build_manager", "operator", "processors", "run", "run_manager"]


def build_manager(
    *,
    registry: Registry | None = None,
    namespace: str | None = None,
    memo: Mapping[str, Any] | None = None,
    client: Client | None = None,
    workers: int = 4,
    **manager_options: Any,
) -> Manager:
    """A Manager that runs ``registry``'s handlers (the default registry: the decorated ones)."""
    registry = registry if registry is not None else default_registry()
    if not len(registry):
        raise ValueError("no kopf handlers are registered: decorate functions with @kopf.on.* first")
    manager_options.setdefault("name", "kopf-operator")
    manager_options.setdefault("metrics_address", None)
    manager_options.setdefault("health_address", None)
    manager = Manager(client, **manager_options)
    for resource in registry.resources():
        processor = Processor(
            resource,
            list(registry.changing(resource)),
            memo=Memo(memo or {}),
            spawners=list(registry.spawning(resource)),
        )
        controller = (
            Controller.for_(resource, namespace=namespace)
            .named(f"kopf-{resource}")
            .max_concurrent(workers)
            .reconcile(processor.reconcile)
        )
        manager.add(controller)
        watchers = list(registry.watching(resource))
        if watchers:
            dispatch = _Dispatch(resource, namespace, EventDispatcher(watchers, memo or {}))
            _DISPATCHERS.setdefault(manager, []).append(dispatch)
    return manager


@dataclass
class _Dispatch:
    resource: str
    namespace: str | None
    dispatcher: EventDispatcher


_DISPATCHERS: weakref.WeakKeyDictionary[Manager, list[_Dispatch]] = weakref.WeakKeyDictionary()


def dispatchers(manager: Manager) -> list[_Dispatch]:
    """The event handlers' dispatchers of a manager built by :func:`build_manager`."""
    return list(_DISPATCHERS.get(manager, ()))


async def _watch(manager: Manager, d: _Dispatch) -> None:
    """Subscribe the event handlers to the resource's shared informer once the manager has its
    cache (objects already cached are replayed), then feed them."""
    while manager.cache is None or manager.client is None:  # noqa: ASYNC110 - no event to await
        await asyncio.sleep(0.02)
    res = await manager.client.resource(d.resource)
    informer = manager.cache.informer(res, namespace=d.namespace)
    informer.add_event_handler(d.dispatcher.informer_handler())
    await d.dispatcher.run()


def processors(manager: Manager) -> list[Processor]:
    """The kopf processors of a manager built by :func:`build_manager` (their write counters)."""
    found = (getattr(c.reconciler, "__self__", None) for c in manager.controllers)
    return [p for p in found if isinstance(p, Processor)]


async def operator(
    *,
    registry: Registry | None = None,
    namespace: str | None = None,
    memo: Mapping[str, Any] | None = None,
    stop_flag: asyncio.Event | None = None,
    **manager_options: Any,
) -> None:
    """Run the handlers until ``stop_flag`` is set."""
    manager = build_manager(registry=registry, namespace=namespace, memo=memo, **manager_options)
    await run_manager(manager, stop_flag)


async def run_manager(manager: Manager, stop_flag: asyncio.Event | None = None) -> None:
    """Run a manager from :func:`build_manager`; its daemons and timers stop with it."""
    tasks = [
        asyncio.create_task(_watch(manager, d), name=f"kopf events {d.resource}")
        for d in dispatchers(manager)
    ]
    try:
        await manager.start(stop_flag)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.gather(*(p.stop_all() for p in processors(manager)), return_exceptions=True)


def run(
    *,
    registry: Registry | None = None,
    namespace: str | None = None,
    memo: Mapping[str, Any] | None = None,
    standalone: bool = True,
    clusterwide: bool = False,
    **manager_options: Any,
) -> None:
    """Run the handlers until SIGTERM/SIGINT. ``standalone=False`` turns on leader election
    (kubeop's Lease-based one, in place of kopf's peering)."""
    if clusterwide and namespace:
        raise ValueError("clusterwide=True and namespace= exclude each other")
    if not standalone:
        manager_options.setdefault("leader_election", True)
    manager = build_manager(registry=registry, namespace=namespace, memo=memo, **manager_options)

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await run_manager(manager, stop)

    asyncio.run(main())
