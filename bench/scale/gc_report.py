"""The cyclic GC's pauses in the operators of a latency run, and which slow creates they overlap.

    python bench/scale/gc_report.py results.json /tmp/gc-log-prefix

``results.json`` is bench/scale/run.py's output of a ``--phases latency`` run made with
``BENCH_GC_LOG=/tmp/gc-log-prefix`` (widget_operator.py then writes ``<prefix>.<pid>``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def pauses(collections: list[list[float]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for gen in (0, 1, 2):
        ms = sorted(c[2] * 1000 for c in collections if c[0] == gen)
        if ms:
            out[f"gen{gen}"] = {
                "count": len(ms),
                "max_ms": round(ms[-1], 2),
                "p99_ms": round(ms[max(0, -(-len(ms) * 99 // 100) - 1)], 2),
                "total_ms": round(sum(ms), 1),
            }
    return out


def main() -> None:
    results = json.loads(Path(sys.argv[1]).read_text())["results"]
    prefix = sys.argv[2]
    for r in results:
        if r.get("phase") != "latency" or "pid" not in r:
            continue
        log = Path(f"{prefix}.{r['pid']}")
        if not log.exists():
            print(f"{r['impl']} run {r.get('run')}: no GC record ({log})")
            continue
        collections = json.loads(log.read_text())["collections"]
        during = [c for c in collections if r["starts"][0] <= c[1] <= r["starts"][-1] + 1]
        print(f"{r['impl']} run {r.get('run')}: p50 {r['p50_ms']:.1f} p99 {r['p99_ms']:.1f} ms")
        print(f"  whole run: {json.dumps(pauses(collections))}")
        print(f"  during the creates: {json.dumps(pauses(during))}")
        slow = sorted(zip(r["latencies_ms"], r["starts"], strict=True), reverse=True)[:3]
        for latency, start in slow:
            hit = [c for c in collections if start <= c[1] <= start + latency / 1000]
            gc_ms = sum(c[2] for c in hit) * 1000
            print(f"  slow create {latency:.1f} ms: {len(hit)} collections in it, {gc_ms:.1f} ms")


if __name__ == "__main__":
    main()
