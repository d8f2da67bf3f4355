"""The reconciler client's hot path alone: a cached get, a get that meets the client's own write,
a no-op create_or_update and a no-op patch_status, over a hand-filled cache (no I/O).

Prints the best CPU microseconds per call over many short rounds (the minimum is what a loaded
machine distorts least). Runs on trees before and after the client's split into parts (it seeds
the remembered write through whichever the tree has), so two trees can be compared in one run:

    PYTHONPATH=<tree>/src .venv/bin/python bench/operator/client_cost.py [--rounds 60] [--n 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import kubeop_operator as untyped_op
from reconcile_cost import CONFIGMAP, WIDGET, Informer

from kubeop.controller import ReconcilerClient

CONFIGMAPS, WIDGETS = untyped_op.CONFIGMAPS, untyped_op.WIDGETS


class Behind(Informer):
    """An informer whose watch has not delivered the client's last write yet."""

    def has_applied(self, resource_version: str) -> bool:
        return False


def _client(informer: Informer) -> ReconcilerClient:
    client = ReconcilerClient(None, None)  # type: ignore[arg-type]  # never asked: all is cached
    for key in (WIDGETS, ("bench.kubeop.dev/v1", "Widget")):
        client._resources[key] = WIDGETS
    for key in (CONFIGMAPS, ("v1", "ConfigMap")):
        client._resources[key] = CONFIGMAPS
    client.use_informer(WIDGETS, Informer(WIDGET))
    client.use_informer(CONFIGMAPS, informer)
    return client


async def measure(rounds: int, n: int) -> dict[str, float]:
    client = _client(Informer(CONFIGMAP))
    behind = _client(Behind(CONFIGMAP))
    written = dict(CONFIGMAP, metadata=dict(CONFIGMAP["metadata"], resourceVersion="9999"))
    if hasattr(behind, "_ledger"):
        behind._ledger.remember(CONFIGMAPS, written)
    else:  # before the split
        behind._remember(CONFIGMAPS, written)  # type: ignore[attr-defined]
    desired = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "w00001", "namespace": "bench"},
        "data": {"value": "one"},
    }

    async def get() -> Any:
        return await client.get(CONFIGMAPS, "w00001", namespace="bench")

    async def get_own_write() -> Any:
        return await behind.get(CONFIGMAPS, "w00001", namespace="bench")

    async def create_or_update() -> Any:
        return await client.create_or_update(desired)

    async def patch_status() -> Any:
        return await client.patch_status(WIDGET, {"observedGeneration": 1})

    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        "get": get,
        "get_own_write": get_own_write,
        "create_or_update_noop": create_or_update,
        "patch_status_noop": patch_status,
    }
    best: dict[str, float] = {}
    for name, call in calls.items():
        assert await call() is not None or name == "patch_status_noop"
        fastest = float("inf")
        for _ in range(rounds):
            gc.collect()
            t0 = time.process_time()
            for _ in range(n):
                await call()
            fastest = min(fastest, (time.process_time() - t0) / n * 1e6)
        best[name] = round(fastest, 3)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--n", type=int, default=2000)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.rounds, args.n))))


if __name__ == "__main__":
    main()
