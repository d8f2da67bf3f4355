"""The handover protocol (kubeop.manager.handover), pure with a FakeClock: no key is ever running
in two members, even when members see the ring and each other's acknowledgements late."""

from __future__ import annotations

import random

import pytest

from kubeop.manager.handover import Handover, Liveness
from kubeop.queue import FakeClock

KEYS = [f"ns/w{i}" for i in range(60)]


def member(name: str, clock: FakeClock) -> Handover:
    h = Handover(name, renew_deadline=10.0, now=clock.now)
    h.renewed(clock.now())
    return h


def test_a_single_member_settles_once_it_acknowledges() -> None:
    clock = FakeClock()
    a = member("a", clock)
    assert not a.try_begin("ns/w1")  # no ring yet
    assert a.observe_ring(1, ["a"])
    assert not a.settled() and a.to_acknowledge() == 1
    a.published(1)
    assert a.settled() and a.try_begin("ns/w1")
    a.end("ns/w1")


def test_old_rings_are_ignored() -> None:
    a = member("a", FakeClock())
    a.observe_ring(3, ["a", "b"])
    assert not a.observe_ring(2, ["a"])
    assert a.generation == 3 and a.members == ("a", "b")


def test_a_moved_key_is_acknowledged_only_after_its_reconcile_ends() -> None:
    clock = FakeClock()
    a, b = member("a", clock), member("b", clock)
    a.observe_ring(1, ["a"])
    a.published(1)
    key = next(k for k in KEYS if a.owner(k) == "a")
    b.observe_ring(2, ["a", "b"])
    key = next(k for k in KEYS if b.owner(k) == "b")
    assert a.try_begin(key)  # a owns every key under ring 1
    a.observe_ring(2, ["a", "b"])
    assert a.to_acknowledge() is None  # still running a key that moved to b
    assert not a.try_begin(key)
    b.published(2)
    b.observe_ack("a", 1)
    assert not b.try_begin(key)  # a has not drained
    a.end(key)
    assert a.to_acknowledge() == 2
    a.published(2)
    b.observe_ack("a", 2)
    assert b.try_begin(key)


def test_the_fence_stops_a_member_that_did_not_renew() -> None:
    clock = FakeClock()
    a = member("a", clock)
    a.observe_ring(1, ["a"])
    a.published(1)
    clock.advance(9.9)
    assert a.try_begin("ns/w1")
    clock.advance(0.1)
    assert not a.holds() and not a.try_begin("ns/w2")


def test_liveness_expires_after_lease_duration_without_change_and_never_revives() -> None:
    clock = FakeClock()
    live = Liveness(15.0, clock.now)
    live.observe("a", "t1")
    live.observe("b", "t1")
    clock.advance(10)
    live.observe("a", "t2")
    live.observe("b", "t1")  # the same record again is no renewal
    clock.advance(5)
    assert live.live(ring=["a", "b"]) == {"a"}  # b not seen to renew for 15 s
    live.observe("c", "t1")  # seen once (a replica just started sees every lease so)
    assert live.live() == {"a"} and live.live(ring=["c"]) == {"a", "c"}
    live.observe("c", "t2")
    assert live.live() == {"a", "c"}
    live.observe("b", "t3")  # too late: b is gone under this name
    assert live.live(ring=["b"]) == {"a", "c"}
    live.observe("a", "t3", released=True)
    assert live.live() == {"c"}


class Sim:
    """Members reading a linearizable ring and each other's acks through lagging watches."""

    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)
        self.clock = FakeClock()
        self.ring: list[tuple[int, tuple[str, ...]]] = []  # every ring written, in order
        self.acks: dict[str, list[int]] = {}  # every ack written, per member, in order
        self.members: dict[str, Handover] = {}
        self.seen_ring: dict[str, int] = {}  # index into self.ring each member has read up to
        self.seen_acks: dict[tuple[str, str], int] = {}
        self.next = 0

    def join(self) -> None:
        name = f"m{self.next}"
        self.next += 1
        self.members[name] = member(name, self.clock)
        self.acks[name] = []
        self.write_ring(tuple(sorted(self.members)))

    def leave(self) -> None:
        name = self.rnd.choice(sorted(self.members))
        h = self.members[name]
        for key, n in h.running().items():
            for _ in range(n):
                h.end(key)
        del self.members[name]
        self.write_ring(tuple(sorted(self.members)))

    def write_ring(self, members: tuple[str, ...]) -> None:
        g = self.ring[-1][0] + 1 if self.ring else 1
        self.ring.append((g, members))

    def deliver(self, name: str) -> None:
        """Some of what this member's watches have not delivered yet (in order, maybe partly)."""
        h = self.members[name]
        i = self.seen_ring.get(name, 0)
        if i < len(self.ring):
            j = self.rnd.randint(i, len(self.ring))
            for g, ms in self.ring[i:j]:
                h.observe_ring(g, ms)
            self.seen_ring[name] = j
        for other, acks in self.acks.items():
            k = self.seen_acks.get((name, other), 0)
            if k < len(acks):
                k = self.rnd.randint(k, len(acks))
                self.seen_acks[(name, other)] = k
                if k:
                    h.observe_ack(other, acks[k - 1])

    def step(self) -> None:
        rnd = self.rnd
        name = rnd.choice(sorted(self.members))
        h = self.members[name]
        action = rnd.random()
        if action < 0.4:
            self.deliver(name)
        elif action < 0.55:
            g = h.to_acknowledge()
            if g is not None:
                h.published(g)
                self.acks[name].append(g)
        elif action < 0.8:
            key = rnd.choice(KEYS)
            if h.try_begin(key):
                others = [m for m, o in self.members.items() if o is not h and key in o.running()]
                assert not others, f"{key} running in {name} and {others}"
        else:
            running = list(h.running())
            if running:
                h.end(rnd.choice(running))


@pytest.mark.parametrize("seed", range(30))
def test_no_key_runs_in_two_members_under_random_joins_leaves_and_lagging_watches(seed: int) -> None:
    sim = Sim(seed)
    for _ in range(3):
        sim.join()
    started = 0
    for n in range(4000):
        if n % 400 == 399:
            if len(sim.members) > 1 and sim.rnd.random() < 0.5:
                sim.leave()
            else:
                sim.join()
        before = sum(len(h.running()) for h in sim.members.values())
        sim.step()
        started += sum(len(h.running()) for h in sim.members.values()) > before
    assert started > 50  # the protocol also makes progress


def test_progress_every_member_settles_once_everything_is_delivered() -> None:
    sim = Sim(1)
    for _ in range(3):
        sim.join()
    for _ in range(3):
        for name in sim.members:
            sim.seen_ring[name] = 0
            for g, ms in sim.ring:
                sim.members[name].observe_ring(g, ms)
            g = sim.members[name].to_acknowledge()
            if g is not None:
                sim.members[name].published(g)
                sim.acks[name].append(g)
        for h in sim.members.values():
            for other, acks in sim.acks.items():
                if acks:
                    h.observe_ack(other, acks[-1])
    assert all(h.settled() for h in sim.members.values())
    owners = {k: [n for n, h in sim.members.items() if h.owns(k)] for k in KEYS}
    assert all(len(v) == 1 for v in owners.values())
