"""Benchmark: warm start time of the local control plane and the idle RSS of each component.

    python bench/controlplane/run.py [--repeat 3]

Starts the minimal (etcd + kube-apiserver) and the full control plane (plus controller-manager,
scheduler, KWOK with 2 nodes) ``--repeat`` times each with warm binaries, timing start() until
/readyz (and, for full, nodes Ready and the default ServiceAccount), then measures each
component's RSS after 10 s idle. The cold build is measured separately (see RESULTS.md).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

from kubeop.testing import ControlPlane


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--idle", type=float, default=10.0)
    args = parser.parse_args()
    report: dict[str, object] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
    }
    for full in (False, True):
        mode = "full" if full else "minimal"
        times = []
        rss: dict[str, float] = {}
        for i in range(args.repeat):
            t0 = time.monotonic()
            with ControlPlane(full=full, nodes=2) as cp:
                times.append(time.monotonic() - t0)
                if i == args.repeat - 1:
                    time.sleep(args.idle)
                    rss = {name: round(rss_mb(p.pid), 1) for name, p in cp._procs.items() if p.pid}
        report[mode] = {
            "start_seconds": [round(t, 2) for t in times],
            "median_start_seconds": round(statistics.median(times), 2),
            "idle_rss_mb": rss,
        }
        print(mode, json.dumps(report[mode]), flush=True)
    Path(__file__).with_name("results.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
