"""Admission round trip through kube-apiserver for a trivial validator served by kubeop.

Creates labelled ConfigMaps (the webhook's objectSelector matches them) and unlabelled ones (no
webhook call) at concurrency 1 and 32 on a fresh etcd + kube-apiserver; reports p50/p99 latency
of each and the webhook server process's CPU per review (from /proc, utime + stime).

    flock /tmp/kubeop-bench.lock .venv/bin/python bench/webhook/run.py --n 400 \
        --out bench/webhook/results.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kubeop.client import Client, load_kubeconfig
from kubeop.core.resource import ApiResource
from kubeop.testing import ControlPlane
from kubeop.webhook import Endpoint, local_certificates, webhook_configurations

sys.path.insert(0, str(Path(__file__).parent))
from server import allow

CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def phase(client: Client, ns: str, label: bool, n: int, concurrency: int, tag: str) -> list[float]:
    latencies: list[float] = []
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            md: dict[str, Any] = {"name": f"{tag}-{i}", "namespace": ns}
            if label:
                md["labels"] = {"bench": "on"}
            t0 = time.perf_counter()
            await client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": md, "data": {"k": "v"}})
            latencies.append(time.perf_counter() - t0)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] * 1000


async def measure(cp: ControlPlane, server_pid: int, n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with Client(load_kubeconfig(cp.kubeconfig_path, qps=None)) as client:
        await phase(client, "default", True, 200, 8, "warm")  # connections, caches, JIT of the paths
        for concurrency in (1, 32):
            for label in (False, True, False, True):
                cpu0 = cpu_seconds(server_pid)
                t0 = time.perf_counter()
                lat = await phase(
                    client,
                    "default",
                    label,
                    n,
                    concurrency,
                    f"c{concurrency}-{int(label)}-{time.monotonic_ns()}",
                )
                wall = time.perf_counter() - t0
                cpu = cpu_seconds(server_pid) - cpu0
                key = f"c{concurrency} {'webhook' if label else 'no webhook'}"
                run = {
                    "p50_ms": round(pct(lat, 50), 2),
                    "p99_ms": round(pct(lat, 99), 2),
                    "mean_ms": round(statistics.mean(lat) * 1000, 2),
                    "per_s": round(n / wall, 1),
                }
                if label:
                    run["server_cpu_us_per_review"] = round(cpu / n * 1e6, 1)
                out.setdefault(key, []).append(run)
                print(key, run, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    with ControlPlane(full=False) as cp:
        cert_dir = cp.data_dir / "webhook-certs"
        certs = local_certificates(cert_dir)
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, str(Path(__file__).parent / "server.py"), str(port), str(cert_dir)],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None and server.stdout.readline().strip() == "ready"
            for config in webhook_configurations(
                [allow], "bench", Endpoint.url(f"https://127.0.0.1:{port}", ca_bundle=certs.ca_pem)
            ):
                cp.api.call(
                    "POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", config
                )
            time.sleep(2)  # the API server's informer picks the configuration up
            results = asyncio.run(measure(cp, server.pid, args.n))
        finally:
            server.terminate()
            tail, _ = server.communicate(timeout=10)
            print(tail.strip(), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
