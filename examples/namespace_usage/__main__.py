"""Serve NamespaceUsage: ``python -m examples.namespace_usage --cert-dir DIR [--address HOST:PORT]``
(tls.crt and tls.key in DIR, for the Service name the APIService names; the kubeconfig or the
pod's service account for the caches and the reviews)."""

from __future__ import annotations

import argparse
import asyncio
import signal

from examples.namespace_usage.usage import NamespaceUsage, UsageStorage
from kubeop.apiserver import APIServer
from kubeop.client import Client, load_config


async def serve(address: str, cert_dir: str) -> None:
    client = Client(load_config())
    storage = UsageStorage(client)
    await storage.start()
    server = APIServer([NamespaceUsage], storage, address=address, cert_dir=cert_dir)
    await server.start(client)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()  # closes the storage too
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="namespace-usage", description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="0.0.0.0:8443", help="where to serve HTTPS (HOST:PORT)")
    parser.add_argument("--cert-dir", required=True, help="the directory of tls.crt and tls.key")
    args = parser.parse_args()
    asyncio.run(serve(args.address, args.cert_dir))


if __name__ == "__main__":
    main()
