"""The Python work of one no-op reconcile of the benchmark's Widget operator, on dicts and on models.

A resync or a redundant event reconciles an object whose ConfigMap and status already match: the
reconcile reads the Widget from the cache, builds the ConfigMap, sets the owner reference,
compares, and writes nothing. This runs exactly that, kubeop_operator.reconcile and
kubeop_typed_operator.reconcile against a ReconcilerClient over a hand-filled cache (no API
server, no I/O), and prints the CPU per reconcile: the typed path's own cost, without the noise
of a cluster on a shared machine.

    .venv/bin/python bench/operator/reconcile_cost.py [--n 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import kubeop_operator as untyped_op
import kubeop_typed_operator as typed_op

from kubeop.controller import ReconcilerClient, Request
from kubeop.kinds import ConfigMap

Obj = dict[str, Any]
WIDGET: Obj = {
    "apiVersion": "bench.kubeop.dev/v1",
    "kind": "Widget",
    "metadata": {
        "name": "w00001",
        "namespace": "bench",
        "uid": "0b5c4c9e-1d0e-4bbf-9a4e-2f1f0c6c1a01",
        "resourceVersion": "1234",
        "generation": 1,
        "creationTimestamp": "2026-11-22T00:00:00Z",
    },
    "spec": {"value": "one"},
    "status": {"observedGeneration": 1, "configMap": "w00001"},
}
CONFIGMAP: Obj = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
        "name": "w00001",
        "namespace": "bench",
        "uid": "5d0f3b1e-7d36-4d55-8a43-0d7f3c9b2e02",
        "resourceVersion": "1235",
        "creationTimestamp": "2026-11-22T00:00:00Z",
        "ownerReferences": [
            {
                "apiVersion": "bench.kubeop.dev/v1",
                "kind": "Widget",
                "name": "w00001",
                "uid": "0b5c4c9e-1d0e-4bbf-9a4e-2f1f0c6c1a01",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    },
    "data": {"value": "one"},
}


class Store:
    def __init__(self, obj: Obj) -> None:
        self.objects = {f"{obj['metadata']['namespace']}/{obj['metadata']['name']}": obj}

    def get_by_key(self, key: str) -> Obj | None:
        return self.objects.get(key)


class Informer:
    """What the reconciler client reads of an informer: its store, synced."""

    def __init__(self, obj: Obj) -> None:
        self.store = Store(obj)

    def has_synced(self) -> bool:
        return True

    def has_applied(self, resource_version: str) -> bool:
        return True


class Context:
    def __init__(self, client: ReconcilerClient) -> None:
        self.client = client


def _client() -> ReconcilerClient:
    client = ReconcilerClient(None, None)  # type: ignore[arg-type]  # never asked: all is cached
    for key in (untyped_op.WIDGETS, typed_op.Widget):
        client._resources[key] = untyped_op.WIDGETS
    for key in (untyped_op.CONFIGMAPS, ConfigMap, ("v1", "ConfigMap")):
        client._resources[key] = untyped_op.CONFIGMAPS
    client.use_informer(untyped_op.WIDGETS, Informer(WIDGET))
    client.use_informer(untyped_op.CONFIGMAPS, Informer(CONFIGMAP))
    return client


async def measure(n: int, rounds: int) -> dict[str, Any]:
    ctx = Context(_client())
    req = Request("bench", "w00001")
    runs: dict[str, list[float]] = {"kubeop": [], "kubeop-typed": []}
    for _ in range(rounds):
        for name, reconcile in (("kubeop", untyped_op.reconcile), ("kubeop-typed", typed_op.reconcile)):
            await reconcile(req, ctx)  # type: ignore[arg-type]
            gc.collect()
            t0 = time.process_time()
            for _ in range(n):
                await reconcile(req, ctx)  # type: ignore[arg-type]
            runs[name].append((time.process_time() - t0) / n * 1e6)
    best = {name: round(min(us), 2) for name, us in runs.items()}
    return {
        "us_per_noop_reconcile": best,
        "typed_extra_us": round(best["kubeop-typed"] - best["kubeop"], 2),
        "all_us": {name: [round(u, 2) for u in us] for name, us in runs.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.n, args.rounds)), indent=1))


if __name__ == "__main__":
    main()
