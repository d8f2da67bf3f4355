"""Cache benchmark: sync time, CPU and RSS per cached object, kubeop vs a client-go informer.

Fills a namespace with N ConfigMaps (1 KB of data each) and another with N custom resources
(1 KB payload in their spec), then, in fresh processes, syncs one informer over each and
reports what it cost: wall time until has_synced, process CPU seconds, and the RSS growth from
before the informer existed to after it synced (after a GC), divided by N. The client-go
baseline is bench/cache/goinformer (client-go v0.36.3, built from the Go module cache), run
alternately with the Python runs so both see the same machine.

    .venv/bin/python bench/cache/bench_cache.py                 # own control plane, 10,000 each
    .venv/bin/python bench/cache/bench_cache.py --kubeconfig K  # an existing cluster
    .venv/bin/python bench/cache/bench_cache.py --profile       # plus a cProfile of one sync

Modes of the kubeop informer: ``streaming`` (the default: a streaming list, as client-go 1.35+
does), ``paged`` (the fallback for servers without streaming lists: a list at resourceVersion 0
from the watch cache) and ``paged-consistent`` (a consistent list in pages of 500 from etcd).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CM_NAMESPACE = "bench-cache-cm"
CR_NAMESPACE = "bench-cache-cr"
CR_GROUP, CR_VERSION, CR_PLURAL = "bench.kubeop.dev", "v1", "benchwidgets"
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{CR_PLURAL}.{CR_GROUP}"},
    "spec": {
        "group": CR_GROUP,
        "scope": "Namespaced",
        "names": {"plural": CR_PLURAL, "singular": "benchwidget", "kind": "BenchWidget"},
        "versions": [
            {
                "name": CR_VERSION,
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "replicas": {"type": "integer"},
                                    "image": {"type": "string"},
                                    "payload": {"type": "string"},
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}
PAYLOAD = "x" * 1024


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# -- setup ----------------------------------------------------------------------------------------


async def populate(kubeconfig: str, count: int) -> None:
    from kubeop.client import Client, load_kubeconfig
    from kubeop.core import AlreadyExists, ApiResource

    ns_res = ApiResource("", "v1", "namespaces", kind="Namespace", namespaced=False)
    crd_res = ApiResource(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        kind="CustomResourceDefinition",
        namespaced=False,
    )
    cm_res = ApiResource("", "v1", "configmaps", kind="ConfigMap")
    cr_res = ApiResource(CR_GROUP, CR_VERSION, CR_PLURAL, kind="BenchWidget")
    async with Client(load_kubeconfig(kubeconfig, qps=None)) as client:
        for ns in (CM_NAMESPACE, CR_NAMESPACE):
            with contextlib.suppress(AlreadyExists):
                await client.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, resource=ns_res
                )
        with contextlib.suppress(AlreadyExists):
            await client.create(CRD, resource=crd_res)
        for _ in range(300):
            crd = await client.get(crd_res, CRD["metadata"]["name"])
            if any(
                c["type"] == "Established" and c["status"] == "True"
                for c in (crd.get("status") or {}).get("conditions") or []
            ):
                break
            await asyncio.sleep(0.1)

        def configmap(i: int) -> dict[str, Any]:
            return {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"cm-{i:05d}", "labels": {"app": "bench", "shard": str(i % 10)}},
                "data": {"payload": PAYLOAD},
            }

        def widget(i: int) -> dict[str, Any]:
            return {
                "apiVersion": f"{CR_GROUP}/{CR_VERSION}",
                "kind": "BenchWidget",
                "metadata": {"name": f"w-{i:05d}", "labels": {"app": "bench", "shard": str(i % 10)}},
                "spec": {"replicas": i % 5, "image": "registry.example/app:1.0", "payload": PAYLOAD},
            }

        sem = asyncio.Semaphore(32)

        async def create(obj: dict[str, Any], res: ApiResource, ns: str) -> None:
            async with sem:
                with contextlib.suppress(AlreadyExists):
                    await client.create(obj, namespace=ns, resource=res)

        for res, ns, make in ((cm_res, CM_NAMESPACE, configmap), (cr_res, CR_NAMESPACE, widget)):
            have = {o["metadata"]["name"] for o in (await client.list_all(res, namespace=ns)).items}
            missing = [make(i) for i in range(count) if make(i)["metadata"]["name"] not in have]
            started = time.monotonic()
            await asyncio.gather(*(create(o, res, ns) for o in missing))
            took = time.monotonic() - started
            print(f"  {ns}: {len(have)} present, created {len(missing)} in {took:.1f} s", file=sys.stderr)


# -- one measured sync (runs in a fresh process) ---------------------------------------------------


async def child(kubeconfig: str, kind: str, mode: str, profile: str | None) -> dict[str, Any]:
    from kubeop.cache import FuncHandler, Informer, ListWatch, WatcherConfig
    from kubeop.client import Client, load_kubeconfig
    from kubeop.core import ApiResource

    if kind == "configmaps":
        res, ns = ApiResource("", "v1", "configmaps", kind="ConfigMap"), CM_NAMESPACE
    else:
        res, ns = ApiResource(CR_GROUP, CR_VERSION, CR_PLURAL, kind="BenchWidget"), CR_NAMESPACE
    config = {
        "streaming": WatcherConfig(),
        "paged": WatcherConfig(streaming_list=False),
        "paged-consistent": WatcherConfig(streaming_list=False, consistent_list=True),
    }[mode]
    async with Client(load_kubeconfig(kubeconfig, qps=None)) as client:
        # Warm the client up first (TLS context, connection, lazy imports), as an operator's is
        # by the time its informers start; the Go baseline does the same.
        await client.transport.probe("/version")
        gc.collect()
        rss_before = rss_bytes()
        cpu_before = time.process_time()
        profiler = cProfile.Profile() if profile else None
        started = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        informer = Informer(ListWatch(client, res, namespace=ns), config=config, detect_mutations=False)
        adds = 0

        def on_add(obj: Any, initial: bool) -> None:
            nonlocal adds
            adds += 1

        informer.add_event_handler(FuncHandler(on_add=on_add))
        informer.start()
        await informer.wait_for_sync()
        sync_seconds = time.perf_counter() - started
        if profiler is not None and profile:
            profiler.disable()
            profiler.dump_stats(profile)
        cpu = time.process_time() - cpu_before
        rss_synced = rss_bytes()
        await informer.stop()
        gc.collect()
        rss_after_gc = rss_bytes()
        objects = len(informer.store)
        assert objects == adds
        return {
            "impl": f"kubeop ({mode})",
            "objects": objects,
            "sync_seconds": sync_seconds,
            "cpu_seconds": cpu,
            "rss_before": rss_before,
            "rss_synced": rss_synced,
            "rss_after_gc": rss_after_gc,
            "stats": str(informer.watcher.stats),
        }


# -- driver ---------------------------------------------------------------------------------------


def build_go() -> Path:
    out = Path(tempfile.gettempdir()) / "kubeop-bench-goinformer"
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=mod", CGO_ENABLED="0", GOPROXY="off")
    subprocess.run(
        ["go", "build", "-trimpath", "-o", str(out), "."], cwd=HERE / "goinformer", env=env, check=True
    )
    return out


def run_python(kubeconfig: str, kind: str, mode: str, profile: str | None = None) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "child", "--kubeconfig", kubeconfig, "--kind", kind, "--mode", mode]
    if profile:
        cmd += ["--profile-out", profile]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run_go(binary: Path, kubeconfig: str, kind: str) -> dict[str, Any]:
    resource = "configmaps" if kind == "configmaps" else f"{CR_GROUP}/{CR_VERSION}/{CR_PLURAL}"
    ns = CM_NAMESPACE if kind == "configmaps" else CR_NAMESPACE
    cmd = [str(binary), "-kubeconfig", kubeconfig, "-namespace", ns, "-resource", resource]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    n = runs[0]["objects"]
    med = {
        k: statistics.median(r[k] for r in runs)
        for k in ("sync_seconds", "cpu_seconds", "rss_before", "rss_after_gc")
    }
    return {
        "impl": runs[0]["impl"],
        "objects": n,
        "runs": len(runs),
        "sync_s": med["sync_seconds"],
        "sync_s_min": min(r["sync_seconds"] for r in runs),
        "cpu_s": med["cpu_seconds"],
        "rss_total_mb": med["rss_after_gc"] / 2**20,
        "rss_per_object_kb": (med["rss_after_gc"] - med["rss_before"]) / n / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command")
    c = sub.add_parser("child")
    c.add_argument("--kubeconfig", required=True)
    c.add_argument("--kind", required=True)
    c.add_argument("--mode", required=True)
    c.add_argument("--profile-out")
    parser.add_argument("--kubeconfig", help="use this cluster instead of starting a control plane")
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--kinds", default="configmaps,crs")
    parser.add_argument("--modes", default="streaming,paged")
    parser.add_argument("--no-go", action="store_true", help="skip the client-go baseline")
    parser.add_argument("--profile", action="store_true", help="cProfile one streaming sync per kind")
    args = parser.parse_args()

    if args.command == "child":
        print(json.dumps(asyncio.run(child(args.kubeconfig, args.kind, args.mode, args.profile_out))))
        return

    with contextlib.ExitStack() as stack:
        kubeconfig = args.kubeconfig
        if kubeconfig is None:
            from kubeop.testing import ControlPlane

            cp = stack.enter_context(ControlPlane(full=False))
            kubeconfig = cp.kubeconfig_path
        print(f"populating {args.objects} ConfigMaps and {args.objects} custom resources...", file=sys.stderr)
        asyncio.run(populate(kubeconfig, args.objects))
        go = None if args.no_go else build_go()
        results: list[dict[str, Any]] = []
        for kind in args.kinds.split(","):
            samples: dict[str, list[dict[str, Any]]] = {}
            for i in range(args.runs):
                for mode in args.modes.split(","):
                    samples.setdefault(mode, []).append(run_python(kubeconfig, kind, mode))
                if go is not None:
                    samples.setdefault("client-go", []).append(run_go(go, kubeconfig, kind))
                print(f"  {kind}: run {i + 1}/{args.runs} done", file=sys.stderr)
            for runs in samples.values():
                results.append(dict(summarize(runs), kind=kind))
            if args.profile:
                path = str(Path(tempfile.gettempdir()) / f"kubeop-bench-{kind}.prof")
                run_python(kubeconfig, kind, "streaming", profile=path)
                print(f"\n== cProfile of one streaming sync of {kind} ({path}) ==", file=sys.stderr)
                pstats.Stats(path, stream=sys.stderr).sort_stats("tottime").print_stats(18)

    print("| kind | implementation | objects | sync s (median, min) | CPU s | RSS MB | RSS per object KB |")
    print("|---|---|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['kind']} | {r['impl']} | {r['objects']} | {r['sync_s']:.2f} ({r['sync_s_min']:.2f}) | "
            f"{r['cpu_s']:.2f} | {r['rss_total_mb']:.0f} | {r['rss_per_object_kb']:.2f} |"
        )
    print(json.dumps(results), file=sys.stderr)


if __name__ == "__main__":
    main()
