"""Cost per object at 100,000: kubeop's cache and operator beside client-go and controller-runtime.

One control plane (etcd + kube-apiserver from kubeop.testing) holds N Widgets (the custom resource
of bench/operator, created as ``kubectl apply`` would: with a last-applied annotation) and the N
ConfigMaps they own, in the state the Widget operator converges to (ConfigMap with the Widget's
value and a controller reference, Widget status with observedGeneration). The data is created
once, in a data directory that later runs reuse (``--data-dir``), and every measurement runs
against it in a fresh process, kubeop and the Go anchor alternately.

Phases:

- ``sync``: one informer over the N objects of one kind, in three forms: whole objects (minus
  managedFields, both sides' default), metadata only (kubeop ``metadata_only=True``, client-go's
  metadata informer), and transformed (a transform that also drops the last-applied annotation).
  Reported: seconds to has_synced, process CPU seconds, RSS growth per cached object (after GC).
  The Go side is bench/cache/goinformer (client-go v0.36.3; its typed ConfigMap client asks for
  protobuf, ``--go-json`` adds it speaking JSON). ``--list-modes default,stream,paged`` compares
  the initial list as each side's default (a streaming list on both), as a streaming list, and
  as a list (resourceVersion 0: client-go with its WatchListClient gate off).
- ``operator``: the Widget operator with N Widgets and N ConfigMaps cached (kubeop:
  bench/operator/kubeop_operator.py's reconcile; Go: bench/scale/crwidget, controller-runtime
  v0.24.1). Reported: cache sync seconds, RSS once settled, CPU of the initial pass (every Widget
  reconciled once, no writes), then CPU per change: ``--changes`` Widgets get a new spec.value,
  timed until each one's ConfigMap and status follow.

    python bench/scale/run.py [--objects 100000] [--runs 3] [--operator-runs 1] [--phases sync,operator]
        [--data-dir /var/tmp/kubeop-bench-scale] [--baseline-src /tmp/old/src]
        [--list-modes default,paged] [--go-json]

``--baseline-src`` adds "kubeop-base" runs (another checkout's src, same scripts) to both phases.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
from tests.support.crds import widget_crd  # noqa: E402

NAMESPACE = "scale"
GROUP, VERSION = "bench.kubeop.dev", "v1"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
CRD = widget_crd(GROUP)
# A spec.value of ~200 bytes: the ConfigMap carries it too, so each object is a few hundred bytes
# of JSON before metadata, like a small real object.
PAD = "x" * 192


def value_of(i: int, round_: int = 0) -> str:
    return f"{i:06d}-{round_}-{PAD}"


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def proc_stats(pid: int) -> tuple[float, float]:
    """(cpu seconds, rss MB) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status)[1]) / 1024  # type: ignore[index]
    return cpu, rss


# -- setup ----------------------------------------------------------------------------------------


def resources() -> tuple[Any, Any]:
    from kubeop.core import ApiResource

    return (
        ApiResource(GROUP, VERSION, "widgets", kind="Widget"),
        ApiResource("", "v1", "configmaps", kind="ConfigMap"),
    )


async def populate(kubeconfig: str, count: int, concurrency: int) -> None:
    """Create what is missing of the N Widgets (with status) and N owned ConfigMaps."""
    from kubeop.client import Client, load_kubeconfig
    from kubeop.core import AlreadyExists, ApiResource

    widgets, configmaps = resources()
    crd_res = ApiResource(
        "apiextensions.k8s.io", "v1", "customresourcedefinitions", kind="CustomResourceDefinition"
    )
    ns_res = ApiResource("", "v1", "namespaces", kind="Namespace", namespaced=False)
    crd_res = ApiResource(crd_res.group, crd_res.version, crd_res.plural, kind=crd_res.kind, namespaced=False)
    async with Client(load_kubeconfig(kubeconfig, qps=None)) as client:
        with contextlib.suppress(AlreadyExists):
            await client.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, resource=ns_res
            )
        with contextlib.suppress(AlreadyExists):
            await client.create(CRD, resource=crd_res)
        for _ in range(300):
            crd = await client.get(crd_res, CRD["metadata"]["name"])
            conditions = (crd.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                break
            await asyncio.sleep(0.1)
        have_w = {
            o["metadata"]["name"]: o for o in (await client.list_all(widgets, namespace=NAMESPACE)).items
        }
        have_cm = {
            o["metadata"]["name"] for o in (await client.list_all(configmaps, namespace=NAMESPACE)).items
        }
        todo = [i for i in range(count) if f"w-{i:06d}" not in have_cm or f"w-{i:06d}" not in have_w]
        print(
            f"  {len(have_w)} Widgets, {len(have_cm)} ConfigMaps present; {len(todo)} to create",
            file=sys.stderr,
        )
        sem = asyncio.Semaphore(concurrency)
        done = 0
        started = time.monotonic()

        async def one(i: int) -> None:
            nonlocal done
            name = f"w-{i:06d}"
            spec = {"value": value_of(i)}
            body = {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Widget",
                "metadata": {
                    "name": name,
                    "namespace": NAMESPACE,
                    "labels": {"app": "scale", "shard": str(i % 16)},
                },
                "spec": spec,
            }
            applied = json.dumps(body, separators=(",", ":"), sort_keys=True)
            body["metadata"]["annotations"] = {LAST_APPLIED: applied + "\n"}  # type: ignore[index]
            async with sem:
                widget = have_w.get(name)
                if widget is None:
                    try:
                        widget = await client.create(body, resource=widgets)
                    except AlreadyExists:
                        widget = await client.get(widgets, name, namespace=NAMESPACE)
                if (widget.get("status") or {}).get("observedGeneration") != widget["metadata"]["generation"]:
                    await client.patch(
                        widgets,
                        name,
                        {
                            "status": {
                                "observedGeneration": widget["metadata"]["generation"],
                                "configMap": name,
                            }
                        },
                        namespace=NAMESPACE,
                        subresource="status",
                    )
                if name not in have_cm:
                    owner = {
                        "apiVersion": f"{GROUP}/{VERSION}",
                        "kind": "Widget",
                        "name": name,
                        "uid": widget["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                    cm = {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": name, "namespace": NAMESPACE, "ownerReferences": [owner]},
                        "data": {"value": widget["spec"]["value"]},
                    }
                    with contextlib.suppress(AlreadyExists):
                        await client.create(cm, resource=configmaps)
            done += 1
            if done % 10_000 == 0:
                rate = done / (time.monotonic() - started)
                print(f"  {done}/{len(todo)} objects created ({rate:.0f} Widgets/s)", file=sys.stderr)

        await asyncio.gather(*(one(i) for i in todo))
        print(f"  created in {time.monotonic() - started:.0f} s", file=sys.stderr)


# -- phase "sync": one informer in a fresh process --------------------------------------------------


def drop_last_applied(obj: dict[str, Any]) -> dict[str, Any]:
    annotations = obj["metadata"].get("annotations")
    if annotations and LAST_APPLIED in annotations:
        del annotations[LAST_APPLIED]
        if not annotations:
            del obj["metadata"]["annotations"]
    return obj


async def child(kubeconfig: str, kind: str, form: str, list_mode: str = "default") -> dict[str, Any]:
    from kubeop.cache import FuncHandler, Informer, ListWatch, WatcherConfig, chain, strip_managed_fields
    from kubeop.cache import transform as transforms
    from kubeop.client import Client, load_kubeconfig

    widgets, configmaps = resources()
    res = widgets if kind == "widgets" else configmaps
    # The informer's default transform (strip_managed_fields in kubeop versions without compact),
    # plus dropping the last-applied annotation in the "transformed" form.
    default = getattr(transforms, "compact", strip_managed_fields)
    transform = chain(default, drop_last_applied) if form == "transformed" else default
    async with Client(load_kubeconfig(kubeconfig, qps=None)) as client:
        await client.transport.probe("/version")  # warm up, as bench/cache does on both sides
        await client.resource(res)
        gc.collect()
        rss_before = rss_bytes()
        cpu_before = time.process_time()
        started = time.perf_counter()
        source = ListWatch(client, res, namespace=NAMESPACE, metadata_only=form == "metadata")
        # "stream": a streaming list (sendInitialEvents); "paged": a list (resourceVersion 0, from
        # the watch cache); "default": the informer's own choice.
        config = None if list_mode == "default" else WatcherConfig(streaming_list=list_mode == "stream")
        informer = Informer(source, transform=transform, detect_mutations=False, config=config)
        adds = 0

        def on_add(obj: Any, initial: bool) -> None:
            nonlocal adds
            adds += 1

        informer.add_event_handler(FuncHandler(on_add=on_add))
        informer.start()
        await informer.wait_for_sync()
        sync_seconds = time.perf_counter() - started
        cpu = time.process_time() - cpu_before
        rss_synced = rss_bytes()
        gc.collect()
        rss_after_gc = rss_bytes()
        objects = len(informer.store)
        assert objects == adds, (objects, adds)
        await informer.stop()
        return {
            "objects": objects,
            "sync_seconds": sync_seconds,
            "cpu_seconds": cpu,
            "rss_before": rss_before,
            "rss_synced": rss_synced,
            "rss_after_gc": rss_after_gc,
        }


def build_go(directory: Path, name: str) -> Path:
    out = Path(tempfile.gettempdir()) / name
    env = dict(os.environ, GOTOOLCHAIN="local", GOFLAGS="-mod=mod", CGO_ENABLED="0", GOPROXY="off")
    subprocess.run(["go", "build", "-trimpath", "-o", str(out), "."], cwd=directory, env=env, check=True)
    return out


def run_sync(
    impl: str, kubeconfig: str, kind: str, form: str, go: Path | None, base: str | None
) -> dict[str, Any]:
    """``impl`` is kubeop, kubeop-base, client-go or client-go-json (client-go's typed clients
    speaking JSON instead of their default protobuf), optionally with ``/stream`` or ``/paged``
    (the initial list as a streaming list or a list; without: each side's default)."""
    name, _, mode = impl.partition("/")
    mode = mode or "default"
    if name.startswith("client-go"):
        assert go is not None
        resource = "configmaps" if kind == "configmaps" else f"{GROUP}/{VERSION}/widgets"
        cmd = [str(go), "-kubeconfig", kubeconfig, "-namespace", NAMESPACE, "-resource", resource]
        if form == "metadata":
            cmd.append("-metadata-only")
        if form == "transformed":
            cmd.append("-drop-last-applied")
        if name == "client-go-json":
            cmd.append("-json")
        env = dict(os.environ)
        env.pop("KUBE_FEATURE_WatchListClient", None)
        if mode != "default":  # client-go v0.35+: streaming lists unless this gate is off
            env["KUBE_FEATURE_WatchListClient"] = "true" if mode == "stream" else "false"
    else:
        cmd = [sys.executable, __file__, "child", "--kubeconfig", kubeconfig, "--kind", kind, "--form", form]
        cmd += ["--list-mode", mode]
        env = dict(os.environ, PYTHONPATH=base) if name == "kubeop-base" and base else None
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def summarize_sync(impl: str, kind: str, form: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    n = runs[0]["objects"]
    per_object = [(r["rss_after_gc"] - r["rss_before"]) / n for r in runs]
    return {
        "phase": "sync",
        "impl": impl,
        "kind": kind,
        "form": form,
        "objects": n,
        "runs": len(runs),
        "sync_s": statistics.median(r["sync_seconds"] for r in runs),
        "sync_s_min": min(r["sync_seconds"] for r in runs),
        "cpu_s": statistics.median(r["cpu_seconds"] for r in runs),
        "rss_total_mb": statistics.median(r["rss_after_gc"] for r in runs) / 2**20,
        "rss_per_object_bytes": statistics.median(per_object),
        "samples": runs,
    }


# -- phase "operator" ---------------------------------------------------------------------------------

WRITE_VERBS = ("POST", "PUT", "PATCH", "DELETE")


def api_writes(cp: Any) -> int:
    """The API server's own count of writes to widgets and configmaps (apiserver_request_total)."""
    status, body = cp.api.raw("GET", "/metrics")
    assert status == 200
    total = 0
    for line in body.decode().splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        kind = 'resource="widgets"' in line or 'resource="configmaps"' in line
        if kind and any(f'verb="{v}"' in line for v in WRITE_VERBS):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def start_operator(
    impl: str, kubeconfig: str, workers: int, go: Path | None, base: str | None
) -> subprocess.Popen[str]:
    env = dict(os.environ, KUBECONFIG=kubeconfig, PYTHONUNBUFFERED="1")
    if impl == "controller-runtime":
        assert go is not None
        cmd = [str(go), "-kubeconfig", kubeconfig, "-workers", str(workers)]
    else:
        cmd = [sys.executable, str(HERE / "widget_operator.py"), str(workers)]
        if impl == "kubeop-base" and base:
            env["PYTHONPATH"] = base
    log = Path(tempfile.gettempdir()) / f"kubeop-bench-scale-{impl}.log"
    with log.open("w") as stderr:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != "ready":
        raise RuntimeError(f"{impl} did not start ({line!r}); its log: {log}\n{log.read_text()[-3000:]}")
    return proc


def stop_operator(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def settle(pid: int, quiet: float = 0.05, window: float = 2.0, timeout: float = 600.0) -> float:
    """Wait until the process used less than ``quiet`` CPU seconds over ``window``; returns when
    its busy period ended (the start of the quiet window)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        c0, _ = proc_stats(pid)
        t0 = time.monotonic()
        await asyncio.sleep(window)
        c1, _ = proc_stats(pid)
        if c1 - c0 < quiet:
            return t0
    raise TimeoutError("operator never went idle")


async def run_operator(
    cp: Any,
    impl: str,
    kubeconfig: str,
    n: int,
    changes: int,
    round_: int,
    workers: int,
    go: Path | None,
    base: str | None,
) -> dict[str, Any]:
    from kubeop.client import Client, load_kubeconfig

    widgets, configmaps = resources()
    writes = (lambda: api_writes(cp)) if cp is not None else (lambda: 0)
    w_start = writes()
    t_start = time.monotonic()
    proc = start_operator(impl, kubeconfig, workers, go, base)
    try:
        assert proc.stdout is not None
        loop = asyncio.get_running_loop()
        line = await loop.run_in_executor(None, proc.stdout.readline)
        assert line.startswith("synced "), line
        sync_s = float(line.split()[1])
        synced_cpu, synced_rss = proc_stats(proc.pid)
        idle_at = await settle(proc.pid)
        initial_cpu, settled_rss = proc_stats(proc.pid)
        initial_pass_s = idle_at - t_start
        initial_writes = writes() - w_start
        async with Client(load_kubeconfig(kubeconfig, qps=None)) as client:
            listed = await client.list(configmaps, namespace=NAMESPACE, limit=1)
            rv = listed.resource_version
            targets = {f"w-{i:06d}": value_of(i, round_) for i in range(0, n, max(1, n // changes))[:changes]}
            cm_done: set[str] = set()
            status_done: set[str] = set()
            generations: dict[str, int] = {}

            async def follow_configmaps() -> None:
                async for ev in client.watch(configmaps, namespace=NAMESPACE, resource_version=rv):
                    name = ev.object["metadata"]["name"] if ev.type != "BOOKMARK" else ""
                    if name in targets and (ev.object.get("data") or {}).get("value") == targets[name]:
                        cm_done.add(name)
                    if len(cm_done) == len(targets):
                        return

            async def follow_widgets() -> None:
                async for ev in client.watch(widgets, namespace=NAMESPACE, resource_version=rv):
                    if ev.type == "BOOKMARK":
                        continue
                    md = ev.object["metadata"]
                    name = md["name"]
                    if name in targets and ev.object["spec"]["value"] == targets[name]:
                        generations[name] = md["generation"]
                        if (ev.object.get("status") or {}).get("observedGeneration") == md["generation"]:
                            status_done.add(name)
                    if len(status_done) == len(targets):
                        return

            watchers = [asyncio.create_task(follow_configmaps()), asyncio.create_task(follow_widgets())]
            await asyncio.sleep(0.5)
            c0, _ = proc_stats(proc.pid)
            w0 = writes()
            t0 = time.monotonic()
            sem = asyncio.Semaphore(32)

            async def change(name: str, value: str) -> None:
                async with sem:
                    await client.patch(widgets, name, {"spec": {"value": value}}, namespace=NAMESPACE)

            await asyncio.gather(*(change(k, v) for k, v in targets.items()))
            await asyncio.wait_for(asyncio.gather(*watchers), 600)
            t1 = time.monotonic()
            await settle(proc.pid, window=1.0)
            c1, rss = proc_stats(proc.pid)
            change_writes = writes() - w0 - len(targets)
        return {
            "phase": "operator",
            "impl": impl,
            "objects": n,
            "sync_s": sync_s,
            "sync_cpu_s": synced_cpu,
            "rss_synced_mb": synced_rss,
            "initial_pass_s": round(initial_pass_s, 2),
            "initial_cpu_s": initial_cpu,
            "initial_writes": initial_writes if cp is not None else None,
            "rss_settled_mb": settled_rss,
            "changes": len(targets),
            "change_s": round(t1 - t0, 2),
            "cpu_ms_per_change": (c1 - c0) * 1000 / len(targets),
            "writes_per_change": change_writes / len(targets) if cp is not None else None,
            "rss_after_changes_mb": rss,
        }
    finally:
        stop_operator(proc)


# -- driver -------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command")
    c = sub.add_parser("child")
    c.add_argument("--kubeconfig", required=True)
    c.add_argument("--kind", required=True)
    c.add_argument("--form", required=True)
    c.add_argument("--list-mode", default="default")
    parser.add_argument("--kubeconfig", help="an existing cluster instead of starting a control plane")
    parser.add_argument("--data-dir", default="/var/tmp/kubeop-bench-scale", help="kept between runs")
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=64, help="concurrent creates while populating")
    parser.add_argument("--runs", type=int, default=3, help="sync measurements per form and implementation")
    parser.add_argument("--operator-runs", type=int, default=1, help="operator runs per implementation")
    parser.add_argument("--phases", default="sync,operator")
    parser.add_argument("--kinds", default="configmaps,widgets")
    parser.add_argument("--forms", default="full,metadata,transformed")
    parser.add_argument("--changes", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--no-go", action="store_true", help="skip client-go and controller-runtime")
    parser.add_argument(
        "--list-modes",
        default="default",
        help="sync: initial list modes to compare, of default,stream,paged (each side's default, "
        "a streaming list, a list)",
    )
    parser.add_argument(
        "--go-json", action="store_true", help="sync: also client-go's typed clients speaking JSON"
    )
    parser.add_argument("--baseline-src", help="also run this kubeop src as 'kubeop-base'")
    parser.add_argument("--out", default=str(HERE / "results.json"))
    args = parser.parse_args()

    if args.command == "child":
        print(json.dumps(asyncio.run(child(args.kubeconfig, args.kind, args.form, args.list_mode))))
        return

    phases = args.phases.split(",")
    impls_py = ["kubeop"] + (["kubeop-base"] if args.baseline_src else [])
    results: list[dict[str, Any]] = []
    cp = None
    with contextlib.ExitStack() as stack:
        kubeconfig = args.kubeconfig
        if kubeconfig is None:
            from kubeop.testing import ControlPlane

            cp = stack.enter_context(ControlPlane(args.data_dir, full=False))
            kubeconfig = cp.kubeconfig_path
        t0 = time.monotonic()
        asyncio.run(populate(kubeconfig, args.objects, args.concurrency))
        print(f"populated in {time.monotonic() - t0:.0f} s", file=sys.stderr)
        if "sync" in phases:
            go = (
                None
                if args.no_go
                else build_go(ROOT / "bench" / "cache" / "goinformer", "kubeop-bench-goinformer")
            )
            impls_go = [] if go is None else ["client-go"] + (["client-go-json"] if args.go_json else [])
            impls = [
                f"{impl}/{mode}" if mode != "default" else impl
                for mode in args.list_modes.split(",")
                for impl in impls_py + impls_go
            ]
            for kind in args.kinds.split(","):
                for form in args.forms.split(","):
                    samples: dict[str, list[dict[str, Any]]] = {i: [] for i in impls}
                    for _ in range(args.runs):
                        for impl in impls:
                            samples[impl].append(
                                run_sync(impl, kubeconfig, kind, form, go, args.baseline_src)
                            )
                    for impl, runs in samples.items():
                        r = summarize_sync(impl, kind, form, runs)
                        results.append(r)
                        print(
                            f"  sync {kind} {form} {impl}: {r['sync_s']:.2f} s, CPU {r['cpu_s']:.2f} s, "
                            f"{r['rss_per_object_bytes']:.0f} B/object",
                            file=sys.stderr,
                        )
        if "operator" in phases:
            go = None if args.no_go else build_go(HERE / "crwidget", "kubeop-bench-crwidget")
            impls = impls_py + ([] if go is None else ["controller-runtime"])
            round_ = int(time.time())  # every change round writes new values
            for run in range(args.operator_runs):
                for impl in impls:
                    round_ += 1
                    r = asyncio.run(
                        run_operator(
                            cp,
                            impl,
                            kubeconfig,
                            args.objects,
                            args.changes,
                            round_,
                            args.workers,
                            go,
                            args.baseline_src,
                        )
                    )
                    r["run"] = run
                    results.append(r)
                    print(f"  operator {impl}: {json.dumps(r)}", file=sys.stderr)

    machine = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "objects": args.objects,
    }
    Path(args.out).write_text(json.dumps({"machine": machine, "results": results}, indent=1) + "\n")
    print_tables(results)


def print_tables(results: list[dict[str, Any]]) -> None:
    sync = [r for r in results if r["phase"] == "sync"]
    if sync:
        print("| kind | form | implementation | sync s (median, min) | CPU s | RSS MB | RSS per object B |")
        print("|---|---|---|---|---|---|---|")
        for r in sync:
            print(
                f"| {r['kind']} | {r['form']} | {r['impl']} | {r['sync_s']:.2f} ({r['sync_s_min']:.2f}) | "
                f"{r['cpu_s']:.2f} | {r['rss_total_mb']:.0f} | {r['rss_per_object_bytes']:.0f} |"
            )
    ops = [r for r in results if r["phase"] == "operator"]
    if ops:
        print()
        print(
            "| implementation | run | sync s | RSS MB | initial pass s (CPU s, writes) | change s "
            "| CPU ms/change | writes/change |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for r in ops:
            print(
                f"| {r['impl']} | {r['run']} | {r['sync_s']:.2f} | {r['rss_settled_mb']:.0f} | "
                f"{r['initial_pass_s']:.1f} ({r['initial_cpu_s']:.1f}, {r['initial_writes']}) | "
                f"{r['change_s']:.2f} | {r['cpu_ms_per_change']:.3f} | {r['writes_per_change']} |"
            )


if __name__ == "__main__":
    main()
