"""Client benchmark: list 10,000 ConfigMaps and get/create/patch throughput, kubeop vs others.

Usage (from the repository root; see bench/client/RESULTS.md for the last run)::

    python3 -m venv /tmp/bench-venv && /tmp/bench-venv/bin/pip install kubernetes kr8s
    .venv/bin/python bench/client/bench_client.py --others-python /tmp/bench-venv/bin/python

The orchestrator starts a minimal local control plane (etcd + kube-apiserver, so no controller
competes for the 2 cores), seeds the objects with kubeop, then runs every measurement in a fresh
subprocess so each library's peak RSS is its own. Wall time, CPU time (user + system of the
client process only; the API server's CPU is not counted) and peak RSS are reported; each cell is
the median of ``--repeat`` runs. Without ``--others-python`` only kubeop is measured.

``--go-writer`` adds the API server's write limit, measured independently: bench/client/gowriter
(client-go v0.36.3, client-side rate limit off) creates and patches ConfigMaps at concurrency
32, 64 and 128 over HTTP/2 and HTTP/1.1, interleaved with kubeop's creates and patches at
concurrency 32 (the order rotates every round); the limit is the best Go median, and kubeop's
median is reported as a fraction of it. ``--writes-only`` skips everything else.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

HERE = os.path.abspath(__file__)
DATA = "x" * 1024


def _usage() -> tuple[float, float]:
    """CPU seconds of this process and its peak RSS in MB.

    The peak comes from VmHWM: ``ru_maxrss`` survives exec on Linux, so a worker would report
    the orchestrator's peak instead of its own.
    """
    r = resource.getrusage(resource.RUSAGE_SELF)
    peak = 0.0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024.0
    return r.ru_utime + r.ru_stime, peak


def _report(count: int, wall: float, cpu0: float, extra: dict[str, Any] | None = None) -> None:
    cpu1, rss = _usage()
    print(json.dumps({"count": count, "wall": wall, "cpu": cpu1 - cpu0, "rss_mb": rss, **(extra or {})}))


# -- workers: each runs in its own process and prints one JSON line ------------------------------


def worker_kubeop(args: argparse.Namespace, *, compression: bool = True) -> None:
    from kubeop.client import Client, load_kubeconfig
    from kubeop.core import ApiResource, PatchType

    cm = ApiResource("", "v1", "configmaps", kind="ConfigMap")
    ns = args.namespace

    async def main() -> None:
        config = load_kubeconfig(args.kubeconfig, namespace=ns, qps=None, compression=compression)
        async with Client(config) as client:
            await client.get_or_none(cm, "warm-up")  # pool + TLS set up outside the timing
            cpu0, _ = _usage()
            t0 = time.perf_counter()
            if args.op == "list":
                result = await client.list_all(cm, page_size=500)
                count = len(result.items)
            elif args.op == "list-rv0":
                result = await client.list(cm, resource_version="0")
                count = len(result.items)
            else:
                count = await _ops(args, lambda i: _kubeop_op(client, cm, PatchType, args.op, i, ns))
            _report(count, time.perf_counter() - t0, cpu0)

    asyncio.run(main())


async def _kubeop_op(client: Any, cm: Any, patch_type: Any, op: str, i: int, ns: str) -> None:
    if op == "get":
        await client.get(cm, f"bench-{i % 10000:05d}")
    elif op == "create":
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"op-{os.getpid()}-{i}"}}
        await client.create({**body, "data": {"d": DATA}}, resource=cm)
    elif op == "patch":
        await client.patch(cm, f"bench-{i % 10000:05d}", {"metadata": {"labels": {"p": str(i)}}})


async def _ops(args: argparse.Namespace, one: Callable[[int], Awaitable[None]]) -> int:
    """``args.ops`` operations from ``args.concurrency`` tasks, like the Go writer's goroutines.

    (Until run 5 every operation was its own task behind a semaphore: thousands of waiting
    tasks, which a py-spy profile at concurrency 32 showed as ~1/3 of the worker's samples.)
    """
    todo = iter(range(args.ops))

    async def run() -> None:
        for i in todo:
            await one(i)

    await asyncio.gather(*(run() for _ in range(args.concurrency)))
    return args.ops


def worker_official(args: argparse.Namespace) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=args.kubeconfig, client_configuration=configuration)
    configuration.connection_pool_maxsize = max(4, args.concurrency)
    v1 = client.CoreV1Api(client.ApiClient(configuration))
    ns = args.namespace
    v1.list_namespaced_config_map(ns, limit=1)  # warm-up
    cpu0, _ = _usage()
    t0 = time.perf_counter()
    if args.op in ("list", "list-rv0"):
        items: list[Any] = []
        token = None
        while True:
            if args.op == "list-rv0":
                page = v1.list_namespaced_config_map(ns, resource_version="0")
            else:
                page = v1.list_namespaced_config_map(ns, limit=500, _continue=token)
            items.extend(page.items)
            token = page.metadata._continue
            if not token or args.op == "list-rv0":
                break
        count = len(items)
    else:

        def one(i: int) -> None:
            if args.op == "get":
                v1.read_namespaced_config_map(f"bench-{i % 10000:05d}", ns)
            elif args.op == "create":
                body = {"metadata": {"name": f"op-{os.getpid()}-{i}"}, "data": {"d": DATA}}
                v1.create_namespaced_config_map(ns, body)
            elif args.op == "patch":
                v1.patch_namespaced_config_map(
                    f"bench-{i % 10000:05d}", ns, {"metadata": {"labels": {"p": str(i)}}}
                )

        with ThreadPoolExecutor(args.concurrency) as pool:
            list(pool.map(one, range(args.ops)))
        count = args.ops
    _report(count, time.perf_counter() - t0, cpu0)


def worker_kr8s(args: argparse.Namespace) -> None:
    import kr8s.asyncio
    from kr8s.asyncio.objects import ConfigMap

    ns = args.namespace

    async def main() -> None:
        api = await kr8s.asyncio.api(kubeconfig=args.kubeconfig)
        await api.version()  # warm-up
        cpu0, _ = _usage()
        t0 = time.perf_counter()
        if args.op in ("list", "list-rv0"):
            objs = [o async for o in api.async_get("configmaps", namespace=ns)]
            count = len(objs)
        else:

            async def one(i: int) -> None:
                if args.op == "get":
                    await ConfigMap.get(f"bench-{i % 10000:05d}", namespace=ns, api=api)
                elif args.op == "create":
                    body = {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": f"op-{os.getpid()}-{i}"},
                    }
                    obj = await ConfigMap(
                        {**body, "metadata": {**body["metadata"], "namespace": ns}, "data": {"d": DATA}},
                        api=api,
                    )
                    await obj.create()
                elif args.op == "patch":
                    obj = ConfigMap(
                        {"metadata": {"name": f"bench-{i % 10000:05d}", "namespace": ns}}, api=api
                    )
                    await obj.patch({"metadata": {"labels": {"p": str(i)}}})

            count = await _ops(args, one)
        _report(count, time.perf_counter() - t0, cpu0)

    asyncio.run(main())


WORKERS: dict[str, Callable[[argparse.Namespace], None]] = {
    "kubeop": worker_kubeop,
    "kubeop-identity": lambda args: worker_kubeop(args, compression=False),
    "official": worker_official,
    "kr8s": worker_kr8s,
}


# -- orchestrator ------------------------------------------------------------------------------------


# ``--baseline-src``: another checkout's src/ whose kubeop the "kubeop-base" worker imports, so an
# older kubeop is measured against the working tree's in the same run, interleaved.
BASELINE_SRC: str | None = None


def _run_worker(
    python: str, lib: str, op: str, kubeconfig: str, namespace: str, concurrency: int, ops: int
) -> dict[str, Any]:
    env = None
    if lib == "kubeop-base":
        assert BASELINE_SRC is not None
        lib, env = "kubeop", dict(os.environ, PYTHONPATH=BASELINE_SRC)
    cmd = [
        python,
        HERE,
        "worker",
        "--lib",
        lib,
        "--op",
        op,
        "--kubeconfig",
        kubeconfig,
        "--namespace",
        namespace,
        "--concurrency",
        str(concurrency),
        "--ops",
        str(ops),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, env=env)
    if out.returncode != 0:
        return {
            "error": out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}"
        }
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


async def _seed(kubeconfig: str, namespace: str, count: int) -> float:
    from kubeop.client import Client, load_kubeconfig
    from kubeop.core import ApiResource

    cm = ApiResource("", "v1", "configmaps", kind="ConfigMap")
    async with Client(load_kubeconfig(kubeconfig, namespace=namespace, qps=None)) as client:
        await client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            resource=ApiResource("", "v1", "namespaces", kind="Namespace", namespaced=False),
        )
        sem = asyncio.Semaphore(32)
        t0 = time.perf_counter()

        async def one(i: int) -> None:
            async with sem:
                body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"bench-{i:05d}"}}
                await client.create({**body, "data": {"d": DATA}}, resource=cm)

        await asyncio.gather(*(one(i) for i in range(count)))
        return time.perf_counter() - t0


def orchestrate(args: argparse.Namespace) -> None:
    from kubeop.testing import ControlPlane

    libs = [("kubeop", sys.executable), ("kubeop-identity", sys.executable)]
    if BASELINE_SRC:
        libs.insert(1, ("kubeop-base", sys.executable))
    if args.others_python:
        libs += [("official", args.others_python), ("kr8s", args.others_python)]
    results: dict[str, Any] = {
        "machine": _machine(),
        "command": " ".join([os.path.relpath(sys.executable), *sys.argv]),
    }
    with ControlPlane(full=False) as cp:
        kubeconfig = cp.kubeconfig_path
        seed_wall = asyncio.run(_seed(kubeconfig, "bench-list", args.objects))
        results["seed"] = {
            "objects": args.objects,
            "wall": seed_wall,
            "creates_per_s": args.objects / seed_wall,
        }
        print(
            f"seeded {args.objects} ConfigMaps in {seed_wall:.1f} s ({args.objects / seed_wall:.0f}/s)",
            flush=True,
        )
        cells: list[dict[str, Any]] = []
        plan: list[tuple[str, int, int]] = [] if args.writes_only else [("list", 1, 0), ("list-rv0", 1, 0)]
        if not args.list_only and not args.writes_only:
            for op in ("get", "create", "patch"):
                plan += [(op, 1, args.serial_ops), (op, 32, args.concurrent_ops)]
        for op, conc, ops in plan:
            for lib, python in libs:
                if lib == "kubeop-identity" and not op.startswith("list"):
                    continue
                runs = [
                    _run_worker(python, lib, op, kubeconfig, "bench-list", conc, ops)
                    for _ in range(args.repeat)
                ]
                good = [r for r in runs if "error" not in r]
                if not good:
                    cell = {"lib": lib, "op": op, "concurrency": conc, "error": runs[0]["error"]}
                else:
                    cell = {
                        "lib": lib,
                        "op": op,
                        "concurrency": conc,
                        "count": good[0]["count"],
                        "wall": statistics.median(r["wall"] for r in good),
                        "cpu": statistics.median(r["cpu"] for r in good),
                        "rss_mb": statistics.median(r["rss_mb"] for r in good),
                    }
                    if op not in ("list", "list-rv0"):
                        cell["ops_per_s"] = cell["count"] / cell["wall"]
                print(json.dumps(cell), flush=True)
                cells.append(cell)
        results["cells"] = cells
        if args.go_writer:
            results["writes_vs_limit"] = _writes_vs_limit(args, kubeconfig)
    with open(args.output, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {args.output}")


# -- the API server's write limit (client-go) against kubeop's writes at concurrency 32 --------------

WRITE_NAMESPACE = "bench-write"
GO_CONCURRENCY = (32, 64, 128)


def build_go_writer() -> str:
    """Build bench/client/gowriter with the local Go toolchain (modules from the Go module cache
    or the configured module proxy)."""
    out = os.path.join(tempfile.gettempdir(), "kubeop-bench-gowriter")
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=mod", CGO_ENABLED="0")
    here = os.path.join(os.path.dirname(HERE), "gowriter")
    subprocess.run(["go", "build", "-trimpath", "-o", out, "."], cwd=here, env=env, check=True)
    return out


def _run_go_writer(
    binary: str, kubeconfig: str, op: str, concurrency: int, ops: int, http1: bool
) -> dict[str, Any]:
    ns = WRITE_NAMESPACE if op == "create" else "bench-list"
    cmd = [binary, "-kubeconfig", kubeconfig, "-namespace", ns, "-op", op]
    cmd += ["-concurrency", str(concurrency), "-ops", str(ops)] + (["-http1"] if http1 else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    if out.returncode != 0:
        return {"error": out.stderr.strip()[-300:] or f"exit {out.returncode}"}
    result = dict(json.loads(out.stdout.strip().splitlines()[-1]))
    if result.get("failed"):
        result["error"] = f"{result['failed']} failed: {result.get('first_error')}"
    return result


async def _clear_writes(kubeconfig: str) -> None:
    """Delete what a create cell made, outside the timing, so every cell meets the same etcd."""
    from kubeop.client import Client, load_kubeconfig
    from kubeop.core import ApiResource

    cm = ApiResource("", "v1", "configmaps", kind="ConfigMap")
    async with Client(load_kubeconfig(kubeconfig, namespace=WRITE_NAMESPACE, qps=None)) as client:
        await client.delete_collection(cm)
        while (await client.list(cm, limit=1)).items:
            await asyncio.sleep(0.2)


def _loadavg() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def _writes_vs_limit(args: argparse.Namespace, kubeconfig: str) -> dict[str, Any]:
    from kubeop.client import Client, load_kubeconfig
    from kubeop.core import ApiResource

    binary = build_go_writer()

    async def make_namespace() -> None:
        async with Client(load_kubeconfig(kubeconfig, qps=None)) as client:
            ns = ApiResource("", "v1", "namespaces", kind="Namespace", namespaced=False)
            if await client.get_or_none(ns, WRITE_NAMESPACE) is None:
                body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WRITE_NAMESPACE}}
                await client.create(body, resource=ns)

    asyncio.run(make_namespace())
    configs: list[tuple[str, int, bool]] = [("kubeop", 32, False)]
    if BASELINE_SRC:
        configs.append(("kubeop-base", 32, False))
    configs += [("client-go", c, h1) for h1 in (False, True) for c in GO_CONCURRENCY]
    raw: list[dict[str, Any]] = []
    load_before = _loadavg()
    for rnd in range(args.write_repeat):
        for op in ("create", "patch") if rnd % 2 == 0 else ("patch", "create"):
            # Rotate and alternate the order so kubeop runs early, late and in between.
            shift = (rnd * 3) % len(configs)
            order = configs[shift:] + configs[:shift]
            if rnd % 2:
                order.reverse()
            for impl, conc, http1 in order:
                if impl.startswith("kubeop"):
                    ns = WRITE_NAMESPACE if op == "create" else "bench-list"
                    r = _run_worker(sys.executable, impl, op, kubeconfig, ns, conc, args.write_ops)
                else:
                    r = _run_go_writer(binary, kubeconfig, op, conc, args.write_ops, http1)
                if "error" not in r:
                    r["ops_per_s"] = r["count"] / r["wall"]
                cell = {"round": rnd, "impl": impl, "op": op, "concurrency": conc, "http1": http1}
                cell.update({key: r[key] for key in ("ops_per_s", "wall", "cpu", "error") if key in r})
                print(json.dumps(cell), flush=True)
                raw.append(cell)
                if op == "create":
                    asyncio.run(_clear_writes(kubeconfig))
                time.sleep(1.0)
    load_after = _loadavg()
    summary: list[dict[str, Any]] = []
    result: dict[str, Any] = {"ops_per_cell": args.write_ops, "rounds": args.write_repeat}
    for op in ("create", "patch"):
        best = 0.0
        for impl, conc, http1 in configs:
            runs = [
                c
                for c in raw
                if (c["impl"], c["op"], c["concurrency"], c["http1"]) == (impl, op, conc, http1)
                and "error" not in c
            ]
            if not runs:
                continue
            med = statistics.median(c["ops_per_s"] for c in runs)
            cpu_ms = statistics.median(c["cpu"] for c in runs) / args.write_ops * 1000
            row = {"impl": impl, "op": op, "concurrency": conc, "http1": http1, "ops_per_s": med}
            row.update(cpu_ms_per_op=cpu_ms, runs=[round(c["ops_per_s"]) for c in runs])
            summary.append(row)
            if impl == "client-go":
                best = max(best, med)
        result[f"{op}_limit_ops_per_s"] = best
        for name in ("kubeop", "kubeop-base"):
            kubeop = next((r for r in summary if r["impl"] == name and r["op"] == op), None)
            if kubeop is not None and best:
                key = "kubeop" if name == "kubeop" else "kubeop_base"
                result[f"{op}_{key}_fraction"] = kubeop["ops_per_s"] / best
                print(
                    f"{op}: server limit (best client-go median) {best:.0f}/s, {name} c=32 "
                    f"{kubeop['ops_per_s']:.0f}/s = {kubeop['ops_per_s'] / best:.0%}",
                    flush=True,
                )
    result.update(summary=summary, raw=raw, loadavg_before=load_before, loadavg_after=load_after)
    return result


def _machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "system": platform.platform(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode")
    w = sub.add_parser("worker", allow_abbrev=False)
    w.add_argument("--lib", choices=sorted(WORKERS), required=True)
    w.add_argument("--op", choices=["list", "list-rv0", "get", "create", "patch"], required=True)
    w.add_argument("--kubeconfig", required=True)
    w.add_argument("--namespace", required=True)
    w.add_argument("--concurrency", type=int, default=1)
    w.add_argument("--ops", type=int, default=0)
    parser.add_argument("--others-python", help="a Python with the kubernetes and kr8s packages installed")
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--serial-ops", type=int, default=300)
    parser.add_argument("--concurrent-ops", type=int, default=2000)
    parser.add_argument("--list-only", action="store_true")
    parser.add_argument(
        "--go-writer",
        action="store_true",
        help="measure the server's write limit with client-go (bench/client/gowriter; needs Go)",
    )
    parser.add_argument("--writes-only", action="store_true", help="with --go-writer: nothing else")
    parser.add_argument("--write-repeat", type=int, default=3, help="rounds of the --go-writer section")
    parser.add_argument("--write-ops", type=int, default=3000, help="requests per --go-writer cell")
    parser.add_argument("--output", default="bench/client/results.json")
    parser.add_argument(
        "--baseline-src",
        help="the src/ directory of another kubeop checkout, measured as 'kubeop-base' next to this one",
    )
    args = parser.parse_args()
    global BASELINE_SRC
    BASELINE_SRC = os.path.abspath(args.baseline_src) if getattr(args, "baseline_src", None) else None
    if args.mode == "worker":
        WORKERS[args.lib](args)
    else:
        orchestrate(args)


if __name__ == "__main__":
    main()
