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
        [--list-modes default,paged] [--go-json] [--startup-runs 3] [--latency-creates 50]

- ``startup``: the operator started on the N + N objects: seconds from process start to its
  caches synced and to its first reconcile (``--startup-runs`` starts per implementation,
  interleaved), and the import cost of a kubeop operator process (``python -X importtime`` of
  widget_operator.py's imports, and the wall time of that import beside ``python -c pass``).
- ``latency``: the operator started and settled on the N + N objects (an idle plane), then
  ``--latency-creates`` Widgets created one by one, each timed from its create request to the
  driver seeing both its ConfigMap and its status (create-to-converged: p50, p99, max), then
  deleted again. Also reports the start-up times of that start, operator CPU and API writes per
  create.

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


# Python operators run with bytecode caches, as an installed package has them (pip compiles what it
# installs): without, every start compiles kubeop's modules again (~0.4 s of CPU). They are kept
# here, not beside the sources, and made by a first import (``warm_bytecode``) before measuring.
PYCACHE = Path(tempfile.gettempdir()) / "kubeop-bench-pycache"


def python_env(base: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of a Python operator process (``base``: another kubeop src on its path)."""
    env = dict(os.environ, PYTHONPYCACHEPREFIX=str(PYCACHE), **extra)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if base:
        env["PYTHONPATH"] = base
    return env


def warm_bytecode(base: str | None) -> None:
    """Import what the operator imports once, so its bytecode caches exist."""
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import widget_operator"
    subprocess.run([sys.executable, "-c", code], env=python_env(base), check=True)


def start_operator(
    impl: str, kubeconfig: str, workers: int, go: Path | None, base: str | None
) -> subprocess.Popen[str]:
    env = python_env(base if impl == "kubeop-base" else None, KUBECONFIG=kubeconfig, PYTHONUNBUFFERED="1")
    if impl == "controller-runtime":
        assert go is not None
        cmd = [str(go), "-kubeconfig", kubeconfig, "-workers", str(workers)]
    else:
        cmd = [sys.executable, str(HERE / "widget_operator.py"), str(workers)]
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
        while line.startswith("first "):
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


# -- phases "startup" and "latency" ------------------------------------------------------------------


async def read_startup(proc: subprocess.Popen[str], started: float, timeout: float = 900.0) -> dict[str, Any]:
    """Read the operator's "synced" and "first" lines: seconds from ``started`` (unix time, taken
    just before the process was started) to each."""
    assert proc.stdout is not None
    loop = asyncio.get_running_loop()
    out: dict[str, Any] = {}
    while "synced_s" not in out or "first_s" not in out:
        line = await asyncio.wait_for(loop.run_in_executor(None, proc.stdout.readline), timeout)
        if not line:
            raise RuntimeError("the operator exited before it synced and reconciled")
        word, *rest = line.split()
        if word == "synced":
            out["synced_s"] = float(rest[1]) - started
        elif word == "first":
            out["first_s"] = float(rest[0]) - started
    return out


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank: with 50 samples p99 is the largest but one... of
    the sorted values at rank ceil(q/100 * n)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


async def run_latency(
    cp: Any,
    impl: str,
    kubeconfig: str,
    n: int,
    creates: int,
    gap: float,
    round_: int,
    workers: int,
    go: Path | None,
    base: str | None,
) -> dict[str, Any]:
    """Start the operator (start-up times), and with ``creates`` > 0 let it settle and time
    single creates on the idle plane."""
    from kubeop.client import Client, load_kubeconfig

    widgets, configmaps = resources()
    started = time.time()
    proc = start_operator(impl, kubeconfig, workers, go, base)
    try:
        result: dict[str, Any] = {"phase": "latency" if creates else "startup", "impl": impl, "objects": n}
        result.update(await read_startup(proc, started))
        if not creates:
            return result
        await settle(proc.pid)
        writes = (lambda: api_writes(cp)) if cp is not None else (lambda: 0)
        names = [f"lat-{round_}-{i:03d}" for i in range(creates)]
        async with Client(load_kubeconfig(kubeconfig, qps=None)) as client:
            rv = (await client.list(configmaps, namespace=NAMESPACE, limit=1)).resource_version
            cm_at: dict[str, float] = {}
            status_at: dict[str, float] = {}
            converged: dict[str, asyncio.Event] = {name: asyncio.Event() for name in names}

            def check(name: str) -> None:
                if name in cm_at and name in status_at:
                    converged[name].set()

            async def follow_configmaps() -> None:
                async for ev in client.watch(configmaps, namespace=NAMESPACE, resource_version=rv):
                    if ev.type in ("ADDED", "MODIFIED"):
                        name = ev.object["metadata"]["name"]
                        if name in converged and name not in cm_at:
                            cm_at[name] = time.perf_counter()
                            check(name)

            async def follow_widgets() -> None:
                async for ev in client.watch(widgets, namespace=NAMESPACE, resource_version=rv):
                    if ev.type in ("ADDED", "MODIFIED"):
                        md = ev.object["metadata"]
                        name = md["name"]
                        status = ev.object.get("status") or {}
                        if (
                            name in converged
                            and name not in status_at
                            and status.get("observedGeneration") == md["generation"]
                        ):
                            status_at[name] = time.perf_counter()
                            check(name)

            watchers = [asyncio.create_task(follow_configmaps()), asyncio.create_task(follow_widgets())]
            try:
                await asyncio.sleep(0.5)
                c0, _ = proc_stats(proc.pid)
                w0 = writes()
                latencies: list[float] = []
                starts: list[float] = []  # unix times, to match with the operator's GC record
                acks: list[float] = []  # unix times the creates were answered
                for i, name in enumerate(names):
                    body = {
                        "apiVersion": f"{GROUP}/{VERSION}",
                        "kind": "Widget",
                        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "latency"}},
                        "spec": {"value": value_of(i, round_)},
                    }
                    starts.append(time.time())
                    t0 = time.perf_counter()
                    await client.create(body, resource=widgets)
                    acks.append(time.time())
                    await asyncio.wait_for(converged[name].wait(), 60)
                    latencies.append(max(cm_at[name], status_at[name]) - t0)
                    await asyncio.sleep(gap)
                await settle(proc.pid, window=1.0)
                c1, rss = proc_stats(proc.pid)
                change_writes = writes() - w0 - creates
            finally:
                for task in watchers:
                    task.cancel()
                await asyncio.gather(*watchers, return_exceptions=True)
        ms = [x * 1000 for x in latencies]
        result.update(
            {
                "creates": creates,
                "p50_ms": statistics.median(ms),
                "p99_ms": percentile(ms, 99),
                "max_ms": max(ms),
                "latencies_ms": [round(x, 2) for x in ms],
                "starts": [round(x, 4) for x in starts],
                "acks": [round(x, 4) for x in acks],
                "round": round_,
                "pid": proc.pid,
                "cpu_ms_per_create": (c1 - c0) * 1000 / creates,
                "writes_per_create": change_writes / creates if cp is not None else None,
                "rss_mb": rss,
            }
        )
        return result
    finally:
        stop_operator(proc)
        if creates:
            await delete_latency_objects(kubeconfig)


async def delete_latency_objects(kubeconfig: str) -> None:
    """Delete what latency runs created (the Widgets labelled app=latency and their ConfigMaps:
    no garbage collector runs on this control plane), so every run starts on N + N objects."""
    from kubeop.client import Client, load_kubeconfig
    from kubeop.core import NotFound

    widgets, configmaps = resources()
    async with Client(load_kubeconfig(kubeconfig, qps=None)) as client:
        listed = await client.list_all(widgets, namespace=NAMESPACE, label_selector="app=latency")
        for obj in listed.items:
            name = obj["metadata"]["name"]
            for res in (widgets, configmaps):
                with contextlib.suppress(NotFound):
                    await client.delete(res, name, namespace=NAMESPACE)


def import_cost(base: str | None, runs: int = 5) -> dict[str, Any]:
    """The import of a kubeop operator process (widget_operator.py's imports): ``python -X
    importtime`` (sum of the self times, and the heaviest top-level imports by cumulative time),
    and the wall time of a process that imports it against ``python -c pass`` (median of ``runs``)."""
    code = f"import sys; sys.path.insert(0, {str(HERE)!r}); import widget_operator"
    env = python_env(base)
    warm_bytecode(base)
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], env=env, capture_output=True, text=True, check=True
    )
    rows: list[tuple[int, int, int, str]] = []  # (indent, self us, cumulative us, name)
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative, raw = line.removeprefix("import time:").split("|")
        rows.append((len(raw) - len(raw.lstrip()), int(self_us), int(cumulative), raw.strip()))
    total_us = sum(r[1] for r in rows)
    outer = min(r[0] for r in rows)
    top = [(cumulative, name) for indent, _, cumulative, name in rows if indent == outer]
    top.sort(reverse=True)

    def wall(argv: list[str]) -> float:
        samples = []
        for _ in range(runs):
            t0 = time.perf_counter()
            subprocess.run(argv, env=env, check=True)
            samples.append(time.perf_counter() - t0)
        return statistics.median(samples)

    return {
        "importtime_total_ms": total_us / 1000,
        "importtime_top_ms": {name: us / 1000 for us, name in top[:10]},
        "python_pass_s": wall([sys.executable, "-c", "pass"]),
        "python_import_s": wall([sys.executable, "-c", code]),
    }


def summarize_latency(impl: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"impl": impl, "runs": len(runs)}
    for key in (
        "synced_s",
        "first_s",
        "p50_ms",
        "p99_ms",
        "max_ms",
        "cpu_ms_per_create",
        "writes_per_create",
    ):
        values = [r[key] for r in runs if r.get(key) is not None]
        if values:
            out[key] = statistics.median(values)
            out[key + "_all"] = values
    return out


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
    parser.add_argument("--startup-runs", type=int, default=3, help="startup: starts per implementation")
    parser.add_argument("--latency-runs", type=int, default=1, help="latency: runs per implementation")
    parser.add_argument("--latency-creates", type=int, default=50, help="latency: creates per run")
    parser.add_argument("--latency-gap", type=float, default=0.2, help="latency: seconds between creates")
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
        if "startup" in phases or "latency" in phases:
            go = None if args.no_go else build_go(HERE / "crwidget", "kubeop-bench-crwidget")
            impls = impls_py + ([] if go is None else ["controller-runtime"])
            round_ = int(time.time())
            for impl in impls_py:
                warm_bytecode(args.baseline_src if impl == "kubeop-base" else None)
            if "startup" in phases:
                for impl in impls_py:
                    cost = import_cost(args.baseline_src if impl == "kubeop-base" else None)
                    results.append({"phase": "imports", "impl": impl, **cost})
                    print(f"  imports {impl}: {json.dumps(cost)}", file=sys.stderr)
            todo = [("startup", args.startup_runs, 0)] if "startup" in phases else []
            todo += [("latency", args.latency_runs, args.latency_creates)] if "latency" in phases else []
            for phase, runs, creates in todo:
                samples_l: dict[str, list[dict[str, Any]]] = {i: [] for i in impls}
                for run in range(runs):
                    for impl in impls:  # interleaved: the machine is shared
                        round_ += 1
                        r = asyncio.run(
                            run_latency(
                                cp,
                                impl,
                                kubeconfig,
                                args.objects,
                                creates,
                                args.latency_gap,
                                round_,
                                args.workers,
                                go,
                                args.baseline_src,
                            )
                        )
                        r["run"] = run
                        samples_l[impl].append(r)
                        results.append(r)
                        brief = {k: v for k, v in r.items() if k not in ("latencies_ms", "starts", "acks")}
                        print(f"  {phase} {impl}: {json.dumps(brief)}", file=sys.stderr)
                for impl, runs_ in samples_l.items():
                    results.append({"phase": f"{phase}-summary", **summarize_latency(impl, runs_)})
        if "operator" in phases:
            go = None if args.no_go else build_go(HERE / "crwidget", "kubeop-bench-crwidget")
            impls = impls_py + ([] if go is None else ["controller-runtime"])
            for impl in impls_py:
                warm_bytecode(args.baseline_src if impl == "kubeop-base" else None)
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
    for phase in ("startup", "latency"):
        rows = [r for r in results if r["phase"] == f"{phase}-summary"]
        if rows:
            print()
            print(
                f"| {phase} | runs | synced s | first reconcile s | p50 ms | p99 ms | max ms "
                "| CPU ms/create | writes/create |"
            )
            print("|---|---|---|---|---|---|---|---|---|")
            for r in rows:

                def cell(key: str, fmt: str = ".2f", r: dict[str, Any] = r) -> str:
                    return "" if key not in r else format(r[key], fmt)

                print(
                    f"| {r['impl']} | {r['runs']} | {cell('synced_s')} | {cell('first_s')} | "
                    f"{cell('p50_ms', '.1f')} | {cell('p99_ms', '.1f')} | {cell('max_ms', '.1f')} | "
                    f"{cell('cpu_ms_per_create', '.2f')} | {cell('writes_per_create', '.2f')} |"
                )
    for r in results:
        if r["phase"] == "imports":
            print(
                f"imports {r['impl']}: importtime {r['importtime_total_ms']:.0f} ms; wall "
                f"{r['python_import_s']:.3f} s vs python -c pass {r['python_pass_s']:.3f} s"
            )
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
