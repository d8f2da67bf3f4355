"""Admission round trip through kube-apiserver: kubeop's webhook server against controller-runtime's.

One fresh etcd + kube-apiserver; two webhook servers on loopback, each in its own process, both
allowing everything: ``server.py`` (kubeop.webhook.WebhookServer) and ``go/`` (controller-runtime's
webhook.Server, built here from the pinned module). Each has its own ValidatingWebhookConfiguration
whose objectSelector picks ConfigMaps labelled ``bench=kubeop`` or ``bench=go``; unlabelled
ConfigMaps call no webhook. The three kinds of create are interleaved (none, kubeop, go, repeated)
at concurrency 1 and 32; per phase: p50/p99 latency, and for the webhook phases the server
process's CPU (utime + stime from /proc) divided by the reviews the API server counted for that
webhook (apiserver_admission_webhook_admission_duration_seconds_count).

    flock /tmp/kubeop-bench.lock .venv/bin/python bench/webhook/run.py --n 1000 --reps 3 \
        --out bench/webhook/results-go.json
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from kubeop.client import Client, load_kubeconfig
from kubeop.testing import ControlPlane
from kubeop.webhook import Endpoint, local_certificates, webhook_configurations

sys.path.insert(0, str(Path(__file__).parent))
from server import allow

HERE = Path(__file__).parent

TICK = os.sysconf("SC_CLK_TCK")
KUBEOP_HOOK = "bench.webhook.kubeop.dev"
GO_HOOK = "bench.webhook.go.dev"
VWC = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MODES = ("none", "kubeop", "go")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def build_go() -> Path:
    """controller-runtime's webhook server, from go/ (go.mod + go.sum pin the modules)."""
    out = Path(tempfile.gettempdir()) / "kubeop-bench-webhook-go"
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=readonly", CGO_ENABLED="0")
    subprocess.run(["go", "build", "-trimpath", "-o", str(out), "."], cwd=HERE / "go", env=env, check=True)
    return out


def reviews(cp: ControlPlane, hooks: Iterable[str]) -> dict[str, int]:
    """Admission reviews the API server has sent to each of ``hooks`` so far, from its /metrics."""
    status, body = cp.api.raw("GET", "/metrics")
    assert status == 200, status
    counts = dict.fromkeys(hooks, 0)
    pattern = r"^apiserver_admission_webhook_admission_duration_seconds_count\{([^}]*)\} (\S+)$"
    for match in re.finditer(pattern, body.decode(), re.M):
        name = re.search(r'name="([^"]*)"', match[1])
        if name and name[1] in counts:
            counts[name[1]] += int(float(match[2]))
    return counts


async def phase(client: Client, label: str | None, n: int, concurrency: int, tag: str) -> list[float]:
    latencies: list[float] = []
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            md: dict[str, Any] = {"name": f"{tag}-{i}", "namespace": "default"}
            if label:
                md["labels"] = {"bench": label}
            t0 = time.perf_counter()
            await client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": {"k": "v"}})
            latencies.append(time.perf_counter() - t0)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] * 1000


async def measure(
    cp: ControlPlane,
    pids: dict[str, int],
    n: int,
    reps: int,
    *,
    hooks: dict[str, str],
    order: Callable[[int], Sequence[str]],
) -> dict[str, Any]:
    """Phases of ``n`` creates at concurrency 1 and 32, ``reps`` rounds each in ``order(rep)``
    (a mode is "none" or a key of ``hooks``, the webhook serving it); per phase p50/p99 latency and
    the serving process's CPU per review (from ``pids``), and their medians over the rounds."""
    runs: dict[str, list[dict[str, Any]]] = {}
    totals: dict[str, list[float]] = {}  # key -> [cpu seconds, reviews]
    async with Client(load_kubeconfig(cp.kubeconfig_path, qps=None)) as client:
        for mode in order(0):  # connections, caches, the paths warmed
            await phase(client, None if mode == "none" else mode, 200, 8, f"warm-{mode}")
        for concurrency in (1, 32):
            for rep in range(reps):
                for mode in order(rep):
                    label = None if mode == "none" else mode
                    before = reviews(cp, hooks.values())
                    cpu0 = {m: cpu_seconds(pid) for m, pid in pids.items()}
                    t0 = time.perf_counter()
                    lat = await phase(client, label, n, concurrency, f"c{concurrency}-{mode}-{rep}")
                    wall = time.perf_counter() - t0
                    key = f"c{concurrency} {mode}"
                    run: dict[str, Any] = {
                        "p50_ms": round(pct(lat, 50), 2),
                        "p99_ms": round(pct(lat, 99), 2),
                        "mean_ms": round(statistics.mean(lat) * 1000, 2),
                        "per_s": round(n / wall, 1),
                    }
                    if mode == "none":  # what each server burns while the API server does not call it
                        for m, pid in pids.items():
                            run[f"{m}_idle_cpu_ms"] = round((cpu_seconds(pid) - cpu0[m]) * 1000)
                    if mode in pids:
                        cpu = cpu_seconds(pids[mode]) - cpu0[mode]
                        counted = reviews(cp, hooks.values())[hooks[mode]] - before[hooks[mode]]
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
    return {"summary": summary, "runs": runs}


def against_go(summary: dict[str, Any]) -> None:
    """Add to ``summary`` what each server adds to a create's latency, and the CPU ratio."""
    for concurrency in (1, 32):
        base = summary[f"c{concurrency} none"]
        for mode in ("kubeop", "go"):
            entry = summary[f"c{concurrency} {mode}"]
            entry["added_p50_ms"] = round(entry["p50_ms_median"] - base["p50_ms_median"], 2)
            entry["added_p99_ms"] = round(entry["p99_ms_median"] - base["p99_ms_median"], 2)
        kubeop_cpu = summary[f"c{concurrency} kubeop"]["server_cpu_us_per_review"]
        go_cpu = summary[f"c{concurrency} go"]["server_cpu_us_per_review"]
        summary[f"c{concurrency} cpu ratio kubeop/go"] = round(kubeop_cpu / max(go_cpu, 0.1), 2)


def go_configuration(kubeop_config: dict[str, Any], port: int) -> dict[str, Any]:
    """The same registration as kubeop's, pointing at the Go server and its own label."""
    config = copy.deepcopy(kubeop_config)
    config["metadata"] = {"name": "bench-go-validating"}
    (hook,) = config["webhooks"]
    hook["name"] = GO_HOOK
    hook["clientConfig"]["url"] = f"https://127.0.0.1:{port}/validate"
    hook["objectSelector"] = {"matchLabels": {"bench": "go"}}
    return config


def start(cmd: list[str], name: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        proc.kill()
        raise SystemExit(f"the {name} webhook server did not start (printed {line!r})")
    return proc


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000, help="creates per phase")
    parser.add_argument("--reps", type=int, default=3, help="rounds of (none, kubeop, go) per concurrency")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    go_binary = build_go()
    with ControlPlane(full=False) as cp:
        cert_dir = cp.data_dir / "webhook-certs"
        certs = local_certificates(cert_dir)
        ports = {"kubeop": free_port(), "go": free_port()}
        servers = {
            "kubeop": start(
                [sys.executable, str(HERE / "server.py"), str(ports["kubeop"]), str(cert_dir)], "kubeop"
            ),
            "go": start([str(go_binary), str(ports["go"]), str(cert_dir)], "Go"),
        }
        try:
            endpoint = Endpoint.url(f"https://127.0.0.1:{ports['kubeop']}", ca_bundle=certs.ca_pem)
            (config,) = webhook_configurations([allow], "bench", endpoint)
            cp.api.call("POST", VWC, config)
            cp.api.call("POST", VWC, go_configuration(config, ports["go"]))
            time.sleep(2)  # the API server's informer picks the configurations up
            pids = {m: p.pid for m, p in servers.items()}
            hooks = {"kubeop": KUBEOP_HOOK, "go": GO_HOOK}
            results = asyncio.run(measure(cp, pids, args.n, args.reps, hooks=hooks, order=lambda _rep: MODES))
            against_go(results["summary"])
            print(json.dumps(results["summary"], indent=1), flush=True)
        finally:
            for proc in servers.values():
                proc.terminate()
                tail, _ = proc.communicate(timeout=10)
                print(tail.strip(), flush=True)
    results["command"] = " ".join(["bench/webhook/run.py", *sys.argv[1:]])
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
