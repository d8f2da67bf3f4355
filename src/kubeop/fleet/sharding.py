"""Replicas of a fleet operator splitting the clusters between them.

    fleet = Fleet(KubeconfigSecrets("fleet-system"), sharding=ClusterSharding(namespace="fleet-system"))

Every replica runs the same providers and so knows every cluster; each cluster belongs to one
live replica, picked by rendezvous hashing over the members of a ring kept in Leases in the hub
(the same membership and handover protocol as :class:`~kubeop.manager.Sharding`, with whole
clusters as the keys). When replicas join or leave, a cluster moves only after its old owner
stopped its controllers there (in-flight reconciles drained) and acknowledged, so no cluster is
ever reconciled by two replicas at once; a replica whose membership Lease was not renewed within
``renew_deadline`` refuses its writes and stops. A replica that dies (SIGKILL) is counted gone
``lease_duration`` after its last renewal, and its clusters start elsewhere then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from kubeop.cache import SharedInformerFactory
from kubeop.client import Client, ClientConfig, load_config
from kubeop.manager.lease import LeaseTiming
from kubeop.manager.membership import Membership, ShardLeaseLost

__all__ = ["ClusterSharding"]


@dataclass(frozen=True)
class ClusterSharding:
    """How a fleet's replicas split its clusters (see the module docstring).

    Args:
        namespace: the hub namespace of the ring's Leases.
        hub: the hub cluster: a config (default: the kubeconfig or the in-cluster service
            account) or a client (not closed by the fleet).
        name: the ring's name (default: the fleet's name).
        identity: this replica's member name (default: host name and a random suffix).
        lease_duration, renew_deadline, retry_period: the membership Leases' timings.
    """

    namespace: str
    hub: ClientConfig | Client | None = None
    name: str | None = None
    identity: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class ClusterShards:
    """One replica's membership in a fleet's ring (private to the fleet)."""

    def __init__(self, options: ClusterSharding, fleet_name: str, on_change: Callable[[], None]) -> None:
        hub = options.hub
        self._owns_client = not isinstance(hub, Client)
        self.client = (
            hub if isinstance(hub, Client) else Client((hub or load_config()).with_options(qps=None))
        )
        self.cache = SharedInformerFactory(self.client)
        self.membership = Membership(
            self.client,
            self.cache,
            options.name or fleet_name,
            options.namespace,
            identity=options.identity,
            timing=LeaseTiming(options.lease_duration, options.renew_deadline, options.retry_period),
            on_change=on_change,
        )
        self.handover = self.membership.handover

    @property
    def identity(self) -> str:
        return self.membership.identity

    @staticmethod
    def key(cluster: str) -> str:
        return f"cluster:{cluster}"

    def owns(self, cluster: str) -> bool:
        """Is ``cluster`` this replica's under the newest ring seen?"""
        return self.handover.owns(self.key(cluster))

    def try_begin(self, cluster: str) -> bool:
        """May this replica start running ``cluster`` now (owned, ring settled, Lease held)?"""
        return self.handover.try_begin(self.key(cluster))

    def end(self, cluster: str) -> None:
        """``cluster`` stopped running here: acknowledge the ring when drained."""
        self.handover.end(self.key(cluster))
        self.membership.wake()

    def fence(self) -> None:
        """A cluster's write guard: no writes from a replica whose Lease may have lapsed."""
        if not self.handover.holds():
            m = self.membership
            raise ShardLeaseLost(
                f"not writing: fleet membership lease {m.namespace}/{m.lease_name} not renewed "
                f"within {m.renew_deadline:.0f} s"
            )

    async def run(self) -> None:
        """Keep the membership until cancelled; raises ShardLeaseLost when the Lease lapsed."""
        self.cache.start()
        await self.membership.run()

    async def close(self, *, leave: bool) -> None:
        if leave:
            await asyncio.shield(self.membership.leave())
        await self.cache.stop()
        if self._owns_client:
            await self.client.close()
