"""Sharding: replicas of an operator split the objects between them, each reconciled by one.

    manager = Manager(name="widget-operator", sharding=Sharding())
    manager.add(Controller.for_(Widget).owns(ConfigMap).reconcile(reconcile))

Every replica runs every controller; each object key (``namespace/name``, or ``Sharding(key=...)``)
belongs to one live replica, picked by rendezvous hashing (:mod:`kubeop.manager.rendezvous`)
over the members of a ring kept in Leases (:mod:`kubeop.manager.membership`). A replica's event
handlers enqueue only its own keys; when replicas join or leave, keys move under the handover
protocol of :mod:`kubeop.manager.handover`, which never lets two replicas reconcile one key at
the same time: the old owner finishes its running reconciles of moved keys before the new one
starts any. Controllers named in ``Sharding(unsharded=...)`` (cluster-wide singletons) are
reconciled whole by one replica, chosen the same way (key ``controller:<name>``), so they move
between replicas under the same protocol.

A replica whose Lease was not renewed within ``renew_deadline`` refuses its controllers' writes
and stops (:class:`~kubeop.manager.membership.ShardLeaseLost`), as a leader does.

Visible state: the ``kubeop_shard_*`` metrics (members, ring generation, objects owned per
controller, handovers), a log line per ring generation, the ring Lease ``<name>-shards``
(``kubectl get lease <name>-shards -o yaml`` lists the members), and on each object that moved
to a replica a ``ShardAcquired`` Event naming the replica and the ring generation
(``kubectl describe`` shows it). An Event rather than a label: a label is one more write to the
object itself per move and per new object, which bumps its resourceVersion, wakes every watcher
of the kind (this operator's other replicas included) and races users' own writes; an Event is a
separate object, written only when a key moves (``Sharding(events=False)``: none).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from kubeop.cache import SharedInformerFactory
from kubeop.client import Client
from kubeop.controller import EventRecorder, Request, request_for
from kubeop.manager.membership import Membership, ShardLeaseLost
from kubeop.manager.rendezvous import owner

__all__ = ["Sharder", "Sharding"]

log = logging.getLogger("kubeop.sharding")

KeyFn = Callable[[str, Request], str]


@dataclass(frozen=True)
class Sharding:
    """The Manager's sharding option (see the module docstring).

    ``name``: the ring (default: the manager's name); ``namespace``: where its Leases live
    (default: the client's namespace, else ``default``); ``identity``: this replica's (default:
    host name and random digits; must be usable in a Lease name); ``unsharded``: names of the
    controllers that one replica reconciles whole; ``key``: ``key(controller, request)`` the
    string hashed to pick the owner (default ``namespace/name``: objects sharing a key function's
    value always share a replica).
    """

    name: str | None = None
    namespace: str | None = None
    identity: str | None = None
    unsharded: Collection[str] = field(default_factory=frozenset)
    key: KeyFn | None = None
    events: bool = True


class _Series:
    def __init__(self, registry: CollectorRegistry, ring: str) -> None:
        self.members = Gauge(
            "kubeop_shard_members", "Members of the shard ring", ["ring"], registry=registry
        ).labels(ring)
        self.generation = Gauge(
            "kubeop_shard_generation",
            "Generation of the shard ring this replica works under",
            ["ring"],
            registry=registry,
        ).labels(ring)
        self.handovers = Counter(
            "kubeop_shard_handovers",
            "Ring generations this replica settled into (each a handover of keys)",
            ["ring"],
            registry=registry,
        ).labels(ring)
        self.owned = Gauge(
            "kubeop_shard_owned_objects",
            "Cached primary objects this replica owns, per controller",
            ["controller"],
            registry=registry,
        )


class Sharder:
    """Runs this replica's membership and answers its controllers (a
    :class:`kubeop.controller.shard.ShardGate`)."""

    def __init__(
        self,
        options: Sharding,
        client: Client,
        cache: SharedInformerFactory,
        *,
        name: str,
        namespace: str,
        lease_duration: float,
        renew_deadline: float,
        retry_period: float,
        registry: CollectorRegistry | None = None,
        recorder: EventRecorder | None = None,
    ) -> None:
        for controller in options.unsharded:
            if not isinstance(controller, str):
                raise TypeError(f"Sharding(unsharded=...) takes controller names, got {controller!r}")
        self.options = options
        self.membership = Membership(
            client,
            cache,
            options.name or name,
            options.namespace or namespace,
            identity=options.identity,
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=retry_period,
            on_change=self._changed,
        )
        self.handover = self.membership.handover
        self._unsharded = frozenset(options.unsharded)
        self._key_fn = options.key
        self._attached: dict[str, Callable[[], Sequence[Any]]] = {}
        self._recorder = recorder if options.events else None
        # per controller, the members of the last generation whose keys it enqueued: a replica
        # that settled before its caches synced has enqueued (and announced) nothing yet
        self._worked_under: dict[str, tuple[str, ...]] = {}
        self._enqueued_for = 0  # the generation whose owned keys were enqueued
        self._closing = False
        self.owned: dict[str, int] = {}  # primary objects owned per controller, at the last handover
        self._series = _Series(registry, self.membership.name) if registry is not None else None

    @property
    def identity(self) -> str:
        return self.membership.identity

    def key(self, controller: str, request: Request) -> str:
        if controller in self._unsharded:
            return f"controller:{controller}"
        if self._key_fn is not None:
            return self._key_fn(controller, request)
        return f"{request.namespace}/{request.name}" if request.namespace else request.name

    # -- ShardGate ------------------------------------------------------------------------------
    def admits(self, controller: str, request: Request) -> bool:
        return self.handover.owns(self.key(controller, request))

    async def begin(self, controller: str, request: Request) -> bool:
        key = self.key(controller, request)
        handover = self.handover
        while True:
            changed = self.membership.changed
            if self._closing or not handover.owns(key):
                return False
            if handover.try_begin(key):
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), 0.5)

    def end(self, controller: str, request: Request) -> None:
        handover = self.handover
        handover.end(self.key(controller, request))
        if handover.generation > handover.acked:
            self.membership.wake()  # maybe drained now: acknowledge

    def attach(self, controller: str, enqueue_owned: Callable[[], Sequence[Any]]) -> None:
        self._attached[controller] = enqueue_owned
        if self.handover.settled() and self._enqueued_for == self.handover.generation:
            self._enqueue(controller, enqueue_owned)

    # -- the rest -------------------------------------------------------------------------------
    def close(self) -> None:
        """Start no more reconciles (the manager is stopping; running ones finish): requests
        waiting for the ring to settle are dropped, the next owner enqueues them."""
        self._closing = True
        self.membership.wake()

    def fence(self) -> None:
        """The client's write guard: no writes from a replica whose Lease may have lapsed."""
        if not self.handover.holds():
            m = self.membership
            raise ShardLeaseLost(
                f"not writing: shard lease {m.namespace}/{m.lease_name} not renewed within "
                f"{m.renew_deadline:.0f} s"
            )

    def _enqueue(self, controller: str, enqueue_owned: Callable[[], Sequence[Any]]) -> None:
        objects = enqueue_owned()
        owned = self.owned[controller] = len(objects)
        if self._series is not None:
            self._series.owned.labels(controller).set(owned)
        recorder = self._recorder
        if recorder is None:
            return
        before = self._worked_under.get(controller, ())
        self._worked_under[controller] = self.handover.members
        generation = self.handover.generation
        for obj in objects:
            was = owner(self.key(controller, request_for(obj)), before) if before else None
            if was != self.identity:
                recorder.event(
                    obj,
                    "Normal",
                    "ShardAcquired",
                    f"reconciled by replica {self.identity} from shard ring generation {generation}"
                    + (f" (was {was})" if was else ""),
                )

    def _changed(self) -> None:
        handover = self.handover
        series = self._series
        if series is not None:
            series.members.set(len(handover.members))
        generation = handover.generation
        if generation == self._enqueued_for or not handover.settled():
            return
        # Settled into a new generation: keys that moved here were filtered out until now.
        self._enqueued_for = generation
        for controller, enqueue_owned in self._attached.items():
            self._enqueue(controller, enqueue_owned)
        if series is not None:
            series.generation.set(generation)
            series.handovers.inc()
        log.info(
            "shard %s settled in generation %d with %d members",
            self.identity,
            generation,
            len(handover.members),
            extra={"owned": dict(self.owned)},
        )

    async def run(self) -> None:
        await self.membership.run()

    async def leave(self) -> None:
        await self.membership.leave()
