"""ShardGate: what a controller asks when its manager shards the work across replicas.

The controller stays ignorant of leases and rings (kubeop.manager.sharding implements the gate):
its event handlers enqueue only the requests the gate :meth:`~ShardGate.admits`, its workers
start a reconcile only after :meth:`~ShardGate.begin` says so and tell :meth:`~ShardGate.end`,
and the gate calls back the function given to :meth:`~ShardGate.attach` when keys move to this
replica (so that it enqueues them: their events were filtered out while another replica owned
them). Without sharding the controller has no gate and none of this runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kubeop.controller.request import Request
from kubeop.core.resource import ApiResource

__all__ = ["ShardGate"]


class ShardGate(Protocol):
    def label_selector(
        self,
        controller: str,
        resource: ApiResource,
        namespace: str | None,
        selector: str | None,
        *,
        owner: ApiResource | None = None,
    ) -> str | None:
        """The selector of the controller's informer of its primary kind, or with ``owner`` (the
        primary kind) of a kind it :meth:`~kubeop.controller.Controller.owns`, given its own
        (``Sharding(labels=True)``: narrowed to this replica's shard label)."""
        ...

    def admits(self, controller: str, request: Request) -> bool:
        """Is ``request`` this replica's (under the newest membership, settled or not)?"""
        ...

    async def begin(self, controller: str, request: Request) -> bool:
        """Wait until this replica may reconcile ``request``; False: it is not this replica's
        (drop it). After True, :meth:`end` must follow."""
        ...

    def end(self, controller: str, request: Request) -> None: ...

    def attach(
        self,
        controller: str,
        enqueue_owned: Callable[[], Sequence[Any]],
        depth: Callable[[], int] | None = None,
    ) -> None:
        """``enqueue_owned()`` enqueues every cached primary object this replica owns now and
        returns them; ``depth()``: the controller's queue length (a metric)."""
        ...
