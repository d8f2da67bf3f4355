"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

A candidate tries every ``retry_period`` to take the lease: it may when there is no holder, when
the holder is itself, or when the holder has not renewed for ``lease_duration`` *as observed
locally* (the time since this process last saw the lease record change, so clocks need not
agree). The leader renews every ``retry_period``; if no renewal succeeds for ``renew_deadline``
it has lost the lease and must stop working. Every write carries the lease's resourceVersion, so
two candidates can never both win.

Renewals are timed from when their request was *sent*, and :meth:`LeaderElector.holds` says
whether the last one is younger than ``renew_deadline``: a leader that was paused or starved
(SIGSTOP, a blocked event loop, a stalled VM) knows it may have been replaced the moment it runs
again, before any renew attempt, and the Manager refuses its controllers' writes from then on.
Another candidate can take the lease only ``lease_duration`` after it *observed* that renewal,
later than the sender's deadline, so the old and the new leader's writes cannot interleave.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import time
from collections.abc import Callable
from typing import Any

from kubeop.client import Client
from kubeop.core.errors import AlreadyExists, Conflict, NotFound
from kubeop.manager.lease import LEASES, check_lease_timing, microtime, retry_until, write_lease

__all__ = ["LEASES", "LeaderElector", "LeadershipLost"]

log = logging.getLogger("kubeop.leader")


class LeadershipLost(RuntimeError):
    """The lease could not be renewed within the renew deadline."""


def default_identity() -> str:
    return f"{socket.gethostname()}_{os.urandom(8).hex()}"


class LeaderElector:
    """Acquire, hold and release one Lease."""

    def __init__(
        self,
        client: Client,
        name: str,
        namespace: str,
        *,
        identity: str | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_cancel: bool = True,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        check_lease_timing("leader election", lease_duration, renew_deadline, retry_period)
        self.client = client
        self.name = name
        self.namespace = namespace
        self.identity = identity or default_identity()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self._on_change = on_change
        self._observed: dict[str, Any] | None = None
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None  # when the last successful acquire/renew was sent
        self.is_leader = False

    def holds(self) -> bool:
        """Is this candidate the leader *now*: it won the lease and its last successful renewal
        was sent less than ``renew_deadline`` ago (monotonic clock)?"""
        renewed = self._renewed_at
        return self.is_leader and renewed is not None and time.monotonic() - renewed < self.renew_deadline

    def _set_leader(self, value: bool) -> None:
        if value != self.is_leader:
            self.is_leader = value
            log.info(
                "%s leadership of lease %s/%s", "acquired" if value else "lost", self.namespace, self.name
            )
            if self._on_change is not None:
                self._on_change(value)

    async def _try_acquire_or_renew(self) -> bool:
        now = time.time()
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": microtime(now),
            "renewTime": microtime(now),
            "leaseTransitions": 0,
        }
        lease: dict[str, Any] | None
        try:
            lease = await self.client.get(LEASES, self.name, namespace=self.namespace)
        except NotFound:
            lease = None
        if lease is not None:
            old = lease.get("spec") or {}
            if old != self._observed_spec:
                self._observe(lease)
            holder = old.get("holderIdentity") or ""
            duration = float(old.get("leaseDurationSeconds") or self.lease_duration)
            expired = self._observed_at + duration <= time.monotonic()
            if holder and holder != self.identity and not expired:
                return False
            if holder == self.identity:
                spec["acquireTime"] = old.get("acquireTime") or spec["acquireTime"]
                spec["leaseTransitions"] = old.get("leaseTransitions") or 0
            else:
                spec["leaseTransitions"] = (old.get("leaseTransitions") or 0) + 1
        try:
            written = await write_lease(
                self.client, lease, name=self.name, namespace=self.namespace, spec=spec
            )
        except (AlreadyExists, Conflict):  # another candidate wrote it first
            return False
        self._observe(written)
        return True

    def _observe(self, lease: dict[str, Any]) -> None:
        self._observed = lease
        self._observed_spec = lease.get("spec") or {}
        self._observed_at = time.monotonic()

    def _jitter(self) -> float:
        return self.retry_period * (1.0 + 0.2 * random.random())

    async def acquire(self) -> None:
        """Wait until this candidate holds the lease."""
        self._renewed_at = await retry_until(
            self._try_acquire_or_renew, self._jitter, log, "leader election", (Exception,)
        )
        self._set_leader(True)

    async def hold(self) -> None:
        """Renew until the lease is lost (raises :class:`LeadershipLost`) or this task is cancelled."""
        last_renew = self._renewed_at if self._renewed_at is not None else time.monotonic()
        try:
            while True:
                await asyncio.sleep(self.retry_period)
                if time.monotonic() - last_renew >= self.renew_deadline:
                    # Woken up past the deadline (the process was paused or its loop blocked):
                    # another candidate may lead already. Stop before anything else runs.
                    self._set_leader(False)
                    raise LeadershipLost(
                        f"lease {self.namespace}/{self.name} not renewed for "
                        f"{time.monotonic() - last_renew:.1f} s (renew deadline {self.renew_deadline:.0f} s)"
                    )
                sent = time.monotonic()
                try:
                    ok = await asyncio.wait_for(
                        self._try_acquire_or_renew(),
                        max(0.1, self.renew_deadline - (time.monotonic() - last_renew)),
                    )
                except (TimeoutError, Exception) as exc:
                    log.warning("leader election: renew failed: %s", exc)
                    ok = False
                if ok:
                    last_renew = self._renewed_at = sent
                elif time.monotonic() - last_renew >= self.renew_deadline:
                    self._set_leader(False)
                    raise LeadershipLost(
                        f"lease {self.namespace}/{self.name} not renewed within {self.renew_deadline:.0f} s"
                    )
        except asyncio.CancelledError:
            raise

    async def release(self) -> None:
        """Give the lease up (so a successor need not wait for it to expire)."""
        if not self.is_leader or self._observed is None:
            return
        spec = dict(self._observed.get("spec") or {})
        spec.update({"holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": microtime()})
        try:
            await write_lease(
                self.client, self._observed, name=self.name, namespace=self.namespace, spec=spec
            )
        except Exception as exc:
            log.warning("leader election: release failed: %s", exc)
        self._set_leader(False)
