"""Helpers for the cache's tests on the real control plane: objects, polling, a fault-injecting proxy."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kubeop.client import Client
from kubeop.core import AlreadyExists, ApiResource

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")


def configmap(name: str, namespace: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "data": data,
    }


async def create_many(client: Client, objects: list[dict[str, Any]], concurrency: int = 32) -> None:
    sem = asyncio.Semaphore(concurrency)

    async def one(obj: dict[str, Any]) -> None:
        async with sem:
            await client.create(obj)

    await asyncio.gather(*(one(o) for o in objects))


async def eventually(check: Callable[[], Any], *, within: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + within
    while True:
        value = check()
        if isinstance(value, Awaitable):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:.0f} s waiting for {what}")
        await asyncio.sleep(0.02)


CRD = ApiResource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    kind="CustomResourceDefinition",
    namespaced=False,
)


async def install_crd(client: Client, crd: dict[str, Any]) -> None:
    """Create ``crd`` (if missing) and wait until it is Established."""
    with contextlib.suppress(AlreadyExists):
        await client.create(crd, resource=CRD)

    async def established() -> bool:
        got = await client.get(CRD, crd["metadata"]["name"])
        conditions = (got.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    await eventually(established, within=30, what=f"CRD {crd['metadata']['name']} established")


class Proxy:
    """A loopback TCP proxy in front of the API server that can freeze or cut connections.

    ``freeze()`` stops forwarding on every open connection without closing it (a dead NAT entry,
    a hung load balancer); new connections work. ``cut()`` closes every connection and refuses
    new ones until ``restore()``.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._conns: set[_Pair] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        pair = _Pair(writer, up_writer)
        self._conns.add(pair)
        try:
            await asyncio.gather(pair.pump(reader, up_writer), pair.pump(up_reader, writer))
        finally:
            self._conns.discard(pair)
            pair.close()

    def freeze(self) -> int:
        for pair in self._conns:
            pair.frozen = True
        return len(self._conns)

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for pair in list(self._conns):
            pair.close()

    async def restore(self) -> None:
        if self._server is None:
            await self.start()

    async def close(self) -> None:
        await self.cut()


class _Pair:
    def __init__(self, client: asyncio.StreamWriter, upstream: asyncio.StreamWriter) -> None:
        self.writers = (client, upstream)
        self.frozen = False
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if self.frozen:  # swallow everything from now on, keep the sockets open
                    await self._closed
                    break
                writer.write(data)
                await writer.drain()
        self.close()

    def close(self) -> None:
        if not self._closed.done():
            self._closed.set_result(None)
        for w in self.writers:
            if not w.is_closing():
                w.transport.abort()
