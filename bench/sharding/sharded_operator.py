"""bench/operator's kubeop operator, sharded: ``Manager(sharding=Sharding())``, or with
``labels`` ``Sharding(labels=True)`` (each replica caches only its shard's Widgets and ConfigMaps).

Run: KUBECONFIG=... python sharded_operator.py NAMESPACE [workers] [predicate|labels]
Prints ``ready`` once its caches synced. With ``BENCH_PROFILE=PATH`` it runs under cProfile and
writes the stats to ``PATH.<pid>`` when it stops.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import sys
from pathlib import Path

from kubeop.controller import Controller
from kubeop.manager import Manager, Sharding

_spec = importlib.util.spec_from_file_location(
    "kubeop_operator", Path(__file__).parent.parent / "operator" / "kubeop_operator.py"
)
assert _spec is not None and _spec.loader is not None
base = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(base)


async def run(namespace: str, workers: int, labels: bool) -> None:
    manager = Manager(
        name="widget-operator",
        metrics_address=None,
        health_address=None,
        leader_election_namespace=namespace,
        sharding=Sharding(events=False, labels=labels),
    )
    manager.add(
        Controller.for_(base.WIDGETS, namespace=namespace)
        .owns(base.CONFIGMAPS)
        .max_concurrent(workers)
        .reconcile(base.reconcile)
    )

    async def announce() -> None:
        while not manager._synced:
            await asyncio.sleep(0.02)
        print("ready", flush=True)

    task = asyncio.create_task(announce())
    try:
        await manager._run_with_signals()
    finally:
        task.cancel()


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    mode = sys.argv[3] if len(sys.argv) > 3 else "predicate"
    if mode not in ("predicate", "labels"):
        raise SystemExit(f"mode must be predicate or labels, not {mode!r}")
    args = (sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 16, mode == "labels")
    profile = os.environ.get("BENCH_PROFILE")
    if profile:  # cProfile the whole run into BENCH_PROFILE.<pid>; written on SIGTERM
        import cProfile

        cProfile.runctx("asyncio.run(run(*args))", globals(), {"args": args}, f"{profile}.{os.getpid()}")
    else:
        asyncio.run(run(*args))


if __name__ == "__main__":
    main()
