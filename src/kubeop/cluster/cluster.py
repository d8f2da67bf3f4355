"""Cluster: one API server's client, shared cache, reconciler client, event recorder, server
probe and REST mapping, built before anything runs and fixed after.

    cluster = Cluster(client, name="my-operator")    # or: await Cluster.connect()
    informer = cluster.cache.informer(Deployment)
    ...
    await cluster.close()

A :class:`~kubeop.manager.Manager` builds one at each start and hands it to every runnable
(``await runnable.run(cluster, stop)``); a test builds one on a
:class:`~kubeop.testing.FakeCluster`'s client (``Cluster(fake.client())``) and runs a runnable
without a server.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from kubeop.cache import ServerProbe, SharedInformerFactory
from kubeop.client import Client, ClientConfig, load_config
from kubeop.client.discovery import Discovery
from kubeop.controller import EventRecorder, ReconcilerClient, WritePolicy

__all__ = ["Cluster"]


class Cluster:
    """One API server, shared (see the module docstring).

    Args:
        client: the API client (closed by :meth:`close` only with ``owns_client``).
        name: the component named by the events recorded, and the default field manager.
        field_manager: the reconciler client's writes' (default ``name``).
        resync_period: the informers' (0: never).
        policy: the reconciler client's write policy: a guard called before every write (a
            manager fences writes with its lease) and labels for the objects it writes (shard
            labels).
        owns_client: close ``client`` in :meth:`close`.
    """

    __slots__ = ("_api", "_cache", "_client", "_closed", "_owns_client", "_recorder")

    def __init__(
        self,
        client: Client,
        *,
        name: str = "kubeop-operator",
        field_manager: str | None = None,
        resync_period: float = 0.0,
        policy: WritePolicy | None = None,
        owns_client: bool = False,
    ) -> None:
        self._api = client
        self._cache = SharedInformerFactory(client, resync_period=resync_period)
        self._client = ReconcilerClient(
            client, self._cache, field_manager=field_manager or name, policy=policy or WritePolicy()
        )
        self._recorder = EventRecorder(client, name)
        self._owns_client = owns_client
        self._closed = False

    @classmethod
    async def connect(cls, config: ClientConfig | None = None, **options: Any) -> Cluster:
        """A cluster on a new client for ``config`` (default: the kubeconfig or the in-cluster
        service account), closed with the cluster; ``options`` as the constructor's.

        No client-side rate limit, as controller-runtime (>= 0.15) does: the API server's
        priority and fairness protects it, and a 50-qps bucket would throttle a burst of
        reconciles to a fraction of what the server can take.
        """
        config = config if config is not None else load_config()
        return cls(Client(config.with_options(qps=None)), owns_client=True, **options)

    @property
    def api(self) -> Client:
        """The API client (uncached reads and writes, watches)."""
        return self._api

    @property
    def cache(self) -> SharedInformerFactory:
        """The shared informers: one per watched kind, namespace and selectors."""
        return self._cache

    @property
    def client(self) -> ReconcilerClient:
        """The reconcilers' client: reads from the cache, writes fenced and labelled."""
        return self._client

    @property
    def recorder(self) -> EventRecorder:
        """The event recorder writing Kubernetes Events as the manager."""
        return self._recorder

    @property
    def probe(self) -> ServerProbe:
        """The "is the server back?" signal its watchers (and the controllers' parked requests)
        share: the cache's."""
        return self._cache.probe

    @property
    def mapper(self) -> Discovery:
        """The REST mapping: kinds and names to resources, by discovery (cached)."""
        return self._api.discovery

    def __repr__(self) -> str:
        return f"Cluster(server={self._api.config.server!r})"

    async def close(self) -> None:
        """Flush the events (up to 5 s), stop the informers, close the client if owned; a
        second call does nothing."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._recorder.flush(), 5)
        try:
            await self._cache.stop()
        finally:
            if self._owns_client:
                await self._api.close()
