"""get and list through kube-apiserver's aggregator (kubeop.apiserver, per storage) beside the
same kind as a CRD served by kube-apiserver itself, in one run; and memory per stored object.

One fresh etcd + kube-apiserver (minimal control plane). The kind ``Widget`` exists twice: as a
CRD of ``crd.bench.kubeop.dev`` and served by ``server.py`` (its own process) as
``agg.bench.kubeop.dev`` behind an APIService, once per storage (memory, SQLite, etcd: the
control plane's own). Each group holds ``--objects`` Widgets in one namespace. For each
storage, the CRD and the aggregated API are measured phase by phase, interleaved: gets of
random names at concurrency 1 and 16, full lists at concurrency 1 (and limit=100 pages); per
phase p50/p99 latency and requests per second. The driver is kubeop's Client (plain dicts, no
model decoding, no client-side rate limit), the same for both.

Memory per stored object: the resident set (VmRSS) of the process keeping the objects, before
and after creating them, over their number: the server process for memory and SQLite, etcd
(and the server, which should not grow) for etcd, kube-apiserver (its watch cache and decoded
objects) and etcd for the CRD.

    flock /tmp/kubeop-bench.lock .venv/bin/python bench/apiserver/run.py --objects 2000 \
        --out bench/apiserver/results.json
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization

from kubeop.client import Client, load_kubeconfig
from kubeop.core import pki
from kubeop.core.resource import ApiResource
from kubeop.crd import crd_manifest
from kubeop.testing import ControlPlane
from kubeop.testing.controlplane import free_port

sys.path.insert(0, str(Path(__file__).parent))
from server import widget

HERE = Path(__file__).parent
NS = "bench"
SERVICE = "bench-api"
AGG = ApiResource("agg.bench.kubeop.dev", "v1", "widgets", kind="Widget", namespaced=True)
CRD = ApiResource("crd.bench.kubeop.dev", "v1", "widgets", kind="Widget", namespaced=True)
APISERVICES = ApiResource("apiregistration.k8s.io", "v1", "apiservices", kind="APIService", namespaced=False)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] * 1000


def body(res: ApiResource, i: int) -> dict[str, Any]:
    """A Widget of a few hundred bytes, as an operator's objects are."""
    return {
        "apiVersion": f"{res.group}/v1",
        "kind": "Widget",
        "metadata": {
            "name": f"w-{i:05d}",
            "namespace": NS,
            "labels": {"app": "bench", "shard": str(i % 10), "tier": "backend"},
            "annotations": {"bench.kubeop.dev/note": "x" * 64},
        },
        "spec": {
            "size": i,
            "color": ("blue", "red", "green")[i % 3],
            "labels": {f"k{j}": f"v{j}" for j in range(5)},
        },
    }


async def run_phase(n: int, concurrency: int, one: Callable[[], Awaitable[object]]) -> dict[str, Any]:
    latencies: list[float] = []
    counter = iter(range(n))

    async def worker() -> None:
        for _ in counter:
            t0 = time.perf_counter()
            await one()
            latencies.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - t0
    return {
        "p50_ms": round(pct(latencies, 50), 2),
        "p99_ms": round(pct(latencies, 99), 2),
        "per_s": round(n / wall, 1),
    }


async def fill(client: Client, res: ApiResource, objects: int) -> None:
    counter = iter(range(objects))

    async def worker() -> None:
        for i in counter:
            await client.create(body(res, i), resource=res)

    await asyncio.gather(*(worker() for _ in range(8)))


async def measure(client: Client, objects: int, gets: int, lists: int) -> dict[str, Any]:
    """Phases interleaved CRD, aggregated; each result keyed ``<phase> <crd|agg>``."""
    rng = random.Random(1)
    out: dict[str, Any] = {}

    def get(res: ApiResource) -> Callable[[], Awaitable[object]]:
        return lambda: client.get(res, f"w-{rng.randrange(objects):05d}", namespace=NS)

    def full_list(res: ApiResource) -> Callable[[], Awaitable[object]]:
        async def one() -> None:
            listed = await client.list(res, namespace=NS, share_strings=False)
            assert len(listed.items) == objects, len(listed.items)

        return one

    def paged(res: ApiResource) -> Callable[[], Awaitable[object]]:
        async def one() -> None:
            listed = await client.list(res, namespace=NS, limit=100, share_strings=False)
            assert len(listed.items) == 100

        return one

    for res in (CRD, AGG):  # warm connections and caches
        await run_phase(200, 8, get(res))
        await run_phase(2, 1, full_list(res))
    phases: list[tuple[str, int, int, Callable[[ApiResource], Callable[[], Awaitable[object]]]]] = [
        ("get c1", gets, 1, get),
        ("get c16", gets * 2, 16, get),
        ("list-all c1", lists, 1, full_list),
        ("list-100 c1", gets // 2, 1, paged),
    ]
    for name, n, concurrency, make in phases:
        for res, tag in ((CRD, "crd"), (AGG, "agg")):
            result = await run_phase(n, concurrency, make(res))
            out[f"{name} {tag}"] = result
            print(f"  {name} {tag}: {result}", flush=True)
    return out


def serving_certs(directory: Path) -> bytes:
    ca_key = pki.new_key()
    ca = pki.self_signed_ca(ca_key, "bench-api-ca", dt.timedelta(days=1), path_length=0)
    key, cert = pki.issue(
        ca_key, ca, SERVICE, dt.timedelta(days=1), hosts=[f"{SERVICE}.{NS}.svc"], server=True
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.key").write_bytes(pki.key_pem(key))
    return ca.public_bytes(serialization.Encoding.PEM)


def register(cp: ControlPlane, port: int, ca: bytes) -> None:
    cp.kubectl(
        "apply",
        "-f",
        "-",
        input=f"""
apiVersion: v1
kind: Service
metadata: {{name: {SERVICE}, namespace: {NS}}}
spec: {{type: ExternalName, externalName: 127.0.0.1, ports: [{{port: {port}, protocol: TCP}}]}}
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: v1.agg.bench.kubeop.dev}}
spec:
  group: agg.bench.kubeop.dev
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {{name: {SERVICE}, namespace: {NS}, port: {port}}}
  caBundle: {base64.b64encode(ca).decode()}
""",
    )


async def available(client: Client, timeout: float = 120.0) -> None:
    async with asyncio.timeout(timeout):
        while True:
            got = await client.get(APISERVICES, "v1.agg.bench.kubeop.dev")
            conditions = {c["type"]: c["status"] for c in got.get("status", {}).get("conditions", [])}
            if conditions.get("Available") == "True":
                return
            await asyncio.sleep(0.5)


def machine() -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "loadavg_at_start": os.getloadavg(),
    }


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="kubeop-bench-apiserver-"))
    results: dict[str, Any] = {
        "machine": machine(),
        "command": " ".join(sys.argv),
        "objects": args.objects,
        "review_qps": args.review_qps,
    }
    with ControlPlane(full=False) as cp:
        cp.create_namespace(NS)
        cp.install_crds([crd_manifest(widget("crd.bench.kubeop.dev"))])
        ca = serving_certs(work / "certs")
        etcd_pid = cp._procs["etcd"].pid
        apiserver_pid = cp._procs["kube-apiserver"].pid
        assert etcd_pid is not None and apiserver_pid is not None
        size = len(json.dumps(body(AGG, 1234)))
        results["object_json_bytes"] = size
        async with Client(load_kubeconfig(cp.kubeconfig_path, qps=None)) as client:
            before = rss_kib(apiserver_pid), rss_kib(etcd_pid)
            await fill(client, CRD, args.objects)
            await asyncio.sleep(2)
            after = rss_kib(apiserver_pid), rss_kib(etcd_pid)
            results["memory crd"] = {
                "kube-apiserver_bytes_per_object": round((after[0] - before[0]) * 1024 / args.objects),
                "etcd_bytes_per_object": round((after[1] - before[1]) * 1024 / args.objects),
            }
            print("memory crd", results["memory crd"], flush=True)
            for storage in args.storages:
                port = free_port()
                cmd = [
                    sys.executable, str(HERE / "server.py"), "--storage", storage, "--port", str(port),
                    "--certs", str(work / "certs"), "--kubeconfig", cp.kubeconfig_path,
                    "--sqlite", str(work / f"{storage}.db"), "--etcd", f"http://127.0.0.1:{cp.ports['etcd']}",
                    "--review-qps", args.review_qps,
                ]  # fmt: skip
                proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
                assert proc.stdout is not None and proc.stdin is not None
                try:
                    if (line := proc.stdout.readline().strip()) != "ready":
                        raise SystemExit(f"the {storage} server did not start (printed {line!r})")
                    await asyncio.to_thread(register, cp, port, ca)
                    await available(client)
                    print(f"{storage}:", flush=True)
                    before = rss_kib(proc.pid), rss_kib(etcd_pid)
                    await fill(client, AGG, args.objects)
                    await asyncio.sleep(2)
                    after = rss_kib(proc.pid), rss_kib(etcd_pid)
                    memory = {"server_bytes_per_object": round((after[0] - before[0]) * 1024 / args.objects)}
                    if storage == "etcd":
                        memory["etcd_bytes_per_object"] = round((after[1] - before[1]) * 1024 / args.objects)
                    results[f"memory {storage}"] = memory
                    print(f"  memory {memory}", flush=True)
                    results[storage] = await measure(client, args.objects, args.gets, args.lists)
                    await client.delete_collection(AGG, namespace=NS)  # the next storage starts empty
                finally:
                    proc.stdin.close()
                    try:
                        proc.wait(timeout=30)
                    except subprocess.TimeoutExpired:
                        proc.kill()
                    cp.kubectl(
                        "delete", "apiservice", "v1.agg.bench.kubeop.dev", "--ignore-not-found", check=False
                    )
        results["loadavg_at_end"] = os.getloadavg()
    summary: dict[str, Any] = {}
    for storage in args.storages:
        for key, value in results[storage].items():
            summary.setdefault(key, []).append(value)
    results["summary"] = {
        key: {
            "p50_ms_median": statistics.median(v["p50_ms"] for v in values),
            "p99_ms_median": statistics.median(v["p99_ms"] for v in values),
            "per_s_median": statistics.median(v["per_s"] for v in values),
        }
        for key, values in summary.items()
        if key.endswith(" crd")
    }
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=2000)
    parser.add_argument("--gets", type=int, default=1000, help="gets per phase at concurrency 1")
    parser.add_argument("--lists", type=int, default=20, help="full lists per phase")
    parser.add_argument("--storages", nargs="+", default=["memory", "sqlite", "etcd"])
    parser.add_argument(
        "--review-qps",
        choices=("default", "none"),
        default="default",
        help="the server's client for its SubjectAccessReviews: kubeop's default limit (50/s, burst "
        "100) or none",
    )
    parser.add_argument("--out", default=str(HERE / "results.json"))
    args = parser.parse_args()
    results = asyncio.run(bench(args))
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
