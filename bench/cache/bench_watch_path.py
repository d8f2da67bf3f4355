"""Watch event path benchmark: events per second through a Watcher, this tree beside another.

Feeds N pre-built MODIFIED events (and the initial list and a few bookmarks) from an in-memory
ListerWatcher through ``kubeop.cache.Watcher`` and counts the events the consumer receives per
second of CPU time: the cost of the watcher itself, without decoding, network or a cache
(``--decode``: each event is also decoded from ~1 KB of JSON and passed through the informers'
default transform, as a ConfigMap from the API server would be: the watch path as a whole). The
watcher of another commit (``--baseline REV``, default ``main``) is loaded from git into the same
process and run alternately with this tree's, so both see the same machine at the same moment.

    PYTHONPATH=src .venv/bin/python bench/cache/bench_watch_path.py --events 200000 --rounds 7
    PYTHONPATH=src .venv/bin/python bench/cache/bench_watch_path.py --decode
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

from kubeop.cache.transform import compact
from kubeop.client.client import ObjectList
from kubeop.client.watch import WatchEvent

ROOT = Path(__file__).resolve().parents[2]
# kubeop.cache.watcher the attribute is the watcher() function; the module is in sys.modules.
current = importlib.import_module("kubeop.cache.watcher")


def load_baseline(rev: str) -> ModuleType:
    """The watcher module of ``rev``, importing the rest of kubeop from this tree."""
    source = subprocess.run(
        ["git", "show", f"{rev}:src/kubeop/cache/watcher.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    spec = importlib.util.spec_from_loader("kubeop.cache._baseline_watcher", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    exec(compile(source, f"{rev}:watcher.py", "exec"), module.__dict__)
    return module


class Source:
    """A ListerWatcher over pre-built events: an empty list, then one stream of them."""

    description = "bench"
    probe = None

    def __init__(self, events: list[WatchEvent[dict[str, Any]]], decode: bool) -> None:
        self.events = events
        self.decode = decode

    async def list(self, **options: Any) -> ObjectList[dict[str, Any]]:
        return ObjectList([], "1")

    async def watch(self, **options: Any) -> Any:
        events = self.events

        async def stream() -> Any:
            for event in events:
                yield event

        async def decoding() -> Any:
            loads = orjson.loads
            for event in events:
                yield WatchEvent(event.type, loads(event.object["raw"])) if "raw" in event.object else event

        return decoding() if self.decode else stream()


def make_events(n: int, decode: bool) -> list[WatchEvent[dict[str, Any]]]:
    events = []
    for i in range(n):
        rv = str(i + 2)
        if i % 1000 == 999:
            events.append(WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": rv}}))
            continue
        obj: dict[str, Any] = {"metadata": {"name": f"o{i % 100}", "namespace": "ns", "resourceVersion": rv}}
        if decode:
            obj = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    **obj["metadata"],
                    "uid": "0b7c6a8e-1f4e-4d5a-9a51-3c1d2e3f4a5b",
                    "creationTimestamp": "2026-01-01T00:00:00Z",
                    "labels": {"app": "bench"},
                    "managedFields": [{"manager": "bench", "operation": "Update", "apiVersion": "v1"}],
                },
                "data": {"payload": "x" * 1024},
            }
            obj = {"raw": orjson.dumps(obj)}
        events.append(WatchEvent("MODIFIED", obj))
    return events


async def one_run(module: ModuleType, events: list[WatchEvent[dict[str, Any]]], decode: bool) -> float:
    """CPU seconds to receive every event (the bookmarks make none)."""
    expected = 2 + sum(1 for e in events if e.type != "BOOKMARK")  # Init, InitDone, then events
    config = module.Config(streaming_list=False, stall_timeout=0, transform=compact if decode else None)
    watcher = module.Watcher(Source(events, decode), config)
    count = 0
    started = time.process_time()
    async for _ in watcher:
        count += 1
        if count == expected:
            break
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--baseline", default="main", help="git revision to compare with")
    parser.add_argument("--decode", action="store_true", help="decode each event's JSON and compact it")
    args = parser.parse_args()
    events = make_events(args.events, args.decode)
    sides = {args.baseline: load_baseline(args.baseline), "this tree": current}
    times: dict[str, list[float]] = {name: [] for name in sides}
    for round_ in range(args.rounds):
        order = list(sides.items()) if round_ % 2 == 0 else list(reversed(sides.items()))
        for name, module in order:
            times[name].append(asyncio.run(one_run(module, events, args.decode)))
    received = args.events - args.events // 1000
    what = "decoded and compacted" if args.decode else "pre-built"
    print(f"{args.events} {what} watch events ({received} delivered), {args.rounds} rounds, alternating")
    for name, runs in times.items():
        best, median = min(runs), statistics.median(runs)
        print(
            f"  {name:>10}: median {received / median / 1000:7.1f} k events/s "
            f"(best {received / best / 1000:7.1f} k/s; {median / received * 1e6:.2f} us/event)"
        )


if __name__ == "__main__":
    main()
