"""bench/operator's Widget operator (the same reconcile), started for bench/scale: prints "ready"
when it starts, "synced <seconds> <unix time>" once every informer of its controller has synced,
and "first <unix time>" when its first reconcile starts (for the start-up phase: the driver
compares these with the time it started the process).

Run: KUBECONFIG=... python widget_operator.py [workers]
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "operator"))

from kubeop_operator import CONFIGMAPS, WIDGETS, reconcile

from kubeop.controller import Context, Controller, Request
from kubeop.manager import Manager

_first = True


async def reconcile_and_report(req: Request, ctx: Context) -> None:
    global _first
    if _first:
        _first = False
        print(f"first {time.time():.6f}", flush=True)
    await reconcile(req, ctx)


async def report_sync(manager: Manager, started: float) -> None:
    while True:
        cache = manager.cache
        informers = cache.informers if cache is not None else []
        if len(informers) >= 2 and all(i.has_synced() for i in informers):
            print(f"synced {time.perf_counter() - started:.3f} {time.time():.6f}", flush=True)
            return
        await asyncio.sleep(0.01)


async def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    manager = Manager(name="widget-operator", metrics_address=None, health_address=None)
    manager.add(
        Controller.for_(WIDGETS).owns(CONFIGMAPS).max_concurrent(workers).reconcile(reconcile_and_report)
    )
    print("ready", flush=True)
    reporter = asyncio.create_task(report_sync(manager, time.perf_counter()))
    try:
        await manager.start()
    finally:
        reporter.cancel()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
