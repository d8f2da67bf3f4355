"""FakeTransport: the :class:`~kubeop.client.transport.Transport` seam, answered in process.

A :class:`~kubeop.client.Client` built on it behaves as on the HTTP transport: the same request
values go in, the same decoded JSON comes out, failures raise the same typed
:class:`~kubeop.core.errors.ApiError` subclasses (built from the same ``Status`` documents), and
watches yield :class:`~kubeop.client.watch.WatchEvent` values until the cluster ends them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from kubeop.client.config import ClientConfig
from kubeop.client.transport import ListPart, Observer
from kubeop.client.watch import WatchEvent
from kubeop.core.errors import error_from_status
from kubeop.core.request import ApiRequest
from kubeop.testing.fake.store import Failure

if TYPE_CHECKING:
    from kubeop.testing.fake.cluster import FakeCluster

__all__ = ["FakeTransport"]


class FakeTransport:
    """One client's way into a :class:`~kubeop.testing.FakeCluster` (see ``cluster.client()``)."""

    def __init__(self, cluster: FakeCluster, config: ClientConfig) -> None:
        self._cluster = cluster
        self._config = config
        self._closed = False
        self.observer: Observer | None = None
        self.sent: list[ApiRequest] = []
        """Every request this transport sent (watches included), in order: what a test checks
        a reconciler's writes with."""

    @property
    def config(self) -> ClientConfig:
        """The client configuration this transport pretends to connect with."""
        return self._config

    def _check(self, req: ApiRequest) -> None:
        if self._closed:
            raise RuntimeError("the client is closed")
        self.sent.append(req)

    def _observe(self, req: ApiRequest, code: int) -> None:
        if self.observer is not None:
            self.observer(req.method, str(code), 0.0)

    async def request(self, req: ApiRequest) -> Any:
        """Answer one request from the fake cluster (or with the failure :meth:`FakeCluster.fail` set up)."""
        self._check(req)
        await asyncio.sleep(0)  # a request is a suspension point, as on a real connection
        try:
            fault = self._cluster._fault(req)
            if fault is not None:
                raise fault
            answer = self._cluster._api.handle(req)
        except Failure as failure:
            self._observe(req, failure.status["code"])
            raise error_from_status(failure.status, request=str(req), target=req.target) from None
        self._observe(req, 200)
        return answer

    async def stream_list(self, req: ApiRequest) -> AsyncGenerator[ListPart, None]:
        """Answer a list in one part."""
        doc = dict(await self.request(req))
        items = doc.pop("items", None) or []
        yield ListPart(doc, items)

    async def stream(self, req: ApiRequest) -> AsyncGenerator[WatchEvent[dict[str, Any]], None]:
        """Open a watch on the fake cluster and yield its events until it ends."""
        self._check(req)
        await asyncio.sleep(0)
        try:
            fault = self._cluster._fault(req)
            if fault is not None:
                raise fault
            initial, watch = self._cluster._api.open_watch(req, self)
        except Failure as failure:
            self._observe(req, 200 if failure.status["code"] == 410 else failure.status["code"])
            raise error_from_status(failure.status, request=str(req), target=req.target) from None
        self._observe(req, 200)
        try:
            for etype, obj in initial:
                yield WatchEvent(etype, obj)
            while True:
                item = await watch.queue.get()
                if item is None:
                    return
                if isinstance(item, Failure):
                    raise error_from_status(item.status, request=str(req), target=req.target)
                yield WatchEvent(*item)
        finally:
            self._cluster._store.watches.discard(watch)

    async def probe(self, path: str = "/readyz", *, time_limit: float = 2.0) -> int:
        """Always healthy (200) while the transport is open."""
        if self._closed:
            raise RuntimeError("the client is closed")
        return 200

    async def close(self) -> None:
        """Close the transport and end its open watches."""
        self._closed = True
        self._cluster._end_watches(owner=self)
