"""Shard labels: the ring's leader labels each object with the replica that owns it, so that every
replica's informer selects (lists, watches and caches) only its own shard.

``Sharding(labels=True)`` puts the label ``shard.kubeop.io/<ring>=<member>`` on every object of
a sharded controller's primary kind (``kubectl get widgets -L shard.kubeop.io/widget-operator``
shows who reconciles what), and the same label on its *children*, the objects of the kinds it
:meth:`~kubeop.controller.Controller.owns` whose controller reference names one of its primary
objects (the child's label is its owner's). Each replica watches these kinds with the selector
``shard.kubeop.io/<ring>=<its identity>`` (and the controller's own selector), so it caches only
its shard's objects and their children. The labeller (:class:`ShardLabeller`) runs on one
replica, the owner of the key ``labeller:<ring>`` (the ring's *leader*, picked like any key),
and patches the label of

- every object whose label is not its owner under the ring, once per settled ring generation
  (a paged metadata-only list of each kind: a join or a leave moves ~1/n of the objects, and
  each move is one patch per object and one per child);
- every object that has no label yet (new objects: a metadata-only watch with the selector
  ``!shard.kubeop.io/<ring>``, empty once everything is labelled; run only while this replica
  leads, so that the others do not receive two events for every new object).

New children cost no write of the labeller: the reconciler's client (through which a
controller creates, updates or applies its children) puts the label on them in the same write
(:meth:`kubeop.manager.sharding.Sharder.labels_for`); the labeller labels only children written
by other means (its unlabelled watch sees them), and moves them.

Safety is the handover protocol's (:mod:`kubeop.manager.handover`), not the label's: the
labeller runs as a reconcile of its key, so it starts only under a settled ring and a ring
settles only after every member drained its reconciles of keys it no longer owns. A label
therefore moves to the new owner only after the old owner stopped reconciling the object (and
the old owner drops whatever it still has queued for it: it does not own the key). The old
owner sees the object leave its selector (a delete from its informer: it also stops caching
it); the new owner sees it arrive (an add: it reconciles it). A new owner that owns a key by
the ring but has not received the object yet does not reconcile it (the object is not in its
cache, which it would take for a deletion): the add that comes with the label enqueues it.

Children move first: in a pass, every child's label is patched (and answered) before any
primary object's, so a moved object reaches its new owner after its children were relabelled
for it. No change of a child is lost to the new owner: a change made before the child's label
moved is in the object the new owner receives with the label (an add, which enqueues the
owner's key), and every change after it is an event of the new owner's watch. (The two kinds
arrive through two watches, so the new owner may still reconcile the object before its own
watch delivered the child; its cache then lags as after any write, and the create-or-update
helpers handle that: the create meets AlreadyExists and becomes an update, which also moves
the label.)

The cost: one write per new object (its first label) and one per moved object per membership
change, each an update event for every watcher of the kind.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeop.cache import FuncHandler, Informer, ListWatch, SharedInformerFactory
from kubeop.client import Client
from kubeop.controller import Request, request_for
from kubeop.core.errors import ApiError, NotFound
from kubeop.core.resource import ApiResource
from kubeop.manager.membership import Membership
from kubeop.manager.rendezvous import owner

__all__ = ["LabelledKind", "ShardLabeller", "controller_owner", "label_key"]

log = logging.getLogger("kubeop.sharding")

LABEL_PREFIX = "shard.kubeop.io/"
#: Patches of labels in flight at once.
CONCURRENCY = 32
PAGE_SIZE = 500


def label_key(ring: str) -> str:
    """The label naming an object's replica in ring ``ring``."""
    return LABEL_PREFIX + ring


def controller_owner(obj: Mapping[str, Any], group: str, kind: str) -> Request | None:
    """The object of kind ``group``/``kind`` that ``obj``'s controller reference names, if any
    (any version; a namespaced owner lives in its child's namespace)."""
    meta = obj.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if not ref.get("controller") or ref.get("kind") != kind:
            continue
        api_version = ref.get("apiVersion") or ""
        if (api_version.rpartition("/")[0] if "/" in api_version else "") == group:
            return Request(meta.get("namespace") or "", ref.get("name") or "")
    return None


@dataclass
class LabelledKind:
    """One sharded controller's primary kind, or a kind it owns, as the labeller sees it."""

    controller: str
    resource: ApiResource
    namespace: str | None
    selector: str | None  # the controller's own label selector
    owner: tuple[str, str] | None = None  # a child kind: its owner's (group, kind)
    # metadata only: the objects without the label (while this replica leads)
    unlabelled: Informer | None = None

    @property
    def tag(self) -> str:
        return self.controller if self.owner is None else f"{self.controller}/{self.resource.plural}"


class ShardLabeller:
    """Keeps the shard label of every object of the labelled kinds equal to its owner."""

    def __init__(
        self,
        client: Client,
        cache: SharedInformerFactory,
        membership: Membership,
        key: Callable[[str, Request], str],
        *,
        field_manager: str,
        on_patch: Callable[[], None] | None = None,
    ) -> None:
        self.client = client
        self.cache = cache
        self.membership = membership
        self.handover = membership.handover
        self.label = label_key(membership.name)
        self.task_key = f"labeller:{membership.name}"
        self._key = key
        self.field_manager = field_manager
        self._on_patch = on_patch
        self.kinds: list[LabelledKind] = []
        self._done_for = 0  # the ring generation every object was last checked under
        self._pending = asyncio.Event()  # an unlabelled object appeared
        # (controller, key) -> the label sent in this generation: an object stays in the
        # unlabelled cache until the watch reports the patch, and is not patched twice meanwhile
        self._sent: dict[tuple[str, str], str] = {}
        self._sent_for = 0
        self.patches = 0

    def add_kind(
        self,
        controller: str,
        resource: ApiResource,
        namespace: str | None,
        selector: str | None,
        *,
        owner: ApiResource | None = None,
    ) -> None:
        """Label the objects of ``controller``'s primary kind (``selector``: its own selector),
        or with ``owner`` (the primary kind) its children of kind ``resource``."""
        owned_by = (owner.group, owner.kind or "") if owner is not None else None
        self.kinds.append(LabelledKind(controller, resource, namespace, selector, owned_by))
        self._done_for = 0  # check the new kind's objects

    def _watch_unlabelled(self) -> None:
        """Watch the objects without the label of each kind (while this replica leads: not
        through the shared cache, which keeps its informers for good)."""
        pending = self._pending

        def appeared(obj: Any, is_in_initial_list: bool = False) -> None:
            pending.set()

        cache = self.cache
        for kind in self.kinds:
            if kind.unlabelled is None:
                selector = f"{kind.selector},!{self.label}" if kind.selector else f"!{self.label}"
                source = ListWatch(
                    cache.client,
                    kind.resource,
                    namespace=kind.namespace,
                    label_selector=selector,
                    metadata_only=True,
                    probe=cache.probe,
                )
                informer = Informer(source, transform=cache.transform, config=cache.config)
                informer.add_event_handler(FuncHandler(on_add=appeared))
                informer.start()
                kind.unlabelled = informer

    async def _unwatch_unlabelled(self) -> None:
        for kind in self.kinds:
            informer, kind.unlabelled = kind.unlabelled, None
            if informer is not None:
                await informer.stop()

    def leads(self) -> bool:
        """Is the labeller this replica's to run, under the newest ring?"""
        return self.handover.owns(self.task_key)

    async def run(self) -> None:
        """Until cancelled: label what needs it whenever this replica leads a settled ring."""
        try:
            await self._run()
        finally:
            await self._unwatch_unlabelled()

    async def _run(self) -> None:
        while True:
            changed = self.membership.changed
            handover = self.handover
            g = handover.generation
            retry = False
            if handover.settled() and self.leads() and self.kinds:
                self._watch_unlabelled()
                full = self._done_for != g
                if (full or self._pending.is_set()) and handover.try_begin(self.task_key):
                    self._pending.clear()
                    try:
                        if await self._label(full):
                            self._done_for = g
                            continue
                        retry = True
                    except (ApiError, OSError) as exc:
                        log.warning("shard labeller: %s", exc)
                        retry = True
                    finally:
                        handover.end(self.task_key)
                        self.membership.wake()  # acknowledge a newer ring, if it waits for this
                    if retry:
                        self._pending.set()
                        await asyncio.sleep(0.2)
                        continue
            # Only the leader of a settled ring waits for unlabelled objects: on the other
            # replicas (and until the ring settles) the event would stay set and spin this loop;
            # a replica that becomes the leader starts with a full pass anyway.
            waits = {asyncio.ensure_future(changed.wait())}
            if handover.settled() and self.leads() and handover.holds():
                waits.add(asyncio.ensure_future(self._pending.wait()))
            else:
                self._pending.clear()
                if not self.leads():  # another replica's job now
                    await self._unwatch_unlabelled()
            try:
                await asyncio.wait(waits, timeout=5.0, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()

    def _owner_key(self, kind: LabelledKind, obj: Mapping[str, Any]) -> tuple[str, str] | None:
        """(the key hashed to pick ``obj``'s label, its own ``namespace/name``); None for a child
        without a controller reference to its controller's primary kind."""
        req = request_for(obj)
        own = f"{req.namespace}/{req.name}"
        if kind.owner is None:
            return self._key(kind.controller, req), own
        parent = controller_owner(obj, *kind.owner)
        return (self._key(kind.controller, parent), own) if parent is not None else None

    async def _label(self, full: bool) -> bool:
        """One pass; False when the ring moved under it (the next pass starts over)."""
        handover = self.handover
        g, members = handover.generation, handover.members
        t0 = time.monotonic()
        if self._sent_for != g or full:
            self._sent, self._sent_for = {}, g
        sent = self._sent
        patched = 0
        sem = asyncio.Semaphore(CONCURRENCY)

        def current() -> bool:
            return handover.generation == g and handover.holds()

        async def patch(kind: LabelledKind, obj: Any, want: str, sent_key: tuple[str, str]) -> bool:
            async with sem:
                if not current():
                    sent.pop(sent_key, None)
                    return False
                meta = obj["metadata"]
                try:
                    await self.client.patch(
                        kind.resource,
                        meta["name"],
                        {"metadata": {"labels": {self.label: want}}},
                        namespace=meta.get("namespace"),
                        field_manager=self.field_manager,
                    )
                except NotFound:
                    return True
                except BaseException:
                    sent.pop(sent_key, None)  # the next pass tries again
                    raise
                self.patches += 1
                if self._on_patch is not None:
                    self._on_patch()
                return True

        if not all(kind.unlabelled is not None and kind.unlabelled.has_synced() for kind in self.kinds):
            return False
        # Children first (see the module docstring): their patches are answered before any
        # primary object's label moves.
        children = [kind for kind in self.kinds if kind.owner is not None]
        primaries = [kind for kind in self.kinds if kind.owner is None]
        tasks: list[asyncio.Task[bool]] = []

        def consider(kind: LabelledKind, objects: Iterable[Any]) -> None:
            nonlocal patched
            tag = kind.tag
            for obj in objects:
                keys = self._owner_key(kind, obj)
                if keys is None:
                    continue
                want = owner(keys[0], members)
                if want is None:
                    continue
                sent_key = (tag, keys[1])
                has = (obj["metadata"].get("labels") or {}).get(self.label)
                if has != want and sent.get(sent_key) != want:
                    sent[sent_key] = want
                    tasks.append(asyncio.ensure_future(patch(kind, obj, want, sent_key)))
                    patched += 1

        for kinds in (children, primaries):
            tasks.clear()
            try:
                for kind in kinds:
                    if not full:
                        assert kind.unlabelled is not None
                        store = kind.unlabelled.store
                        consider(kind, list(store.list()))
                        # forget what the watch has reported labelled since
                        for sent_key in [k for k in sent if k[0] == kind.tag]:
                            if sent_key[1].lstrip("/") not in store:
                                del sent[sent_key]
                        continue
                    # Page by page (the patches of a page start as the next one is listed): the
                    # pass holds the objects still to patch, not the whole kind.
                    token: str | None = None
                    while True:
                        page = await self.client.list(
                            kind.resource,
                            namespace=kind.namespace,
                            all_namespaces=kind.namespace is None,
                            label_selector=kind.selector,
                            limit=PAGE_SIZE,
                            continue_=token,
                            metadata_only=True,
                            share_strings=False,
                        )
                        if not current():
                            return False
                        consider(kind, page.items)
                        token = page.continue_
                        if not token:
                            break
                if not (all(await asyncio.gather(*tasks)) and current()):
                    return False
            finally:
                # an early return or a failed list or patch: no patch task outlives the pass
                for task in tasks:
                    task.cancel()
                if tasks:
                    await asyncio.gather(*tasks, return_exceptions=True)
        if patched:
            log.info(
                "shard labeller: %d objects labelled under ring generation %d",
                patched,
                g,
                extra={"full": full, "seconds": round(time.monotonic() - t0, 3)},
            )
        return True
