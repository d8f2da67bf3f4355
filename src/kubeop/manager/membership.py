"""Shard membership through Leases: this replica's own Lease, its peers', and the ring.

The protocol is :mod:`kubeop.manager.handover`'s; this module does its I/O. In the operator's
namespace, every object is labelled ``kubeop.io/shard-ring=<name>``:

- ``<name>-shard-<identity>``: one per replica (``kubeop.io/shard-role=member``),
  ``holderIdentity`` the replica's identity, renewed every ``retry_period``; the annotation
  ``kubeop.io/shard-drained`` is the ring generation it has drained for. Deleted on a graceful
  stop (its peers count it gone at once instead of after ``lease_duration``); the Lease of a
  replica that died is deleted by its peers once they count it dead (with its resourceVersion as
  a precondition), so that restarts, each under a new identity, leave nothing behind;
- ``<name>-shards``: the ring (``kubeop.io/shard-role=ring``), annotations
  ``kubeop.io/shard-generation`` and ``kubeop.io/shard-members`` (comma-separated identities).

One informer watches them all. A replica rewrites the ring (carrying its resourceVersion, so
concurrent rewrites conflict and one wins) whenever the live members it observes differ from the
ring's list, and writes its acknowledgement as soon as :meth:`Handover.to_acknowledge` has one.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import re
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubeop.cache import DeletedFinalStateUnknown, FuncHandler, SharedInformerFactory
from kubeop.client import Client
from kubeop.core.errors import AlreadyExists, ApiError, Conflict, NotFound
from kubeop.manager.handover import Handover, Liveness
from kubeop.manager.leader import LEASES, LeadershipLost, check_lease_timing

__all__ = ["Membership", "ShardLeaseLost", "member_identity"]

log = logging.getLogger("kubeop.sharding")

RING_LABEL = "kubeop.io/shard-ring"
ROLE_LABEL = "kubeop.io/shard-role"
DRAINED = "kubeop.io/shard-drained"
GENERATION = "kubeop.io/shard-generation"
MEMBERS = "kubeop.io/shard-members"


class ShardLeaseLost(LeadershipLost):
    """This replica's shard Lease was not renewed within the renew deadline: its peers may have
    taken its keys, so it stops (a restart joins again under a new identity)."""


_LEASE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def member_identity() -> str:
    """A fresh identity, usable in a Lease name: the host name and 8 random hex digits."""
    host = re.sub(r"[^a-z0-9-]+", "-", socket.gethostname().lower()).strip("-")[:40] or "replica"
    return f"{host}-{os.urandom(4).hex()}"


def _microtime() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


class Membership:
    """Join the ring ``name`` in ``namespace`` as ``identity`` and keep :attr:`handover` current."""

    def __init__(
        self,
        client: Client,
        cache: SharedInformerFactory,
        name: str,
        namespace: str,
        *,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        check_lease_timing("sharding", lease_duration, renew_deadline, retry_period)
        self.client = client
        self.cache = cache
        self.name = name
        self.namespace = namespace
        self.identity = identity or member_identity()
        self.lease_name = f"{name}-shard-{self.identity}"
        if len(self.lease_name) > 253 or not _LEASE_NAME.match(self.lease_name):
            raise ValueError(
                f"sharding: the Lease name {self.lease_name!r} (<ring name>-shard-<identity>) is "
                "not a DNS-1123 subdomain (at most 253 lowercase letters, digits, '-' and '.', "
                "starting and ending with a letter or digit): pass Sharding(name=...) and "
                "Sharding(identity=...) in that form, or leave them unset"
            )
        self.ring_name = f"{name}-shards"
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.handover = Handover(self.identity, renew_deadline, time.monotonic)
        self.liveness = Liveness(lease_duration, time.monotonic)
        self._on_change = on_change
        self._lease: dict[str, Any] | None = None
        self._ring: dict[str, Any] | None = None
        self._wake = asyncio.Event()
        self.changed = asyncio.Event()  # set (and replaced) whenever the handover state moves

    # -- watching -------------------------------------------------------------------------------
    def _observe(self, obj: Mapping[str, Any], deleted: bool = False) -> None:
        meta = _meta(obj)
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        if labels.get(ROLE_LABEL) == "ring":
            if not deleted:
                self._ring = dict(obj)
                members = [m for m in (annotations.get(MEMBERS) or "").split(",") if m]
                try:
                    generation = int(annotations.get(GENERATION) or 0)
                except ValueError:
                    generation = 0
                if self.handover.observe_ring(generation, members):
                    log.info(
                        "shard ring %s/%s generation %d: %d members",
                        self.namespace,
                        self.ring_name,
                        generation,
                        len(members),
                        extra={"members": ",".join(members)},
                    )
        else:
            spec = obj.get("spec") or {}
            member = spec.get("holderIdentity") or ""
            if not member:
                return
            if deleted:
                self.liveness.forget(member)
            else:
                self.liveness.observe(member, str(spec.get("renewTime") or ""))
                with contextlib.suppress(ValueError):
                    self.handover.observe_ack(member, int(annotations.get(DRAINED) or 0))
        self._notify()

    def _notify(self) -> None:
        self._wake.set()
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()
        if self._on_change is not None:
            self._on_change()

    def wake(self) -> None:
        """Something changed locally (a reconcile ended): look at the state again."""
        self._notify()

    # -- writing --------------------------------------------------------------------------------
    async def _write_lease(self) -> None:
        """Create or renew this replica's Lease, with its acknowledgement."""
        sent = time.monotonic()
        ack = self.handover.to_acknowledge()
        drained = str(ack if ack is not None else self.handover.acked)
        if self._lease is None:
            body: dict[str, Any] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": self.lease_name,
                    "namespace": self.namespace,
                    "labels": {RING_LABEL: self.name, ROLE_LABEL: "member"},
                    "annotations": {DRAINED: drained},
                },
                "spec": {
                    "holderIdentity": self.identity,
                    "leaseDurationSeconds": int(self.lease_duration),
                    "acquireTime": _microtime(),
                    "renewTime": _microtime(),
                },
            }
            self._lease = await self.client.create(body, resource=LEASES)
        else:
            lease = dict(self._lease)
            meta = dict(lease["metadata"])
            meta["annotations"] = {**(meta.get("annotations") or {}), DRAINED: drained}
            lease["metadata"] = meta
            lease["spec"] = {**(lease.get("spec") or {}), "renewTime": _microtime()}
            self._lease = await self.client.update(lease, resource=LEASES)
        self.handover.renewed(sent)
        if ack is not None:
            self.handover.published(ack)
            log.info("shard %s drained for generation %d", self.identity, ack)
            self._notify()

    async def _write_ring(self, live: frozenset[str]) -> None:
        """Make the ring list ``live``, one generation up (losing a race is fine: re-read)."""
        members = ",".join(sorted(live))
        ring = self._ring
        if ring is None:
            body: dict[str, Any] = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {
                    "name": self.ring_name,
                    "namespace": self.namespace,
                    "labels": {RING_LABEL: self.name, ROLE_LABEL: "ring"},
                    "annotations": {GENERATION: "1", MEMBERS: members},
                },
                "spec": {},
            }
            with contextlib.suppress(AlreadyExists):
                self._observe(await self.client.create(body, resource=LEASES))
            return
        annotations = _meta(ring).get("annotations") or {}
        generation = int(annotations.get(GENERATION) or 0) + 1
        updated = dict(ring)
        meta = dict(_meta(ring))
        meta["annotations"] = {**annotations, GENERATION: str(generation), MEMBERS: members}
        updated["metadata"] = meta
        with contextlib.suppress(Conflict, NotFound):
            self._observe(await self.client.update(updated, resource=LEASES))

    # -- running --------------------------------------------------------------------------------
    async def run(self) -> None:
        """Join, then renew, acknowledge and keep the ring current until cancelled; raises
        :class:`ShardLeaseLost` when this replica's Lease was not renewed in time."""
        informer = self.cache.informer(
            LEASES, namespace=self.namespace, label_selector=f"{RING_LABEL}={self.name}"
        )

        def on_add(obj: Any, is_in_initial_list: bool = False) -> None:
            self._observe(obj)

        def on_update(old: Any, new: Any) -> None:
            self._observe(new)

        def on_delete(obj: Any) -> None:
            if isinstance(obj, DeletedFinalStateUnknown):
                obj = obj.obj
            if obj is not None:
                self._observe(obj, deleted=True)

        informer.add_event_handler(FuncHandler(on_add=on_add, on_update=on_update, on_delete=on_delete))
        while True:
            try:
                await self._write_lease()
                break
            except (ApiError, OSError) as exc:
                log.warning("sharding: cannot create lease %s/%s: %s", self.namespace, self.lease_name, exc)
                await asyncio.sleep(self.retry_period)
        await informer.wait_for_sync()
        log.info("joined shard ring %s/%s as %s", self.namespace, self.ring_name, self.identity)
        last_renew = time.monotonic()
        while True:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for drops a cancellation that
            # arrives as the event is set (the manager's stop then waits for this loop forever)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.retry_period / 4):
                    await self._wake.wait()
            self._wake.clear()
            now = time.monotonic()
            if not self.handover.holds():
                raise ShardLeaseLost(
                    f"shard lease {self.namespace}/{self.lease_name} not renewed within "
                    f"{self.renew_deadline:.0f} s"
                )
            try:
                if now - last_renew >= self.retry_period or self.handover.to_acknowledge() is not None:
                    await self._write_lease()
                    last_renew = now
                live = self.liveness.live(self.handover.members) | {self.identity}
                if tuple(sorted(live)) != self.handover.members or self._ring is None:
                    await self._write_ring(live)
                elif self.handover.settled():
                    await self._collect_dead(informer.store.list())
            except Conflict:
                # Our own lease changed under us (only we write it): re-read it.
                with contextlib.suppress(Exception):
                    self._lease = await self.client.get(LEASES, self.lease_name, namespace=self.namespace)
            except (ApiError, OSError) as exc:
                log.warning("sharding: %s", exc)

    async def _collect_dead(self, leases: list[Any]) -> None:
        """Delete the Leases of members counted dead (and out of the ring)."""
        for lease in leases:
            meta = _meta(lease)
            holder = (lease.get("spec") or {}).get("holderIdentity") or ""
            if (meta.get("labels") or {}).get(ROLE_LABEL) != "member" or holder == self.identity:
                continue
            if self.liveness.is_dead(holder) and holder not in self.handover.members:
                with contextlib.suppress(Conflict, NotFound):
                    await self.client.delete(
                        LEASES,
                        meta["name"],
                        namespace=self.namespace,
                        precondition_resource_version=meta.get("resourceVersion"),
                    )
                    log.info("deleted the lease of dead shard member %s", holder)

    async def leave(self) -> None:
        """Delete this replica's Lease (after its controllers stopped): peers take its keys now."""
        with contextlib.suppress(Exception):
            await self.client.delete(LEASES, self.lease_name, namespace=self.namespace)
