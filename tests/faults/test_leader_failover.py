"""Leader failover between two operator processes (issue #12, scenario e).

Two Widget operators elect a leader on a Lease (4 s lease, 3 s renew deadline, 0.5 s retry)
while the test keeps changing Widgets. Every write an operator makes carries its name
(``stamping_operator.py``), and a ledger watching Widgets, ConfigMaps and the Lease from the test
process orders them all on etcd's revision counter. Checked every time:

* never two leaders writing at once: every write was made by the process holding the lease at
  that revision (exact, no clocks involved: a write made after another process took the lease
  shows up as such, even if it was still on the wire when its writer died);
* nothing lost: every Widget converges with its last written value;
* the time the other process takes to reconcile.

Three ways of losing the leader:

* SIGKILL: the other process must reconcile within lease duration + 2 s of the kill;
* SIGTERM: the leader drains, releases the lease, and the other takes over within ~1 retry period;
* SIGSTOP for longer than the lease (a stalled VM, a long GC pause, a debugger): the other takes
  over; when the paused process resumes it must not write again (it has lost the lease) and must
  exit, as the Manager documents for a lost lease.

``KUBEOP_FAULTS=full`` repeats each failover 5 times with 200 Widgets (1 time, 30 Widgets by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kubeop.client import Client
from kubeop.testing import ControlPlane

from ._fleet import Ledger, StampingOperator, pump
from .support import (
    FULL,
    assert_converged,
    client_for,
    create_widgets,
    names,
    scale,
    summary,
    wait_converged,
)

pytestmark = pytest.mark.controlplane

LEASE_DURATION = 4.0
RENEW_DEADLINE = 3.0
RETRY_PERIOD = 0.5
ROUNDS = scale(1, 5)
WIDGET_COUNT = scale(30, 200)
PUMP_RATE = 40.0  # Widget changes per second while leaders come and go


@dataclass
class Fleet:
    plane: ControlPlane
    namespace: str
    client: Client
    ledger: Ledger
    ops: list[StampingOperator]
    expected: dict[str, str]
    measured: dict[str, list[float]] = field(default_factory=dict)

    def writers(self) -> dict[str, str]:
        return {ident: op.writer for op in self.ops for ident in op.identities}

    async def leader(self, timeout: float = 30.0) -> tuple[StampingOperator, StampingOperator]:
        """(leader, follower) once one of the two leads and has synced."""
        deadline = time.monotonic() + timeout
        while True:
            leading = [op for op in self.ops if op.alive and op.leading]
            if len(leading) == 1:
                lead = leading[0]
                await asyncio.to_thread(lead.wait_for, "synced", timeout)
                await asyncio.to_thread(lead.wait_leading)
                other = next(op for op in self.ops if op is not lead)
                return lead, other
            assert len(leading) < 2, "two processes announce leadership"
            if time.monotonic() > deadline:
                raise AssertionError("no leader: " + " | ".join(op.log_tail(5) for op in self.ops))
            await asyncio.sleep(0.05)

    async def wait_write(self, writer: str, after_rv: int, timeout: float) -> float:
        """The monotonic time the ledger saw ``writer``'s first write after ``after_rv``."""
        deadline = time.monotonic() + timeout
        while True:
            w = self.ledger.first_write(writer, after_rv)
            if w is not None:
                return w.seen
            if time.monotonic() > deadline:
                raise AssertionError(f"{writer} wrote nothing within {timeout:.0f} s")
            await asyncio.sleep(0.02)

    def note(self, what: str, seconds: float) -> None:
        self.measured.setdefault(what, []).append(seconds)

    async def check(self) -> None:
        await wait_converged(self.client, self.namespace, self.expected, timeout=60)
        await assert_converged(self.client, self.namespace, self.expected)
        assert not self.ledger.errors, self.ledger.errors
        foreign = self.ledger.foreign_writes(self.writers())
        assert not foreign, f"{len(foreign)} writes by a process without the lease:\n" + "\n".join(
            foreign[:20]
        )


@asynccontextmanager
async def fleet(plane: ControlPlane, namespace: str, log_dir: Path) -> AsyncIterator[Fleet]:
    """Two leader-electing operators on ``WIDGET_COUNT`` converged Widgets, a ledger, and a pump
    changing Widgets at ``PUMP_RATE`` per second for the body of the ``async with``."""
    client = client_for(plane)
    widget_names = names(WIDGET_COUNT)
    expected = dict.fromkeys(widget_names, "v0")
    await create_widgets(client, namespace, widget_names)
    le: dict[str, Any] = {
        "leader_election": True,
        "lease_duration": LEASE_DURATION,
        "renew_deadline": RENEW_DEADLINE,
        "retry_period": RETRY_PERIOD,
        "workers": 4,
    }
    ops = [
        StampingOperator(plane, namespace, log_dir, writer="alpha", **le),
        StampingOperator(plane, namespace, log_dir, writer="beta", **le),
    ]
    stop = asyncio.Event()
    try:
        async with Ledger(client, namespace) as ledger:
            await asyncio.to_thread(ops[0].start, "synced")
            await asyncio.to_thread(ops[1].start, "metrics")
            f = Fleet(plane, namespace, client, ledger, ops, expected)
            await f.leader()
            await wait_converged(client, namespace, expected, timeout=60)
            pumping = asyncio.create_task(
                pump(
                    client,
                    namespace,
                    widget_names,
                    until=stop,
                    concurrency=4,
                    rate=PUMP_RATE,
                    expected=expected,
                )
            )
            try:
                yield f
            finally:
                stop.set()
                patches = await pumping
            assert patches > 0
            await f.check()
    finally:
        for op in ops:
            op.close()
        await client.close()


def report(f: Fleet, title: str) -> None:
    lines = [f"{title} ({'full' if FULL else 'short'}: {ROUNDS} rounds, {WIDGET_COUNT} Widgets)"]
    for what, values in f.measured.items():
        lines.append(f"  {what}: {summary(values)}")
    print("\n".join(lines))


async def _rounds(f: Fleet, one: Callable[[StampingOperator, StampingOperator], Awaitable[None]]) -> None:
    for _ in range(ROUNDS):
        leader, follower = await f.leader()
        await asyncio.sleep(1.0)  # the leader at work on the pump's changes
        await one(leader, follower)
        if not leader.alive:
            await asyncio.to_thread(leader.start, "metrics")  # it rejoins as the follower


async def test_sigkill_of_the_leader_the_other_reconciles_within_the_lease(
    fault_plane: ControlPlane, fault_namespace: str, tmp_path: Path
) -> None:
    async with fleet(fault_plane, fault_namespace, tmp_path) as f:

        async def kill(leader: StampingOperator, follower: StampingOperator) -> None:
            rv = f.ledger.current_rv()
            t0 = time.monotonic()
            await asyncio.to_thread(leader.kill)
            led = await asyncio.to_thread(follower.wait_leading, LEASE_DURATION + 10)
            wrote = await f.wait_write(follower.writer, rv, LEASE_DURATION + 10)
            f.note("kill -> new leader", led - t0)
            f.note("kill -> first write of the new leader", wrote - t0)

        await _rounds(f, kill)
    report(f, "SIGKILL of the leader")
    worst = max(f.measured["kill -> first write of the new leader"])
    assert worst <= LEASE_DURATION + 2, f"the new leader reconciled {worst:.2f} s after the kill"


async def test_sigterm_of_the_leader_hands_the_lease_over_at_once(
    fault_plane: ControlPlane, fault_namespace: str, tmp_path: Path
) -> None:
    async with fleet(fault_plane, fault_namespace, tmp_path) as f:

        async def term(leader: StampingOperator, follower: StampingOperator) -> None:
            rv = f.ledger.current_rv()
            t0 = time.monotonic()
            code = await asyncio.to_thread(leader.stop)
            stopped = time.monotonic()
            assert code == 0, f"{leader.name} exited with {code} on SIGTERM:\n{leader.log_tail()}"
            led = await asyncio.to_thread(follower.wait_leading, LEASE_DURATION + 10)
            wrote = await f.wait_write(follower.writer, rv, LEASE_DURATION + 10)
            last_old = f.ledger.last_write(leader.writer)
            first_new = f.ledger.first_write(follower.writer, rv)
            assert first_new is not None
            assert last_old is None or last_old.rv < first_new.rv
            f.note("SIGTERM -> old leader exited", stopped - t0)
            f.note("SIGTERM -> new leader", led - t0)
            f.note("SIGTERM -> first write of the new leader", wrote - t0)
            f.note("old leader exited -> first write of the new leader", wrote - stopped)

        await _rounds(f, term)
    report(f, "SIGTERM of the leader")
    # A released lease is taken at the follower's next try: one retry period (+20 % jitter),
    # plus starting its caches; far less than waiting out the lease.
    worst = max(f.measured["old leader exited -> first write of the new leader"])
    assert worst <= RETRY_PERIOD * 1.2 + 1.5, f"handover took {worst:.2f} s after the old leader exited"


async def test_a_paused_leader_does_not_write_after_losing_the_lease(
    fault_plane: ControlPlane, fault_namespace: str, tmp_path: Path
) -> None:
    async with fleet(fault_plane, fault_namespace, tmp_path) as f:

        async def pause(leader: StampingOperator, follower: StampingOperator) -> None:
            rv = f.ledger.current_rv()
            t0 = time.monotonic()
            leader.pause()
            try:
                led = await asyncio.to_thread(follower.wait_leading, LEASE_DURATION + 10)
                wrote = await f.wait_write(follower.writer, rv, LEASE_DURATION + 10)
                await asyncio.sleep(1.0)  # the new leader at work
            finally:
                leader.resume()
            resumed = time.monotonic()
            f.note("SIGSTOP -> new leader", led - t0)
            f.note("SIGSTOP -> first write of the new leader", wrote - t0)
            # The resumed process finds its lease gone within one renew attempt and exits.
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(leader.proc.wait, RENEW_DEADLINE + 5)  # type: ignore[union-attr]
            assert not leader.alive, f"{leader.name} still runs after losing its lease:\n{leader.log_tail()}"
            f.note("SIGCONT -> old leader exited", time.monotonic() - resumed)
            await asyncio.sleep(0.5)  # let the ledger see anything the old leader wrote
            foreign = f.ledger.foreign_writes(f.writers())
            assert not foreign, "the resumed leader wrote without the lease:\n" + "\n".join(foreign[:20])

        await _rounds(f, pause)
    report(f, "SIGSTOP of the leader for longer than the lease")
