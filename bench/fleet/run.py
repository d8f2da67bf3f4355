"""Benchmark: N clusters x M objects in one Fleet process against N processes of one cluster
each (a Manager per cluster: what a user runs today).

Each cluster is its own minimal local control plane (etcd + kube-apiserver, ``ControlPlane(
full=False)``); the cost of one is measured first (start time, RSS, idle CPU). Every cluster gets
M ConfigMaps labelled ``fleet-bench=yes``; the operator (``mark_operator.py``) labels each with
the run's id. Per mode, in turn: launch the operator process(es), time until every object of
every cluster carries the run's id (convergence, from launch: imports, cache sync and the M x N
patches), then leave them idle for ``--idle`` s; CPU seconds (user + system, from /proc) of the
operator process(es) over convergence and over the idle window, RSS summed at the end and its
peak (VmHWM). The API servers' CPU over each phase alongside. The modes alternate ``--rounds``
times (fleet first, then the processes; then the other way round), each with a new run id.

    flock /tmp/kubeop-bench.lock python bench/fleet/run.py [--clusters 10] [--objects 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any

from kubeop.client import Client, load_kubeconfig
from kubeop.core import AlreadyExists
from kubeop.core.resource import ApiResource
from kubeop.testing import ControlPlane

HERE = Path(__file__).parent
CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
NAMESPACE = "default"
RUN_LABEL = "fleet-bench-run"
PAD = "x" * 192


def proc_stats(pid: int) -> tuple[float, float, float]:
    """(cpu seconds, rss MB, peak rss MB) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status)[1]) / 1024  # type: ignore[index]
    hwm = int(re.search(r"VmHWM:\s+(\d+)", status)[1]) / 1024  # type: ignore[index]
    return cpu, rss, hwm


def cpu_of(pids: list[int]) -> float:
    return sum(proc_stats(p)[0] for p in pids)


def plane_pids(cp: ControlPlane) -> list[int]:
    return [p.pid for p in cp._procs.values()]


async def populate(kubeconfig: str, count: int) -> None:
    async with Client(load_kubeconfig(kubeconfig)) as api:
        sem = asyncio.Semaphore(32)

        async def one(i: int) -> None:
            body = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"obj-{i:05d}",
                    "namespace": NAMESPACE,
                    "labels": {"fleet-bench": "yes"},
                },
                "data": {"value": PAD},
            }
            async with sem:
                with suppress(AlreadyExists):
                    await api.create(body)

        await asyncio.gather(*(one(i) for i in range(count)))


async def marked(apis: list[Client], run_id: str) -> list[int]:
    """How many objects of each cluster carry ``run_id``."""

    async def count(api: Client) -> int:
        items = await api.list(CM, namespace=NAMESPACE, label_selector=f"{RUN_LABEL}={run_id}")
        return len(items.items)

    return list(await asyncio.gather(*(count(a) for a in apis)))


def launch(run_id: str, kubeconfigs: list[str], log: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", KUBEOP_LOG_LEVEL="warning")
    with log.open("w") as stderr:
        return subprocess.Popen(
            [sys.executable, str(HERE / "mark_operator.py"), run_id, *kubeconfigs],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
        )


def stop(procs: list[subprocess.Popen[str]]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


async def run_mode(
    mode: str, planes: list[ControlPlane], apis: list[Client], objects: int, idle: float, timeout: float
) -> dict[str, Any]:
    run_id = f"{mode}-{os.urandom(3).hex()}"
    kubeconfigs = [cp.kubeconfig_path for cp in planes]
    logdir = Path(tempfile.gettempdir())
    server_pids = [p for cp in planes for p in plane_pids(cp)]
    s0 = cpu_of(server_pids)
    t0 = time.monotonic()
    if mode == "fleet":
        procs = [launch(run_id, kubeconfigs, logdir / "kubeop-bench-fleet-0.log")]
    else:
        procs = [
            launch(run_id, [k], logdir / f"kubeop-bench-fleet-{i}.log") for i, k in enumerate(kubeconfigs)
        ]
    pids = [p.pid for p in procs]
    try:
        total = objects * len(planes)
        done = [0]
        while sum(done) < total:
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(
                    f"{mode}: {sum(done)}/{total} marked after {timeout:.0f} s (logs in {logdir})"
                )
            for p in procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{mode}: an operator exited with {p.returncode} (logs in {logdir})")
            await asyncio.sleep(0.25)
            done = await marked(apis, run_id)
        converged = time.monotonic() - t0
        c1 = cpu_of(pids)
        s1 = cpu_of(server_pids)
        await asyncio.sleep(idle)
        c2 = cpu_of(pids)
        s2 = cpu_of(server_pids)
        stats = [proc_stats(p) for p in pids]
    finally:
        stop(procs)
    return {
        "mode": mode,
        "processes": len(procs),
        "clusters": len(planes),
        "objects_per_cluster": objects,
        "convergence_s": round(converged, 2),
        "cpu_converge_s": round(c1, 2),
        "cpu_idle_s": round(c2 - c1, 3),
        "idle_window_s": idle,
        "idle_cpu_percent": round(100 * (c2 - c1) / idle, 2),
        "rss_mb": round(sum(s[1] for s in stats), 1),
        "peak_rss_mb": round(sum(s[2] for s in stats), 1),
        "apiservers_cpu_converge_s": round(s1 - s0, 2),
        "apiservers_cpu_idle_s": round(s2 - s1, 2),
    }


def plane_cost(cp: ControlPlane, started_in: float, idle: float = 10.0) -> dict[str, Any]:
    pids = plane_pids(cp)
    c0 = cpu_of(pids)
    time.sleep(idle)
    c1 = cpu_of(pids)
    return {
        "start_s": round(started_in, 2),
        "rss_mb": round(sum(proc_stats(p)[1] for p in pids), 1),
        "idle_cpu_percent": round(100 * (c1 - c0) / idle, 2),
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=int, default=10)
    ap.add_argument("--objects", type=int, default=1000)
    ap.add_argument("--idle", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--out", default=str(HERE / "results.json"))
    args = ap.parse_args()
    result: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "command": " ".join(["python", "bench/fleet/run.py", *sys.argv[1:]]),
    }
    with ExitStack() as stack:
        planes: list[ControlPlane] = []
        costs = []
        for i in range(args.clusters):
            t = time.monotonic()
            cp = stack.enter_context(ControlPlane(full=False))
            took = time.monotonic() - t
            planes.append(cp)
            if i == 0:  # what one minimal plane costs, before the others start
                result["one_plane"] = plane_cost(cp, took)
                print(f"one plane: {result['one_plane']}", flush=True)
            costs.append(round(took, 2))
        result["planes_start_s"] = costs
        total_rss = sum(proc_stats(p)[1] for cp in planes for p in plane_pids(cp))
        result["planes_rss_mb"] = round(total_rss, 1)
        print(f"{args.clusters} planes up ({sum(costs):.0f} s, {total_rss:.0f} MB)", flush=True)
        t = time.monotonic()
        await asyncio.gather(*(populate(cp.kubeconfig_path, args.objects) for cp in planes))
        print(f"populated {args.clusters} x {args.objects} in {time.monotonic() - t:.1f} s", flush=True)
        apis = [Client(load_kubeconfig(cp.kubeconfig_path)) for cp in planes]
        runs = []
        try:
            for r in range(args.rounds):
                order = ("fleet", "processes") if r % 2 == 0 else ("processes", "fleet")
                for mode in order:
                    one = await run_mode(mode, planes, apis, args.objects, args.idle, args.timeout)
                    one["round"] = r
                    print(json.dumps(one), flush=True)
                    runs.append(one)
        finally:
            for api in apis:
                await api.close()
        result["runs"] = runs
    summary = {}
    for mode in ("fleet", "processes"):
        mine = [r for r in runs if r["mode"] == mode]
        summary[mode] = {
            k: round(sum(r[k] for r in mine) / len(mine), 2)
            for k in ("convergence_s", "cpu_converge_s", "idle_cpu_percent", "rss_mb", "peak_rss_mb")
        }
    f, p = summary["fleet"], summary["processes"]
    summary["fleet_over_processes"] = {k: round(f[k] / p[k], 2) if p[k] else None for k in f}
    result["summary"] = summary
    print(json.dumps(summary, indent=1), flush=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    asyncio.run(main())
