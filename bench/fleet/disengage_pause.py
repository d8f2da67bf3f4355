"""The pause a fleet's disengage causes: N engaged FakeCluster members, each with M cached
ConfigMaps; each cluster is disengaged in turn and the garbage collections it ran are timed.

    PYTHONPATH=src python bench/fleet/disengage_pause.py --clusters 10 --objects 5000 [--mode MODE]

``--mode release`` (the default, this code): a disengaged member empties its informers' stores,
no collection. ``--mode collect``: as before, no emptying, and one full collection of the frozen
objects (``collect_frozen``) after each disengage. ``--mode none``: neither (what the cycles
keep).

Prints, per disengage: the wall time of ``Fleet.disengage`` (with ``collect``: and of the
collection), the longest and the total time the collector held the event loop during it (from
``gc.callbacks``), the frozen objects before it, and how many of the disengaged cluster's cached
objects are still alive after it (its informers, reached through weak references, and their
stores). At the end, the objects left in frozen garbage cycles (found by one unfreeze and full
collection), and the machine. ``--json FILE`` writes all of it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import statistics
import sys
import time
import weakref
from collections.abc import Callable
from typing import Any

import kubeop.fleet._member
from kubeop.cache.gcpause import collect_frozen
from kubeop.client import Client
from kubeop.controller import Context, Controller, Request
from kubeop.core.resource import ApiResource
from kubeop.fleet import Engagement, Fleet
from kubeop.testing import FakeCluster

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")


class Fakes:
    name = "fakes"

    def __init__(self, clusters: dict[str, FakeCluster]) -> None:
        self.clusters = clusters
        self.fleet: Engagement | None = None

    async def run(self, fleet: Engagement, stop: asyncio.Event) -> None:
        self.fleet = fleet
        for name, fake in self.clusters.items():
            await fleet.engage(name, fake.transport(namespace="default").config, connect=_connect(fake))
        await stop.wait()


def _connect(fake: FakeCluster) -> Callable[[], Client]:
    return lambda: fake.client(namespace="default")


async def _seed(fake: FakeCluster, cluster: str, n: int) -> None:
    async with fake.client() as api:
        for i in range(n):
            await api.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": f"cm-{i}", "namespace": "default", "labels": {"app": "bench"}},
                    "data": {"cluster": cluster, "index": str(i), "payload": "x" * 64},
                }
            )


class _GcTimer:
    """The collections run while it is on (``gc.callbacks``): (generation, seconds) each."""

    def __init__(self) -> None:
        self.on = False
        self.runs: list[tuple[int, float]] = []
        self._t0 = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if not self.on:
            return
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.runs.append((int(info["generation"]), time.perf_counter() - self._t0))


def _tracked() -> dict[str, int]:
    return {
        "young": sum(gc.get_count()),
        "frozen": gc.get_freeze_count(),
        "gen_objects": len(gc.get_objects()),
    }


async def _run(clusters: int, objects: int, mode: str) -> tuple[list[dict[str, Any]], int]:
    fakes = {f"c{i}": FakeCluster() for i in range(clusters)}
    t0 = time.perf_counter()
    for name, fake in fakes.items():
        await _seed(fake, name, objects)
    print(f"seeded {clusters} x {objects} ConfigMaps in {time.perf_counter() - t0:.1f} s", flush=True)

    async def reconcile(req: Request, ctx: Context) -> None:
        return None

    provider = Fakes(fakes)
    fleet = Fleet(provider, name="disengage-bench")
    fleet.add(Controller.for_(CM).named("noop").reconcile(reconcile))
    stop = asyncio.Event()
    run = asyncio.create_task(fleet.start(stop))
    timer = _GcTimer()
    gc.callbacks.append(timer)
    rows: list[dict[str, Any]] = []
    try:
        t0 = time.perf_counter()
        for name in fakes:
            await fleet.wait_engaged(name, 600)
        print(f"engaged, caches synced in {time.perf_counter() - t0:.1f} s", flush=True)
        await asyncio.sleep(1.0)  # the informers' pause ended: what they loaded is frozen
        assert provider.fleet is not None
        for k, name in enumerate(fakes):
            informers = [weakref.ref(i) for i in fleet.cluster(name).cache.informers]
            before = _tracked()
            timer.runs.clear()
            timer.on = True
            t0 = time.perf_counter()
            await provider.fleet.disengage(name)
            if mode == "collect":
                collect_frozen()
            wall = time.perf_counter() - t0
            timer.on = False
            runs = list(timer.runs)
            row = {
                "disengage": k + 1,
                "cluster": name,
                "engaged_before": clusters - k,
                "wall_ms": round(wall * 1e3, 2),
                "gc_pause_max_ms": round(max((s for _, s in runs), default=0.0) * 1e3, 2),
                "gc_pause_total_ms": round(sum(s for _, s in runs) * 1e3, 2),
                "gc_runs": [(g, round(s * 1e3, 2)) for g, s in runs],
                "cached_alive": sum(len(i.store) for ref in informers if (i := ref()) is not None),
                **before,
            }
            rows.append(row)
            print(
                f"disengage {k + 1:2d} ({clusters - k:2d} engaged): wall {row['wall_ms']:8.1f} ms, "
                f"gc max {row['gc_pause_max_ms']:7.1f} ms total {row['gc_pause_total_ms']:7.1f} ms "
                f"in {len(runs)} runs {sorted({g for g, _ in runs})}, its cached objects alive "
                f"{row['cached_alive']:,}, frozen before {before['frozen']:,}",
                flush=True,
            )
            await asyncio.sleep(0.2)
        gc.unfreeze()
        left = gc.collect()
        gc.freeze()
        print(f"left in frozen garbage cycles after the {clusters} disengages: {left:,} objects", flush=True)
    finally:
        stop.set()
        await asyncio.wait_for(run, 120)
        gc.callbacks.remove(timer)
    return rows, left


def _machine() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "load_avg": os.getloadavg(),
        "gc_thresholds": gc.get_threshold(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--objects", type=int, default=5000, help="ConfigMaps per cluster")
    parser.add_argument("--mode", choices=("release", "collect", "none"), default="release")
    parser.add_argument("--json", help="write the rows and the machine to this file")
    args = parser.parse_args()
    if args.mode != "release":
        kubeop.fleet._member._release_caches = lambda cluster: None
    rows, left = asyncio.run(_run(args.clusters, args.objects, args.mode))
    machine = _machine()
    pauses = [r["gc_pause_max_ms"] for r in rows]
    print(
        f"mode {args.mode}: gc pause per disengage: first {pauses[0]:.1f} ms, "
        f"median {statistics.median(pauses):.1f} ms, last {pauses[-1]:.1f} ms; "
        f"wall median {statistics.median(r['wall_ms'] for r in rows):.1f} ms"
    )
    print("machine:", json.dumps(machine))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {"args": vars(args), "machine": machine, "rows": rows, "left_in_cycles": left}, f, indent=1
            )


if __name__ == "__main__":
    main()
