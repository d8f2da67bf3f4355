"""Benchmark: converge N Widgets with 1, 2 and 3 sharded replicas of bench/operator's kubeop
operator, in predicate mode (``Sharding()``: every replica caches every Widget and drops the
events of others' keys) and label mode (``Sharding(labels=True)``: each replica caches only the
Widgets labelled with its name and their ConfigMaps), against one real local control plane.

For each mode, N and replica count, in a fresh namespace: start the replicas, wait until the
shard ring lists them all, create N Widgets and time until every one has its ConfigMap and
status; then change every Widget and time again. CPU and RSS per replica from /proc; the API
server's CPU alongside (on a 2-core machine it, not the operators, is the limit). Runs are
merged into ``--out`` (a run replaces the one of the same mode, N and replica count).

    python bench/sharding/run.py [--n 10000,30000] [--replicas 1,2,3] [--modes predicate,labels]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kubeop.client import Client
from kubeop.core.resource import ApiResource
from kubeop.testing import ControlPlane

HERE = Path(__file__).parent
_spec = importlib.util.spec_from_file_location("operator_bench", HERE.parent / "operator" / "run.py")
assert _spec is not None and _spec.loader is not None
ob: Any = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ob)
LEASES = ApiResource("coordination.k8s.io", "v1", "leases", kind="Lease")


def pid_of(cp: ControlPlane, name: str) -> int | None:
    proc = cp._procs.get(name)
    return proc.pid if proc is not None else None


async def ring_size(client: Client, ns: str) -> int:
    try:
        ring = await client.get(LEASES, "widget-operator-shards", namespace=ns)
    except Exception:
        return 0
    members = ((ring.get("metadata") or {}).get("annotations") or {}).get("kubeop.io/shard-members") or ""
    return len([m for m in members.split(",") if m])


async def run_one(cp: ControlPlane, replicas: int, n: int, workers: int, mode: str) -> dict[str, Any]:
    ns = f"shard-{replicas}-{os.urandom(2).hex()}"
    cp.api.raw(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
    )
    env = dict(cp.env(), PYTHONUNBUFFERED="1")
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE / "sharded_operator.py"), ns, str(workers), mode],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for _ in range(replicas)
    ]
    apiserver = pid_of(cp, "kube-apiserver")
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        async with Client.from_kubeconfig(cp.kubeconfig_path, qps=None) as client:
            deadline = time.monotonic() + 60
            while await ring_size(client, ns) != replicas:
                assert time.monotonic() < deadline, "the ring did not list every replica"
                await asyncio.sleep(0.2)
            await asyncio.sleep(1.0)
            result: dict[str, Any] = {"mode": mode, "replicas": replicas, "n": n}
            sem = asyncio.Semaphore(64)
            for phase, value in (("create", "one"), ("update", "two")):
                cpu0 = [ob.proc_stats(p.pid)[0] for p in procs]
                api0 = ob.proc_stats(apiserver)[0] if apiserver else 0.0
                t0 = time.monotonic()

                async def write(
                    i: int, value: str = value, phase: str = phase, sem: asyncio.Semaphore = sem
                ) -> None:
                    async with sem:
                        if phase == "create":
                            await client.create(
                                {
                                    "apiVersion": "bench.kubeop.dev/v1",
                                    "kind": "Widget",
                                    "metadata": {"name": f"w-{i}", "namespace": ns},
                                    "spec": {"value": value},
                                },
                                resource=ob.WIDGETS,
                            )
                        else:
                            await client.patch(ob.WIDGETS, f"w-{i}", {"spec": {"value": value}}, namespace=ns)

                await asyncio.gather(*(write(i) for i in range(n)))
                done = await ob.wait_converged(client, ns, n, value, timeout=900)
                rss = [round(ob.proc_stats(p.pid)[1], 1) for p in procs]
                cpu1 = [ob.proc_stats(p.pid)[0] for p in procs]
                api1 = ob.proc_stats(apiserver)[0] if apiserver else 0.0
                result[phase] = {
                    "seconds": round(done - t0, 2),
                    "cpu_s_per_replica": [round(b - a, 2) for a, b in zip(cpu0, cpu1, strict=True)],
                    "apiserver_cpu_s": round(api1 - api0, 2),
                    "rss_mb_per_replica": rss,
                }
                print(f"  {mode}, {n}, {replicas} replicas, {phase}: {result[phase]}", file=sys.stderr)
            result["rss_mb_per_replica"] = rss
            return result
    finally:
        for p in procs:
            ob.stop_operator(p)
        await ob.clear_namespace(cp, ns)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", default="10000")
    parser.add_argument("--replicas", default="1,2,3")
    parser.add_argument("--modes", default="predicate,labels")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--out", default=str(HERE / "results.json"))
    args = parser.parse_args()
    out = Path(args.out)

    def save(run: dict[str, Any]) -> None:
        """Merge one run into ``out`` (written after each run: a long series that fails late
        keeps what it measured)."""
        old = json.loads(out.read_text()).get("runs", []) if out.exists() else []
        same = (run["mode"], run["n"], run["replicas"])
        kept = [r for r in old if (r.get("mode", "predicate"), r["n"], r["replicas"]) != same]
        runs = sorted([*kept, run], key=lambda r: (r["n"], r.get("mode") == "labels", r["replicas"]))
        report["runs"] = runs
        out.write_text(json.dumps(report, indent=1) + "\n")

    report: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "args": vars(args),
        "runs": [],
    }
    with ControlPlane(full=False, progress=lambda m: print(m, file=sys.stderr)) as cp:
        cp.install_crds([ob.CRD])
        for n in args.n.split(","):
            for mode in args.modes.split(","):
                for r in args.replicas.split(","):
                    save(await run_one(cp, int(r), int(n), args.workers, mode))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
