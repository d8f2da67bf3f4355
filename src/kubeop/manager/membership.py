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

What is read from these Leases is checked, since anyone who may write Leases in the namespace
can put anything there: a member identity is a *member name* (:func:`is_member_name`; a Lease
with another holder, or whose name is not ``<name>-shard-<holder>``, is ignored, and so is such
an entry of the ring's list); a generation is a plain decimal number (ASCII digits, at most 15).
A ring whose generation does not parse, or is older than one this replica has seen, is rewritten
one generation above the newest seen; a drained annotation that does not parse is no
acknowledgement. Each is logged once per Lease and value. Ring rewrites are rate-limited
(a burst of five, then one a second), so that no input, however it flaps, drives a replica into
a write loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubeop.cache import DeletedFinalStateUnknown, FuncHandler, SharedInformerFactory
from kubeop.client import Client, TokenBucket
from kubeop.core.errors import AlreadyExists, ApiError, Conflict, NotFound
from kubeop.manager.handover import Handover, Liveness
from kubeop.manager.leader import LeadershipLost
from kubeop.manager.lease import LEASES, LeaseTiming, microtime, retry_until, write_lease

__all__ = ["Membership", "ShardLeaseLost", "is_member_name", "member_identity"]

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
# A member name: lowercase letters, digits, '-' and '.', starting and ending with a letter or
# digit, at most 63 characters (so a label value too, and free of the ring list's ',').
_MEMBER_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?")
# A generation or an acknowledgement: a plain decimal number, small enough never to overflow
# anywhere (a ring moves one generation per membership change).
_GENERATION = re.compile(r"0|[1-9][0-9]{0,14}")

# Ring rewrites a replica may make: a burst, then this many per second on average.
_RING_WRITE_BURST = 5
_RING_WRITES_PER_SECOND = 1.0
_WARNED_KEPT = 1024  # (Lease, field, value) triples logged already, forgotten beyond this


def member_identity() -> str:
    """A fresh identity, usable in a Lease name: the host name and 8 random hex digits (a
    member name, see :func:`is_member_name`)."""
    host = re.sub(r"[^a-z0-9-]+", "-", socket.gethostname().lower())[:40].strip("-") or "replica"
    return f"{host}-{os.urandom(4).hex()}"


def is_member_name(identity: object) -> bool:
    """Is ``identity`` usable as a shard member's: 1 to 63 lowercase letters, digits, '-' and
    '.', starting and ending with a letter or digit (what :func:`member_identity` makes)."""
    return isinstance(identity, str) and _MEMBER_NAME.fullmatch(identity) is not None


def _number(value: object) -> int | None:
    """A generation annotation's value, or None when it is not a plain decimal number."""
    if isinstance(value, str) and _GENERATION.fullmatch(value):
        return int(value)
    return None


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


_DEFAULT_TIMING = LeaseTiming()


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
        timing: LeaseTiming = _DEFAULT_TIMING,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        lease_duration, renew_deadline, retry_period = (
            timing.checked("sharding").lease_duration,
            timing.renew_deadline,
            timing.retry_period,
        )
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
        if not is_member_name(self.identity):
            raise ValueError(
                f"sharding: the identity {self.identity!r} is not a member name (at most 63 "
                "lowercase letters, digits, '-' and '.', starting and ending with a letter or "
                "digit; peers ignore any other): pass Sharding(identity=...) in that form, or "
                "leave it unset"
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
        self._ring_generation: int | None = None  # the generation the ring object says, if valid
        self._ring_writes = TokenBucket(_RING_WRITES_PER_SECOND, _RING_WRITE_BURST)
        self._throttled_at: float | None = None  # when a ring rewrite was last held back (logged)
        self._warned: set[tuple[str, str, str]] = set()
        self._wake = asyncio.Event()
        self.changed = asyncio.Event()  # set (and replaced) whenever the handover state moves

    # -- watching -------------------------------------------------------------------------------
    def _warn(self, lease: str, what: str, value: object, why: str) -> None:
        """Log once per Lease, field and value that ``what`` of ``lease`` is ignored."""
        key = (lease, what, repr(value)[:200])
        if key in self._warned:
            return
        if len(self._warned) >= _WARNED_KEPT:
            self._warned.clear()
        self._warned.add(key)
        log.warning(
            "sharding: Lease %s/%s: %s %s is ignored: %s",
            self.namespace,
            lease,
            what,
            repr(value)[:100],
            why,
        )

    def _observe(self, obj: Mapping[str, Any], deleted: bool = False) -> None:
        meta = _meta(obj)
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        if not isinstance(labels, Mapping) or not isinstance(annotations, Mapping):
            return
        lease = str(meta.get("name") or "")
        if labels.get(ROLE_LABEL) == "ring":
            if lease != self.ring_name:
                self._warn(lease, f"label {ROLE_LABEL}", "ring", f"the ring is the Lease {self.ring_name}")
                return
            if deleted:
                self._ring = None  # created again, above the generations seen
                self._ring_generation = None
            else:
                self._observe_ring(obj, lease, annotations)
        else:
            spec = obj.get("spec") or {}
            member = spec.get("holderIdentity") if isinstance(spec, Mapping) else None
            if member is None or member == "":
                return
            if not is_member_name(member):
                why = "not a member name (at most 63 lowercase letters, digits, '-' and '.')"
                self._warn(lease, "spec.holderIdentity", member, why)
                return
            if lease != f"{self.name}-shard-{member}":
                self._warn(
                    lease, "spec.holderIdentity", member, f"the Lease is not {self.name}-shard-{member}"
                )
                return
            if deleted:
                self.liveness.forget(member)
            else:
                self.liveness.observe(member, str(spec.get("renewTime") or ""))
                drained = annotations.get(DRAINED)
                acked = _number(drained) if drained is not None else None
                if acked is not None:
                    self.handover.observe_ack(member, acked)
                elif drained is not None:
                    self._warn(lease, f"annotation {DRAINED}", drained, "not a generation number")
        self._notify()

    def _observe_ring(self, obj: Mapping[str, Any], lease: str, annotations: Mapping[str, Any]) -> None:
        self._ring = dict(obj)
        raw = annotations.get(GENERATION)
        generation = _number(raw)
        self._ring_generation = generation
        if generation is None:
            if raw is not None:
                self._warn(
                    lease, f"annotation {GENERATION}", raw, "not a generation number; the ring is rewritten"
                )
            return
        listed = annotations.get(MEMBERS)
        entries = [m for m in (listed.split(",") if isinstance(listed, str) else []) if m]
        members = [m for m in entries if is_member_name(m)]
        if len(members) != len(entries):
            bad = sorted(set(entries) - set(members))
            self._warn(lease, f"annotation {MEMBERS}", bad, "not member names")
        if self.handover.observe_ring(generation, members):
            log.info(
                "shard ring %s/%s generation %d: %d members",
                self.namespace,
                self.ring_name,
                generation,
                len(members),
                extra={"members": ",".join(members)},
            )

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
        now = microtime()
        if self._lease is None:
            spec = {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.lease_duration),
                "acquireTime": now,
                "renewTime": now,
            }
        else:
            spec = {**(self._lease.get("spec") or {}), "renewTime": now}
        self._lease = await write_lease(
            self.client,
            self._lease,
            name=self.lease_name,
            namespace=self.namespace,
            spec=spec,
            labels={RING_LABEL: self.name, ROLE_LABEL: "member"},
            annotations={DRAINED: drained},
        )
        self.handover.renewed(sent)
        if ack is not None:
            self.handover.published(ack)
            log.info("shard %s drained for generation %d", self.identity, ack)
            self._notify()

    def _ring_stale(self, live: frozenset[str]) -> bool:
        """Does the ring need a rewrite: absent, not listing ``live``, or with a generation that
        does not parse or is older than the newest this replica has seen (it went back)?"""
        generation = self._ring_generation
        return (
            self._ring is None
            or generation is None
            or generation < self.handover.generation
            or tuple(sorted(live)) != self.handover.members
        )

    async def _write_ring(self, live: frozenset[str]) -> None:
        """Make the ring list ``live``, one generation above the newest seen (losing a race is
        fine: re-read)."""
        members = ",".join(sorted(live))
        generation = max(self._ring_generation or 0, self.handover.generation) + 1
        ring = self._ring
        with contextlib.suppress(AlreadyExists, Conflict, NotFound):  # another replica came first
            self._observe(
                await write_lease(
                    self.client,
                    ring,
                    name=self.ring_name,
                    namespace=self.namespace,
                    spec=None,
                    labels={RING_LABEL: self.name, ROLE_LABEL: "ring"},
                    annotations={GENERATION: str(generation), MEMBERS: members},
                )
            )

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

        async def join() -> bool:
            await self._write_lease()
            return True

        await retry_until(
            join,
            lambda: self.retry_period,
            log,
            f"sharding: cannot create lease {self.namespace}/{self.lease_name}",
            (ApiError, OSError),
        )
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
                if self._ring_stale(live):
                    if self._ring_writes.try_acquire():
                        await self._write_ring(live)
                    else:
                        self._throttled(now)
                elif self.handover.settled():
                    await self._collect_dead(informer.store.list())
            except Conflict:
                # Our own lease changed under us (only we write it): re-read it.
                with contextlib.suppress(Exception):
                    self._lease = await self.client.get(LEASES, self.lease_name, namespace=self.namespace)
            except (ApiError, OSError) as exc:
                log.warning("sharding: %s", exc)

    def _throttled(self, now: float) -> None:
        """A ring rewrite was held back by the rate limit: say so, once a minute at most."""
        if self._throttled_at is None or now - self._throttled_at >= 60.0:
            self._throttled_at = now
            log.warning(
                "sharding: shard ring %s/%s changes faster than %g rewrites per second; rewrites "
                "are held back (is something else writing the ring Lease?)",
                self.namespace,
                self.ring_name,
                _RING_WRITES_PER_SECOND,
            )

    async def _collect_dead(self, leases: list[Any]) -> None:
        """Delete the Leases of members counted dead (and out of the ring)."""
        for lease in leases:
            meta = _meta(lease)
            holder = (lease.get("spec") or {}).get("holderIdentity") or ""
            if (meta.get("labels") or {}).get(ROLE_LABEL) != "member" or holder == self.identity:
                continue
            if not is_member_name(holder) or meta.get("name") != f"{self.name}-shard-{holder}":
                continue  # not a member's Lease (ignored when observed)
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
