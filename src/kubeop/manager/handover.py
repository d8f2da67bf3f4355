"""The shard handover protocol: which keys a replica may reconcile, and when (pure, no I/O).

Replicas of a sharded operator ("members") coordinate through Leases in the operator's namespace:

- each member renews its own Lease ``<name>-shard-<identity>`` every ``retry_period``, like leader
  election; a member whose Lease was not seen to change for ``lease_duration`` (observed locally,
  so clocks need not agree) or was deleted is dead (:class:`Liveness`);
- one more Lease, ``<name>-shards`` (the *ring*), records the member list and a *generation*
  number. Any member whose live set differs from the ring's rewrites the ring with the live set
  and ``generation + 1``; the write carries the ring's resourceVersion, so the generations form
  one sequence that every member sees in order (no two rings with the same number, and a member
  set that comes back, A B -> A B D -> A B, comes back under a new number);
- each key (``namespace/name``) belongs to the member that :func:`~kubeop.manager.rendezvous.owner`
  picks among the ring's members;
- each member publishes in its own Lease the last generation it has *drained for*: it acknowledges
  generation ``g`` once it has seen ring ``g`` and no reconcile of a key it does not own under
  ring ``g`` is still running (it stops taking such keys the moment it sees ring ``g``).

The rule (:meth:`Handover.try_begin`): a member starts a reconcile of key ``k`` only if

1. its own Lease is held: its last renewal was sent less than ``renew_deadline`` ago (the write
   fence of leader election: a member paused past it may already be counted dead);
2. it owns ``k`` under the newest ring ``g`` it has seen, and it is a member of that ring;
3. ring ``g`` is *settled*: every member of ring ``g`` has acknowledged exactly ``g``.

Why two members never reconcile one key at once: say A runs ``k`` under ring ``g`` and B starts
``k`` under ring ``h``. Owners are unique per ring, so ``g != h``; say ``h > g`` (otherwise swap
the names). B saw ``h`` settled, so A, if a member of ``h``, acknowledged ``h``: it had seen ring
``h`` (so it no longer starts anything under ``g``; a member's ring only moves forward) and had
no reconcile of ``k`` running (A does not own ``k`` under ``h``, B does). If A is not a member of
``h``, some member saw A's Lease unchanged for ``lease_duration``; A's own fence stopped A
``renew_deadline`` after its last renewal, earlier (the same margin leader election relies on).
A member sees its peers' acknowledgements through a watch, in order, possibly late: a late view
only delays settling, because an acknowledgement of ``h`` is never read as one of ``g``.

The price: after each membership change, every member pauses new reconciles until the ring
settles (one Lease write per member after its in-flight reconciles of moved keys end).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kubeop.manager.rendezvous import owner

__all__ = ["Handover", "Liveness"]


class Liveness:
    """Which members' Leases are alive, from when each was last *seen to change* (local clock).

    A Lease seen once and never renewed since counts only if the ring lists it already: a replica
    that just started sees every Lease for the first time, including those of replicas killed a
    moment ago, and must not put them back in the ring.
    """

    def __init__(self, lease_duration: float, now: Callable[[], float]) -> None:
        self.lease_duration = lease_duration
        self._now = now
        self._seen: dict[str, tuple[str, float, bool]] = {}  # member -> (marker, when it changed, renewed)
        self._dead: set[str] = set()  # gone for good: a member never comes back under its name

    def observe(self, member: str, marker: str, released: bool = False) -> None:
        """A member's Lease as the watch delivered it; ``marker`` changes on every renewal
        (its renewTime); ``released``: the member gave it up (graceful leave)."""
        if member in self._dead:
            return
        if released:
            self.forget(member)
            return
        seen = self._seen.get(member)
        if seen is None:
            self._seen[member] = (marker, self._now(), False)
        elif seen[0] != marker:
            self._seen[member] = (marker, self._now(), True)

    def is_dead(self, member: str) -> bool:
        return member in self._dead

    def forget(self, member: str) -> None:
        """The member's Lease was deleted or released."""
        self._seen.pop(member, None)
        self._dead.add(member)

    def live(self, ring: Iterable[str] = ()) -> frozenset[str]:
        """The members alive now; those seen once and not renewed since only if in ``ring``."""
        now = self._now()
        for member, (_, at, _) in list(self._seen.items()):
            if now - at >= self.lease_duration:
                self.forget(member)
        listed = set(ring)
        return frozenset(m for m, (_, _, renewed) in self._seen.items() if renewed or m in listed)


class Handover:
    """One member's side of the protocol in the module docstring."""

    def __init__(self, identity: str, renew_deadline: float, now: Callable[[], float]) -> None:
        self.identity = identity
        self.renew_deadline = renew_deadline
        self._now = now
        self.generation = 0
        self.members: tuple[str, ...] = ()
        self.acks: dict[str, int] = {}
        self.acked = 0  # the generation this member has published as drained
        self._renewed: float | None = None
        self._inflight: dict[str, int] = {}
        self._owner_cache: dict[str, str | None] = {}

    # -- inputs ---------------------------------------------------------------------------------
    def renewed(self, sent_at: float) -> None:
        """This member's Lease renewal, sent at ``sent_at`` (monotonic), succeeded."""
        self._renewed = sent_at

    def observe_ring(self, generation: int, members: Iterable[str]) -> bool:
        """The ring as read; True if it is newer than the one held (older ones are ignored)."""
        if generation <= self.generation:
            return False
        self.generation = generation
        self.members = tuple(sorted(set(members)))
        self._owner_cache = {}
        return True

    def observe_ack(self, member: str, generation: int) -> None:
        """``member``'s Lease says it has drained for ``generation``."""
        self.acks[member] = generation

    def published(self, generation: int) -> None:
        """This member's acknowledgement of ``generation`` was written."""
        self.acked = generation
        self.acks[self.identity] = generation

    # -- questions ------------------------------------------------------------------------------
    def holds(self) -> bool:
        renewed = self._renewed
        return renewed is not None and self._now() - renewed < self.renew_deadline

    def owner(self, key: str) -> str | None:
        cache = self._owner_cache
        if key in cache:
            return cache[key]
        result = cache[key] = owner(key, self.members)
        if len(cache) > 200_000:
            cache.clear()
        return result

    def owns(self, key: str) -> bool:
        """Is ``key`` this member's under the newest ring seen (settled or not)?"""
        return self.owner(key) == self.identity

    def settled(self) -> bool:
        acks = self.acks
        g = self.generation
        return g > 0 and self.identity in self.members and all(acks.get(m) == g for m in self.members)

    def drained(self) -> bool:
        """No reconcile of a key this member does not own under the newest ring is running."""
        return all(self.owns(key) for key in self._inflight)

    def to_acknowledge(self) -> int | None:
        """The generation to publish as drained now, if any."""
        if self.generation > self.acked and self.drained():
            return self.generation
        return None

    def running(self) -> dict[str, int]:
        return dict(self._inflight)

    # -- reconciles -----------------------------------------------------------------------------
    def try_begin(self, key: str) -> bool:
        """May this member start reconciling ``key`` now? If so it counts as running until
        :meth:`end`."""
        if not (self.holds() and self.owns(key) and self.settled()):
            return False
        self._inflight[key] = self._inflight.get(key, 0) + 1
        return True

    def end(self, key: str) -> None:
        n = self._inflight.get(key, 0) - 1
        if n > 0:
            self._inflight[key] = n
        else:
            self._inflight.pop(key, None)
