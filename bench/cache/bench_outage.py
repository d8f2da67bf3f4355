"""Outage benchmark: how long after an API server returns does an informer see changes again?

Starts its own control plane (etcd + kube-apiserver), puts a TCP proxy in front of the API
server that only forwards while the server is ready (like a load balancer health-checking
/readyz), syncs an informer through it, kills the API server for ``--outage`` seconds, restarts
it, and measures the time from readiness to the informer seeing an object created right then.
The client's transport retries are off (``max_retries=0``) so that the watcher's own backoff
(0.8 s doubling to 30 s, with jitter) is all that separates attempts. Each outage is measured
with the shared /readyz probe and with it disabled (client-go's behaviour: the backoff alone).

    .venv/bin/python bench/cache/bench_outage.py --outage 5 --outage 20 --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import secrets
import statistics
import time
from typing import Any

from kubeop.cache import SharedInformerFactory, WatcherConfig
from kubeop.client import Client, load_kubeconfig
from kubeop.core import ApiResource
from kubeop.testing import ControlPlane

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")


class Gate:
    """A loopback TCP proxy that can drop every connection and refuse new ones."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    async def open(self) -> None:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", self.port, reuse_address=True)
        self.port = self.server.sockets[0].getsockname()[1]

    async def shut(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None
        for w in list(self.writers):
            w.transport.abort()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        self.writers |= {writer, up_writer}

        async def pump(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            w.transport.abort()

        try:
            await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        finally:
            self.writers -= {writer, up_writer}


async def measure(cp: ControlPlane, outage: float, use_probe: bool) -> tuple[float, Any]:
    ns = f"outage-{secrets.token_hex(3)}"
    await asyncio.to_thread(cp.create_namespace, ns)
    gate = Gate(cp.ports["apiserver"])
    await gate.open()
    config = load_kubeconfig(
        cp.kubeconfig_path, qps=None, max_retries=0, server=f"https://127.0.0.1:{gate.port}"
    )
    try:
        async with Client(config) as client:
            watcher_config = WatcherConfig(server_probe=use_probe)
            async with SharedInformerFactory(client, config=watcher_config) as factory:
                informer = factory.informer(CM, namespace=ns)
                assert await factory.wait_for_cache_sync(timeout=60)
                await asyncio.to_thread(cp.stop_apiserver)
                await gate.shut()
                await asyncio.sleep(outage)
                await asyncio.to_thread(cp.start_apiserver)  # returns once /readyz passes
                ready = time.monotonic()
                await gate.open()
                body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "after"}}
                await asyncio.to_thread(cp.api.call, "POST", f"/api/v1/namespaces/{ns}/configmaps", body)
                while f"{ns}/after" not in informer.store:
                    await asyncio.sleep(0.01)
                return time.monotonic() - ready, informer.watcher.stats
    finally:
        await gate.shut()


async def main(outages: list[float], repeat: int) -> None:
    rows = []
    with ControlPlane(full=False) as cp:
        for outage in outages:
            for use_probe in (True, False):
                times = []
                for _ in range(repeat):
                    took, stats = await measure(cp, outage, use_probe)
                    times.append(took)
                    print(
                        f"  outage {outage:g} s, probe {'on' if use_probe else 'off'}: {took:.2f} s  {stats}"
                    )
                rows.append((outage, use_probe, statistics.median(times), max(times)))
    print("\n| outage | /readyz probe | seen after readiness (median) | worst |")
    print("|---|---|---|---|")
    for outage, use_probe, med, worst in rows:
        print(
            f"| {outage:g} s | {'on' if use_probe else 'off (backoff only)'} | {med:.2f} s | {worst:.2f} s |"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--outage", type=float, action="append", help="seconds the API server stays down")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.outage or [5.0, 20.0], args.repeat))
