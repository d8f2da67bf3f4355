"""Before/after for kubeop's webhook server: the same server.py run from two source trees.

One fresh etcd + kube-apiserver; two kubeop webhook servers on loopback, each in its own process:
``before`` imports kubeop from ``--before`` (e.g. a checkout of main's ``src``), ``after`` from this
tree. Each has its own ValidatingWebhookConfiguration (objectSelector ``bench=before`` /
``bench=after``). Phases of ``--n`` creates are interleaved: none, before, after (the order of
the two servers alternates from one repetition to the next), at concurrency 1 and 32; per phase
p50/p99 latency and the server process's CPU per review, as in run.py.

    git worktree add /tmp/kubeop-main main
    flock /tmp/kubeop-bench.lock .venv/bin/python bench/webhook/compare.py --before /tmp/kubeop-main/src \\
        --n 1000 --reps 4 --out /tmp/compare.json
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kubeop.client import Client, load_kubeconfig
from kubeop.testing import ControlPlane
from kubeop.webhook import Endpoint, local_certificates, webhook_configurations

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from run import VWC, cpu_seconds, free_port, pct, phase  # noqa: E402
from server import allow  # noqa: E402

SERVERS = ("before", "after")


def hook_name(which: str) -> str:
    return f"bench.webhook.{which}.dev"


def reviews(cp: ControlPlane) -> dict[str, int]:
    status, body = cp.api.raw("GET", "/metrics")
    assert status == 200, status
    counts = dict.fromkeys(SERVERS, 0)
    names = {hook_name(s): s for s in SERVERS}
    pattern = r"^apiserver_admission_webhook_admission_duration_seconds_count\{([^}]*)\} (\S+)$"
    for match in re.finditer(pattern, body.decode(), re.M):
        name = re.search(r'name="([^"]*)"', match[1])
        if name and name[1] in names:
            counts[names[name[1]]] += int(float(match[2]))
    return counts


def configuration(base: dict[str, Any], which: str, port: int) -> dict[str, Any]:
    config = copy.deepcopy(base)
    config["metadata"] = {"name": f"bench-{which}-validating"}
    (hook,) = config["webhooks"]
    hook["name"] = hook_name(which)
    hook["clientConfig"]["url"] = f"https://127.0.0.1:{port}/validate"
    hook["objectSelector"] = {"matchLabels": {"bench": which}}
    return config


async def measure(cp: ControlPlane, pids: dict[str, int], n: int, reps: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {}
    totals: dict[str, list[float]] = {}
    async with Client(load_kubeconfig(cp.kubeconfig_path, qps=None)) as client:
        for mode in ("none", *SERVERS):
            await phase(client, None if mode == "none" else mode, 200, 8, f"warm-{mode}")
        for concurrency in (1, 32):
            for rep in range(reps):
                order = ("none", *(SERVERS if rep % 2 == 0 else SERVERS[::-1]))
                for mode in order:
                    before = reviews(cp)
                    cpu0 = {m: cpu_seconds(pid) for m, pid in pids.items()}
                    t0 = time.perf_counter()
                    label = None if mode == "none" else mode
                    lat = await phase(client, label, n, concurrency, f"c{concurrency}-{mode}-{rep}")
                    wall = time.perf_counter() - t0
                    key = f"c{concurrency} {mode}"
                    run: dict[str, Any] = {
                        "p50_ms": round(pct(lat, 50), 2),
                        "p99_ms": round(pct(lat, 99), 2),
                        "per_s": round(n / wall, 1),
                    }
                    if mode in pids:
                        cpu = cpu_seconds(pids[mode]) - cpu0[mode]
                        counted = reviews(cp)[mode] - before[mode]
                        run["reviews"] = counted
                        run["server_cpu_us_per_review"] = round(cpu / max(counted, 1) * 1e6, 1)
                        total = totals.setdefault(key, [0.0, 0])
                        total[0] += cpu
                        total[1] += counted
                    runs.setdefault(key, []).append(run)
                    print(key, run, flush=True)
    summary: dict[str, Any] = {}
    for key, values in runs.items():
        entry: dict[str, Any] = {
            "p50_ms_median": statistics.median(r["p50_ms"] for r in values),
            "p99_ms_median": statistics.median(r["p99_ms"] for r in values),
        }
        if key in totals:
            cpu, counted = totals[key]
            entry["server_cpu_us_per_review"] = round(cpu / max(counted, 1) * 1e6, 1)
            entry["cpu_us_per_review_per_phase"] = [r["server_cpu_us_per_review"] for r in values]
        summary[key] = entry
    print(json.dumps(summary, indent=1), flush=True)
    return {"summary": summary, "runs": runs}


def start(which: str, src: str, port: int, cert_dir: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=src)
    cmd = [sys.executable, str(HERE / "server.py"), str(port), str(cert_dir)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        raise SystemExit(f"the {which} webhook server did not start (printed {line!r})")
    return proc


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="the src directory of the baseline kubeop")
    parser.add_argument("--n", type=int, default=1000, help="creates per phase")
    parser.add_argument("--reps", type=int, default=4, help="rounds of (none, before, after) per concurrency")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sources = {
        "before": str(Path(args.before).resolve()),
        "after": str((HERE.parent.parent / "src").resolve()),
    }
    with ControlPlane(full=False) as cp:
        cert_dir = cp.data_dir / "webhook-certs"
        certs = local_certificates(cert_dir)
        ports = {s: free_port() for s in SERVERS}
        servers = {s: start(s, sources[s], ports[s], cert_dir) for s in SERVERS}
        try:
            endpoint = Endpoint.url(f"https://127.0.0.1:{ports['before']}", ca_bundle=certs.ca_pem)
            (base,) = webhook_configurations([allow], "bench", endpoint)
            for s in SERVERS:
                cp.api.call("POST", VWC, configuration(base, s, ports[s]))
            time.sleep(2)  # the API server's informer picks the configurations up
            results = asyncio.run(measure(cp, {s: p.pid for s, p in servers.items()}, args.n, args.reps))
        finally:
            for proc in servers.values():
                proc.terminate()
                tail, _ = proc.communicate(timeout=10)
                print(tail.strip(), flush=True)
    results["command"] = " ".join(["bench/webhook/compare.py", *sys.argv[1:]])
    results["sources"] = sources
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
