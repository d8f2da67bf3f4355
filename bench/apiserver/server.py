"""The aggregated API server the benchmark calls, in its own process: ``Widget`` of
``agg.bench.kubeop.dev/v1`` kept in the storage named on the command line.

    python server.py --storage memory|sqlite|etcd --port P --certs DIR --kubeconfig K \
        [--sqlite FILE] [--etcd URL] [--review-qps none]

Prints ``ready`` once it serves; stops when its standard input closes.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from kubeop.apiserver import APIServer, EtcdStorage, MemoryStorage, SQLiteStorage, Storage
from kubeop.client import Client, load_kubeconfig
from kubeop.crd import CustomResource
from kubeop.crd.resource import CamelModel


class WidgetSpec(CamelModel):
    size: int = 1
    color: str = "blue"
    labels: dict[str, str] = {}


def widget(group: str) -> type[CustomResource]:
    """The same kind in ``group``: served by this server, or by kube-apiserver as a CRD."""

    class Widget(CustomResource, group=group, version="v1"):
        spec: WidgetSpec

    return Widget


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--storage", choices=("memory", "sqlite", "etcd"), required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--certs", required=True)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--sqlite", default="")
    parser.add_argument("--etcd", default="")
    parser.add_argument("--review-qps", default="default", help="'none': the review client unthrottled")
    args = parser.parse_args()
    storage: Storage
    if args.storage == "memory":
        storage = MemoryStorage()
    elif args.storage == "sqlite":
        storage = SQLiteStorage(args.sqlite)
    else:
        storage = EtcdStorage(args.etcd, prefix="/kubeop-bench/widgets/")
    options = {"qps": None} if args.review_qps == "none" else {}
    async with Client(load_kubeconfig(args.kubeconfig, **options)) as client:
        server = APIServer(
            [widget("agg.bench.kubeop.dev")], storage, address=f"127.0.0.1:{args.port}", cert_dir=args.certs
        )
        await server.start(client)
        print("ready", flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)  # until the driver closes our stdin
        await server.stop()


if __name__ == "__main__":
    asyncio.run(main())
