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
(``kubectl describe`` shows it; ``Sharding(events=False)``: none).

Two modes. By default (*predicate mode*) every replica watches and caches every object of the
sharded kinds and drops, at its event handlers, the events of keys it does not own: no writes
to the objects, but each replica decodes every event and holds every object.
``Sharding(labels=True)`` (*label mode*, :mod:`kubeop.manager.labeller`): the ring's leader
labels every primary object ``shard.kubeop.io/<ring>=<member>`` and each replica's informers of
a sharded controller's primary kind and of the kinds it ``owns()`` select its own label, so that
it lists, watches and caches only its shard's objects and their children. The children get
their owner's label from the reconciler's client as they are written (no extra write) or from
the labeller. It costs a write per new object and one per moved object and per moved child;
the label is the visible shard (no ShardAcquired Events). The kinds a controller ``watches()``
with its own mapping stay cached whole (their events are filtered as in predicate mode).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubeop.cache import DeletedFinalStateUnknown, FuncHandler, Indexer, SharedInformerFactory
from kubeop.client import Client
from kubeop.controller import EventRecorder, Request, request_for
from kubeop.core.request import label_selector_text
from kubeop.core.resource import ApiResource
from kubeop.manager.labeller import LABEL_PREFIX, ShardLabeller, controller_owner
from kubeop.manager.lease import LeaseTiming
from kubeop.manager.membership import Membership, ShardLeaseLost
from kubeop.manager.options import Sharding  # the option lives with the Manager's others
from kubeop.manager.rendezvous import owner

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["Sharder", "Sharding"]

log = logging.getLogger("kubeop.sharding")


class _Series:
    def __init__(self, registry: CollectorRegistry, ring: str) -> None:
        from prometheus_client import Counter, Gauge  # with the sharder: not at kubeop.manager's import

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
        self.queue_depth = Gauge(
            "kubeop_shard_queue_depth",
            "Requests waiting in this replica's queue, per controller",
            ["controller"],
            registry=registry,
        )
        self.label_writes = Counter(
            "kubeop_shard_label_writes",
            "Shard labels this replica wrote as the ring's labeller (label mode)",
            ["ring"],
            registry=registry,
        ).labels(ring)


@dataclass
class _Shard:
    """A sharded controller's label-selected primary cache (label mode)."""

    store: Indexer
    gone: set[str]  # keys deleted while this replica owned them: reconciled once more


_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


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
            timing=LeaseTiming(lease_duration, renew_deadline, retry_period),
            on_change=self._changed,
        )
        self.handover = self.membership.handover
        self._unsharded = frozenset(options.unsharded)
        self._key_fn = options.key
        self._attached: dict[str, Callable[[], Sequence[Any]]] = {}
        self._recorder = recorder if options.events and not options.labels else None
        self._cache = cache
        self._shards: dict[str, _Shard] = {}
        # label mode: (group, plural) of a kind some controllers own -> (controller, owner's
        # group, owner's kind) for each of them
        self._children: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
        self._primary_kinds: dict[tuple[str, str], str] = {}  # label mode: (group, plural) -> controller
        self.labeller: ShardLabeller | None = None
        if options.labels:
            # (the identity is a label value: Membership accepts member names only)
            if not _LABEL_VALUE.match(self.membership.name):  # a label name's rule is the value's
                raise ValueError(
                    f"Sharding(labels=True): the ring name {self.membership.name!r} cannot name the "
                    f"label {LABEL_PREFIX}<ring> (at most 63 letters, digits, '-', '_' or '.', "
                    "starting and ending with a letter or digit): pass Sharding(name=...) or name the "
                    "manager so"
                )
            self.labeller = ShardLabeller(
                client,
                cache,
                self.membership,
                self.key,
                field_manager=f"{self.membership.name}-labeller",
                on_patch=self._patched,
            )
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

    def label_selector(
        self,
        controller: str,
        resource: ApiResource,
        namespace: str | None,
        selector: str | None,
        *,
        owner: ApiResource | None = None,
    ) -> str | None:
        labeller = self.labeller
        if labeller is None or controller in self._unsharded:
            return selector
        text = label_selector_text(selector)
        own = f"{labeller.label}={self.identity}"
        combined = f"{text},{own}" if text else own
        kind = (resource.group, resource.plural)
        # One label cannot name both an object's own shard and its owner's.
        primary_of = self._primary_kinds.get(kind)
        children = self._children.get(kind)
        clash = None
        if owner is not None and primary_of is not None:
            clash = (primary_of, controller)
        elif owner is None and children:
            clash = (controller, children[0][0])
        if clash is not None:
            raise ValueError(
                f"Sharding(labels=True): {resource.kind or resource.plural} is controller "
                f"{clash[0]!r}'s primary kind and a kind controller {clash[1]!r} owns, and one "
                "shard label cannot follow both: put one of the controllers in "
                "Sharding(unsharded=...), or shard in predicate mode (labels=False)"
            )
        if owner is not None:  # a kind the controller owns: the children of its shard
            self._children.setdefault(kind, []).append((controller, owner.group, owner.kind or ""))
            labeller.add_kind(controller, resource, namespace, text, owner=owner)
            return combined
        self._primary_kinds[kind] = controller
        informer = self._cache.informer(resource, namespace=namespace, label_selector=combined)
        shard = self._shards[controller] = _Shard(informer.store, set())
        owns, key = self.handover.owns, self.key

        def deleted(obj: Any) -> None:
            # Deleted, or its label moved to another replica: only a deletion of a key this
            # replica owns is reconciled (it is no longer in the cache, and that is fine).
            if isinstance(obj, DeletedFinalStateUnknown):
                obj = obj.obj
                if obj is None:
                    return
            req = request_for(obj)
            if owns(key(controller, req)):
                shard.gone.add(f"{req.namespace}/{req.name}" if req.namespace else req.name)

        informer.add_event_handler(FuncHandler(on_delete=deleted))
        labeller.add_kind(controller, resource, namespace, text)
        return combined

    def labels_for(self, resource: ApiResource, obj: dict[str, Any]) -> dict[str, str] | None:
        """The shard label of a child about to be written (the reconciler client's
        ``WritePolicy.labels``): its owner's replica under the newest ring, for an object of a kind a
        sharded controller owns whose controller reference names that controller's primary kind."""
        owners = self._children.get((resource.group, resource.plural))
        labeller = self.labeller
        if owners is None or labeller is None:
            return None
        for controller, group, kind in owners:
            parent = controller_owner(obj, group, kind)
            if parent is not None:
                member = self.handover.owner(self.key(controller, parent))
                return {labeller.label: member} if member is not None else None
        return None

    def _present(self, controller: str, request: Request) -> bool:
        """Label mode: is the object in this replica's cache (or was it deleted here)? A key
        owned under the ring whose label has not moved here yet is not reconciled: the object's
        arrival (the labeller's write) enqueues it."""
        shard = self._shards.get(controller)
        if shard is None:
            return True
        k = f"{request.namespace}/{request.name}" if request.namespace else request.name
        if k in shard.gone:
            shard.gone.discard(k)
            return True
        return k in shard.store

    async def begin(self, controller: str, request: Request) -> bool:
        key = self.key(controller, request)
        handover = self.handover
        while True:
            changed = self.membership.changed
            if self._closing or not handover.owns(key):
                return False
            if handover.try_begin(key):
                if self._present(controller, request):
                    return True
                self.end(controller, request)
                return False
            with contextlib.suppress(TimeoutError):  # not wait_for: see Membership.run
                async with asyncio.timeout(0.5):
                    await changed.wait()

    def end(self, controller: str, request: Request) -> None:
        handover = self.handover
        handover.end(self.key(controller, request))
        if handover.generation > handover.acked:
            self.membership.wake()  # maybe drained now: acknowledge

    def attach(
        self,
        controller: str,
        enqueue_owned: Callable[[], Sequence[Any]],
        depth: Callable[[], int] | None = None,
    ) -> None:
        self._attached[controller] = enqueue_owned
        series = self._series
        if series is not None:
            if depth is not None:
                series.queue_depth.labels(controller).set_function(depth)
            shard = self._shards.get(controller)
            if shard is not None:  # label mode: the cache holds exactly the owned objects
                store = shard.store
                series.owned.labels(controller).set_function(lambda: len(store))
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

    def _patched(self) -> None:
        if self._series is not None:
            self._series.label_writes.inc()

    async def run(self) -> None:
        labeller = self.labeller
        labelling = asyncio.ensure_future(labeller.run()) if labeller is not None else None
        try:
            await self.membership.run()
        finally:
            if labelling is not None:
                labelling.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await labelling

    async def leave(self) -> None:
        await self.membership.leave()
