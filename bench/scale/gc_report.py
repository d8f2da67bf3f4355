"""The cyclic GC's pauses in the operators of a latency run, which slow creates they overlap, and
the stages of each create: the create answered, the operator's first reconcile of it started and
ended (its two writes answered), the driver seeing it converged.

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
        record = json.loads(log.read_text())
        collections = record["collections"]
        during = [c for c in collections if r["starts"][0] <= c[1] <= r["starts"][-1] + 1]
        print(f"{r['impl']} run {r.get('run')}: p50 {r['p50_ms']:.1f} p99 {r['p99_ms']:.1f} ms")
        print(f"  whole run: {json.dumps(pauses(collections))}")
        print(f"  during the creates: {json.dumps(pauses(during))}")
        first: dict[str, tuple[float, float]] = {}
        for name, started, ended in record.get("reconciles", []):
            first.setdefault(name, (started, ended))
        names = [f"lat-{r['round']}-{i:03d}" for i in range(len(r["starts"]))] if "round" in r else []
        rows = []
        for i, (latency, start) in enumerate(zip(r["latencies_ms"], r["starts"], strict=True)):
            hit = [c for c in collections if start <= c[1] <= start + latency / 1000]
            stages = None
            if names and names[i] in first and "acks" in r:
                rec_start, rec_end = first[names[i]]
                ack, done = r["acks"][i], start + latency / 1000
                stages = [(ack - start) * 1000, (rec_start - ack) * 1000, (rec_end - rec_start) * 1000]
                stages.append((done - rec_end) * 1000)
            rows.append((latency, len(hit), sum(c[2] for c in hit) * 1000, stages))
        have = [row[3] for row in rows if row[3] is not None]
        if have:
            medians = [sorted(col)[len(col) // 2] for col in zip(*have, strict=True)]
            answered, to_reconcile, reconcile, to_converged = medians
            print(
                f"  stages (median ms): create answered {answered:.1f}, to reconcile {to_reconcile:.1f}, "
                f"reconcile {reconcile:.1f}, to converged {to_converged:.1f}"
            )
        for latency, n, gc_ms, stages in sorted(rows, key=lambda row: -row[0])[:3]:
            where = "" if stages is None else f" stages {[round(x, 1) for x in stages]}"
            print(f"  slow create {latency:.1f} ms: {n} collections in it ({gc_ms:.1f} ms){where}")


if __name__ == "__main__":
    main()
