"""bench/operator's Widget operator (the same reconcile), started for bench/scale: prints "ready"
when it starts, "synced <seconds> <unix time>" once every informer of its controller has synced,
and "first <unix time>" when its first reconcile starts (for the start-up phase: the driver
compares these with the time it started the process). With BENCH_GC_LOG=<path> it records every
cyclic garbage collection (generation, start, seconds) and writes them as JSON to <path>.<pid>
when it is terminated, with the start and end of every reconcile of a latency Widget. With
BENCH_PROFILE=<path> it profiles (cProfile) its start, imports included, up to its first
reconcile, and writes the profile to <path>.<pid> then.

Run: KUBECONFIG=... python widget_operator.py [workers]
"""

from __future__ import annotations

import os

if os.environ.get("BENCH_PROFILE"):
    import cProfile

    _profile: cProfile.Profile | None = cProfile.Profile()
    _profile.enable()
else:
    _profile = None

import asyncio
import atexit
import contextlib
import gc
import json
import logging
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "operator"))

from kubeop_operator import CONFIGMAPS, WIDGETS, reconcile

from kubeop.controller import Context, Controller, Request
from kubeop.manager import Manager

_first = True
# (name, unix start, unix end) of the reconciles of the latency phase's Widgets ("lat-..."),
# written with the GC record: the stages of a create from the operator's side.
_stages: list[tuple[str, float, float]] = []


async def reconcile_and_report(req: Request, ctx: Context) -> None:
    global _first
    if _first:
        _first = False
        at = time.time()
        if _profile is not None:  # written before the line: the driver stops the process on it
            _profile.disable()
            _profile.dump_stats(f"{os.environ['BENCH_PROFILE']}.{os.getpid()}")
        print(f"first {at:.6f}", flush=True)
    if not req.name.startswith("lat-"):
        await reconcile(req, ctx)
        return
    started = time.time()
    await reconcile(req, ctx)
    _stages.append((req.name, started, time.time()))


async def report_sync(manager: Manager, started: float) -> None:
    while True:
        cache = manager.cache
        informers = cache.informers if cache is not None else []
        if len(informers) >= 2 and all(i.has_synced() for i in informers):
            print(f"synced {time.perf_counter() - started:.3f} {time.time():.6f}", flush=True)
            return
        await asyncio.sleep(0.01)


def record_collections(path: str) -> None:
    """Record every collection of the cyclic GC; dump them on SIGTERM."""
    collections: list[tuple[int, float, float]] = []
    started: list[float] = []

    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            t0 = started.pop()
            collections.append(
                (info["generation"], time.time() - (time.perf_counter() - t0), time.perf_counter() - t0)
            )

    def dump() -> None:
        import kubeop

        with open(f"{path}.{os.getpid()}", "w") as f:
            json.dump({"kubeop": kubeop.__file__, "collections": collections, "reconciles": _stages}, f)

    def terminate(signum: int, frame: object) -> None:  # unless the manager handles SIGTERM itself
        sys.exit(0)

    gc.callbacks.append(callback)
    atexit.register(dump)
    signal.signal(signal.SIGTERM, terminate)


async def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    if os.environ.get("BENCH_GC_LOG"):
        record_collections(os.environ["BENCH_GC_LOG"])
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
