"""Keeping a coordination.k8s.io/v1 Lease: the one loop under leader election and shard membership.

:class:`~kubeop.manager.leader.LeaderElector` (one Lease, many candidates) and
:class:`~kubeop.manager.membership.Membership` (one Lease per replica) keep their Leases with the
same parts, held here once:

- :func:`check_lease_timing`: client-go's rule for ``lease_duration``, ``renew_deadline`` and
  ``retry_period``;
- :func:`write_lease`: create a Lease, or update the one last read (carrying its
  resourceVersion, so a write over someone else's fails with Conflict);
- :func:`retry_until`: try an acquire/create until it succeeds, sleeping between attempts, and
  say when the successful attempt was *sent* (renewal deadlines count from then: a reply that
  comes late does not make the lease younger).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeop.client import Client
from kubeop.core.resource import ApiResource

__all__ = ["LEASES", "check_lease_timing", "microtime", "retry_until", "write_lease"]

LEASES = ApiResource("coordination.k8s.io", "v1", "leases", kind="Lease")


@dataclass(frozen=True)
class LeaseTiming:
    """A lease holder's timings, in seconds, with client-go's defaults and rule
    (:func:`check_lease_timing`)."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def checked(self, what: str) -> LeaseTiming:
        """This timing, if it follows client-go's rule (else ValueError naming ``what``)."""
        check_lease_timing(what, self.lease_duration, self.renew_deadline, self.retry_period)
        return self


def check_lease_timing(what: str, lease_duration: float, renew_deadline: float, retry_period: float) -> None:
    """client-go's rule for lease timings, shared by leader election and shard membership:
    a holder must give up (renew_deadline) before others may take over (lease_duration), and
    get more than one retry in before it gives up."""
    if not lease_duration > renew_deadline > retry_period * 1.2:
        raise ValueError(
            f"{what} needs lease_duration > renew_deadline > 1.2 * retry_period "
            f"(got {lease_duration}, {renew_deadline}, {retry_period})"
        )


def microtime(ts: float | None = None) -> str:
    """``ts`` (default: now) as a Lease's MicroTime (``acquireTime``, ``renewTime``)."""
    return dt.datetime.fromtimestamp(ts if ts is not None else time.time(), dt.UTC).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ"
    )


async def write_lease(
    client: Client,
    lease: Mapping[str, Any] | None,
    *,
    name: str,
    namespace: str,
    spec: Mapping[str, Any] | None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Create the Lease ``namespace/name`` when ``lease`` is None, else update ``lease`` (as last
    read: its resourceVersion is the precondition); returns the Lease the server stored.

    ``spec`` replaces the spec (None: kept as it is); ``annotations`` are merged over the Lease's;
    ``labels`` are set on a Lease created. Raises AlreadyExists (created meanwhile) or Conflict
    (written meanwhile) when another writer came first.
    """
    if lease is None:
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if labels is not None:
            metadata["labels"] = dict(labels)
        if annotations is not None:
            metadata["annotations"] = dict(annotations)
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": dict(spec or {}),
        }
        return await client.create(body, resource=LEASES)
    updated = dict(lease)
    if annotations is not None:
        meta = dict(lease.get("metadata") or {})
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
        updated["metadata"] = meta
    if spec is not None:
        updated["spec"] = dict(spec)
    return await client.update(updated, resource=LEASES)


async def retry_until(
    attempt: Callable[[], Awaitable[bool]],
    delay: Callable[[], float],
    log: logging.Logger,
    what: str,
    errors: tuple[type[BaseException], ...],
) -> float:
    """Await ``attempt`` until it returns True, sleeping ``delay()`` seconds after each failure;
    returns when (``time.monotonic``) the successful attempt started.

    An attempt that raises one of ``errors`` is a failure too, logged as ``"<what>: <error>"``;
    anything else propagates.
    """
    while True:
        sent = time.monotonic()
        try:
            if await attempt():
                return sent
        except errors as exc:
            log.warning("%s: %s", what, exc)
        await asyncio.sleep(delay())
