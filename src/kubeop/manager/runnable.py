"""Runnable: anything a Manager runs beside (or as) its controllers, on the run's Cluster.

    class Dashboard:
        phase = Phase.SERVERS            # every replica, before the caches sync
        needs_leader = False

        async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
            server = await serve(cluster)
            await stop.wait()
            await server.close()

    manager.add(Dashboard())
    manager.add(runnable(report_every_minute))    # a coroutine function (cluster, stop)

The Manager starts its runnables phase by phase (:class:`Phase`: the servers, then the caches,
then leader election or shard membership, then the work that needs the lease), and stops them in
reverse order: each phase's ``stop`` event is set, and its runnables awaited, before the phase
started before it is stopped. ``run`` returns once ``stop`` is set; raising ends the whole run
(the Manager stops everything and raises it). A runnable that needs the lease is cancelled
instead when the lease is lost (it must not act any more).

What a runnable may get wrong: returning before ``stop`` ends that runnable alone, and the
Manager runs on (as controller-runtime's, where a runnable returning nil is fine). One still
running ``Runtime.graceful_shutdown_timeout`` + 5 s after its ``stop`` is set is cancelled and
named in an error log, and ``Manager.start()`` raises TimeoutError naming it once the rest has
stopped. A runnable that blocks the event loop (a synchronous call, a busy loop) blocks every
other one, the lease renewal included, so that the lease may be lost: run blocking work with
``await asyncio.to_thread(...)``. A runnable is added before ``start()``, once, as an instance
whose ``phase`` is a :class:`Phase`; ``Manager.add`` refuses otherwise.

A runnable may also define ``async started()``: the Manager awaits it before starting the next
phase (a server that listens, a controller whose caches synced); without it a runnable counts as
started once its ``run`` is.
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from kubeop.cluster import Cluster

__all__ = ["Phase", "Runnable", "runnable"]


class Phase(enum.IntEnum):
    """When a runnable starts (in this order; stopped in the reverse one)."""

    SERVERS = 1
    """Every replica, before the caches sync: webhooks and their certificates, metrics, probes."""
    CACHES = 2
    """Every replica: the shared informers, indexes."""
    ELECTION = 3
    """Leader election or shard membership: the next phase starts once the lease is held."""
    LEADER = 4
    """While this replica leads (or holds its shards): controllers and other leader-gated work."""


@runtime_checkable
class Runnable(Protocol):
    """Something the Manager runs (see the module docstring)."""

    @property
    def phase(self) -> Phase:
        """When the Manager starts it (see :class:`Phase`)."""

    @property
    def needs_leader(self) -> bool:
        """Run only while this replica leads or holds its shards (in :attr:`Phase.LEADER`)."""
        ...

    async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set (or until done); an exception stops the Manager, which raises it."""


RunFn = Callable[["Cluster", asyncio.Event], Awaitable[None]]


@dataclass(frozen=True)
class _FunctionRunnable:
    fn: RunFn
    phase: Phase
    needs_leader: bool
    name: str

    async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
        await self.fn(cluster, stop)


def runnable(
    fn: RunFn, *, phase: Phase = Phase.LEADER, needs_leader: bool = True, name: str | None = None
) -> Runnable:
    """A :class:`Runnable` running ``await fn(cluster, stop)`` (named ``name``, default the
    function's name, in the logs)."""
    if not callable(fn) or (inspect.isfunction(fn) and not inspect.iscoroutinefunction(fn)):
        raise TypeError(
            f"runnable() takes a coroutine function (async def f(cluster, stop)), got {fn!r}: "
            "declare it async, and run blocking work in it with await asyncio.to_thread(...)"
        )
    if needs_leader and phase != Phase.LEADER:
        raise ValueError(f"runnable({_name(fn)}): needs_leader=True runs in Phase.LEADER, not {phase.name}")
    return _FunctionRunnable(fn, phase, needs_leader, name or _name(fn))


def _name(fn: object) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def name_of(item: object) -> str:
    """A runnable's name in the logs: its ``name`` attribute, else its type's."""
    name = getattr(item, "name", None)
    return name if isinstance(name, str) else type(item).__name__
