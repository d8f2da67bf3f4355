"""Benchmark: the same small operator (each Widget owns a ConfigMap and gets a status) written with
kubeop, without a framework (lean), and with kopf, against one real local control plane.

For each operator, in its own namespace and process: create N Widgets and time until every one
has its ConfigMap and status.observedGeneration; then change every Widget's spec and time again;
then restart the operator with a resync period (so every object is reconciled again by the initial
list and by each resync) and count writes while it stays idle. Create and update run without a
resync (controller-runtime's default period is 10 hours; lean and kopf have none), so their CPU
is the work the changes cause.
API writes are counted by the API server itself (apiserver_request_total, write verbs on
configmaps and widgets), minus the driver's own writes. CPU and RSS come from /proc of the
operator process.

    python bench/operator/run.py [--n 1000] [--operators kubeop,lean,kopf] [--workers 16]

With --backlog the driver's writes are taken out of the measurement (on 2 shared cores they bound
convergence from below): it makes the N creates with no operator running, then the operator is
started and timed from its start (and from its "ready" line) to every Widget converged; then it
is stopped, the driver changes every Widget, and it is started and timed again. This is also
the downtime case: changes made while the operator was stopped. CPU per object is the
process's whole CPU from its start (imports and initial list included).

An operator named ``name@N`` runs with N workers instead of --workers (real kopf has no such
limit: it runs every object's handlers concurrently).

Operators: kubeop, kubeop-typed (the same reconcile on typed models), kubeop-dependents (the
ConfigMap as a one-dependent workflow: kubeop_dependents_operator.py; kubeop-dependents-bare:
without the workflow's conditions), kubeop-base and
kubeop-typed-base (the same two scripts on --baseline-src), lean, kopf, kopf-on-kubeop
(kopf_operator.py unchanged, on kubeop.kopf: see kopf_on_kubeop.py), kopf-async and
kopf-async-on-kubeop (kopf_operator_async.py, async handlers writing through one kept-alive
client, under real kopf and on kubeop.kopf; kopf-async-on-kubeop-base: the same on
--baseline-src), kubeop-dashboard (kubeop with its dashboard on and one client reading the
overview's event stream all along: the dashboard's cost beside kubeop in one run; the driver is
the client, so only the server's side is in the operator's CPU).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import socket
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

from kubeop.client import Client
from kubeop.core.resource import ApiResource
from kubeop.testing import ControlPlane

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.resolve().parent.parent))
from tests.support.crds import widget_crd  # noqa: E402

WIDGETS = ApiResource("bench.kubeop.dev", "v1", "widgets", kind="Widget")
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
CRD = widget_crd("bench.kubeop.dev")
WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION"}
KOPF_VENV = HERE / ".venv-kopf"


def write_counts(cp: ControlPlane) -> Counter[str]:
    """API server's own count of write requests on configmaps and widgets, by verb/resource/code."""
    status, body = cp.api.raw("GET", "/metrics")
    assert status == 200
    counts: Counter[str] = Counter()
    for line in body.decode().splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
        if labels.get("verb") in WRITE_VERBS and labels.get("resource") in ("configmaps", "widgets"):
            sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
            key = f"{labels['verb']} {labels['resource']}{sub} {labels.get('code')}"
            counts[key] += int(float(line.rsplit(" ", 1)[1]))
    return counts


def api_writes(cp: ControlPlane) -> int:
    return sum(write_counts(cp).values())


def proc_stats(pid: int) -> tuple[float, float, float]:
    """(cpu seconds, rss MB, peak rss MB) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / ticks
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status)[1]) / 1024  # type: ignore[index]
    hwm = int(re.search(r"VmHWM:\s+(\d+)", status)[1]) / 1024  # type: ignore[index]
    return cpu, rss, hwm


def ensure_kopf() -> Path:
    py = KOPF_VENV / "bin" / "python"
    if not py.exists():
        print("==> installing kopf into bench/operator/.venv-kopf", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(KOPF_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "kopf", "kubernetes"], check=True)
    return py


def ensure_kopf_on_kubeop() -> Path:
    """The kopf venv (the operator's ``kubernetes`` client) with kubeop's own dependencies added."""
    py = ensure_kopf()
    if subprocess.run([str(py), "-c", "import orjson, httptools, pydantic"], capture_output=True).returncode:
        deps = tomllib.loads((HERE.parent.parent / "pyproject.toml").read_text())["project"]["dependencies"]
        print("==> installing kubeop's dependencies into bench/operator/.venv-kopf", file=sys.stderr)
        subprocess.run([str(py), "-m", "pip", "install", "-q", *deps], check=True)
    return py


# --baseline-src: the src/ of another kubeop checkout, run as operator "kubeop-base" (the same
# operator script) so a change is measured beside what it changes, in one run.
BASELINE_SRC: str | None = None


def command(name: str, workers: int) -> list[str]:
    if name.endswith("-base") and BASELINE_SRC is None:
        raise SystemExit(f"operator {name} needs --baseline-src")
    if name in ("kubeop-base", "kubeop-typed-base"):
        script = "kubeop_typed_operator.py" if name == "kubeop-typed-base" else "kubeop_operator.py"
        return [sys.executable, str(HERE / script), str(workers)]
    if name in ("kubeop", "kubeop-dashboard"):  # -dashboard: KUBEOP_DASHBOARD (start_operator)
        return [sys.executable, str(HERE / "kubeop_operator.py"), str(workers)]
    if name in ("kubeop-dependents", "kubeop-dependents-bare"):  # the same as a one-dependent workflow
        bare = ["bare"] if name.endswith("-bare") else []  # without the workflow's conditions
        return [sys.executable, str(HERE / "kubeop_dependents_operator.py"), str(workers), *bare]
    if name == "kubeop-typed":  # the same operator on models (a Widget CustomResource, kinds.ConfigMap)
        return [sys.executable, str(HERE / "kubeop_typed_operator.py"), str(workers)]
    if name == "lean":
        return [sys.executable, str(HERE / "lean_operator.py"), str(workers)]
    if name == "kopf-on-kubeop":
        return [str(ensure_kopf_on_kubeop()), str(HERE / "kopf_on_kubeop.py"), str(workers)]
    if name in ("kopf-async-on-kubeop", "kopf-async-on-kubeop-base"):
        script = "kopf_operator_async.py"
        return [str(ensure_kopf_on_kubeop()), str(HERE / "kopf_on_kubeop.py"), str(workers), script]
    if name in ("kopf", "kopf-async"):
        # kopf-async's handlers use kubeop's Client as a library: the venv needs kubeop's deps
        py = ensure_kopf() if name == "kopf" else ensure_kopf_on_kubeop()
        script = "kopf_operator.py" if name == "kopf" else "kopf_operator_async.py"
        return [
            str(py),
            "-m",
            "kopf",
            "run",
            "--standalone",
            "--all-namespaces",
            "--quiet",
            str(HERE / script),
        ]
    raise ValueError(name)


async def converged(client: Client, ns: str, n: int, value: str) -> bool:
    # resource_version="0": answered from the API server's watch cache, not a quorum read from
    # etcd; polling 1,000 objects several times a second the expensive way took a large share of
    # the 2 cores from the API server and slowed every operator measured.
    widgets = await client.list(WIDGETS, namespace=ns, resource_version="0")
    if len(widgets.items) < n:
        return False
    for w in widgets.items:
        if (w.get("status") or {}).get("observedGeneration") != w["metadata"]["generation"]:
            return False
    cms = await client.list(CONFIGMAPS, namespace=ns, resource_version="0")
    values = {c["metadata"]["name"]: (c.get("data") or {}).get("value") for c in cms.items}
    return sum(1 for w in widgets.items if values.get(w["metadata"]["name"]) == value) == n


async def converged_count(client: Client, ns: str, value: str) -> tuple[int, int]:
    """(Widgets, Widgets converged on ``value``: status.observedGeneration current and ConfigMap set)."""
    widgets = await client.list(WIDGETS, namespace=ns, resource_version="0")
    cms = await client.list(CONFIGMAPS, namespace=ns, resource_version="0")
    values = {c["metadata"]["name"]: (c.get("data") or {}).get("value") for c in cms.items}
    done = sum(
        1
        for w in widgets.items
        if (w.get("status") or {}).get("observedGeneration") == w["metadata"]["generation"]
        and values.get(w["metadata"]["name"]) == value
    )
    return len(widgets.items), done


async def wait_converged(client: Client, ns: str, n: int, value: str, timeout: float = 600) -> float:
    t0 = time.monotonic()
    while True:
        try:
            if await converged(client, ns, n, value):
                return time.monotonic()
        except Exception:  # the API server may be down (fault phase)
            pass
        if time.monotonic() - t0 > timeout:
            raise TimeoutError("did not converge")
        await asyncio.sleep(0.1)


async def count_converged(client: Client, ns: str, value: str) -> int:
    cms = await client.list(CONFIGMAPS, namespace=ns)
    return sum(1 for c in cms.items if (c.get("data") or {}).get("value") == value)


async def outage(cp: ControlPlane, client: Client, ns: str, n: int, update: Any) -> dict[str, Any]:
    """Change every Widget, kill kube-apiserver when a quarter has converged, start it again 5 s
    later; time convergence from the server's return (first /readyz 200) and from its restart."""
    await asyncio.gather(*(update(i, "three") for i in range(n)))
    while await count_converged(client, ns, "three") < n // 4:
        await asyncio.sleep(0.02)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, cp.stop_apiserver)
    await asyncio.sleep(5.0)
    await loop.run_in_executor(None, lambda: cp.start_apiserver(wait=False))
    restarted = time.monotonic()
    while not cp.api.ok("/readyz"):
        await asyncio.sleep(0.05)
    ready = time.monotonic()
    done = await wait_converged(client, ns, n, "three")
    return {
        "outage_seconds": 5.0,
        "converged_after_ready_s": round(done - ready, 2),
        "converged_after_restart_s": round(done - restarted, 2),
        "apiserver_start_to_ready_s": round(ready - restarted, 2),
    }


async def backlog_phase(
    cp: ControlPlane, client: Client, name: str, workers: int, ns: str, n: int, value: str
) -> dict[str, Any]:
    """Start the operator on a backlog the driver has already written (every Widget changed while
    no operator ran: kopf's downtime case) and time it to convergence, from the process's start
    and from its "ready" line (kubeop and kubeop.kopf print it once started, before their
    informers have listed; real kopf has no such signal: null)."""
    before = write_counts(cp)
    t0 = time.monotonic()
    proc = start_operator(cp, name, workers, resync=0.0, wait=False)
    ready_at: list[float] = []

    def read_ready() -> None:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() == "ready":
            ready_at.append(time.monotonic())

    reader = asyncio.get_running_loop().run_in_executor(None, read_ready) if name not in KOPF else None
    first: float | None = None
    try:
        while True:
            try:
                total, done = await converged_count(client, ns, value)
            except Exception:
                total, done = 0, 0
            now = time.monotonic()
            if done and first is None:
                first = now
            if total >= n and done == n:
                break
            if now - t0 > 600:
                raise TimeoutError(f"{name} did not converge on {value}: {done}/{n}")
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}")
            await asyncio.sleep(0.05)
        t1 = time.monotonic()
        c1, rss, hwm = proc_stats(proc.pid)  # the process's whole CPU: start-up, list, every reconcile
        await asyncio.sleep(1.0)  # let trailing writes land before counting
        if reader is not None:
            await asyncio.wait_for(reader, 5)
        writes = write_counts(cp) - before
        result = {
            "seconds_from_start": round(t1 - t0, 2),
            "seconds_from_ready": round(t1 - ready_at[0], 2) if ready_at else None,
            "start_to_ready_s": round(ready_at[0] - t0, 2) if ready_at else None,
            "start_to_first_converged_s": round(first - t0, 2) if first is not None else None,
            "writes_per_object": round(sum(writes.values()) / n, 3),
            "cpu_ms_per_object": round(c1 * 1000 / n, 3),
            "rss_mb": round(rss, 1),
            "peak_rss_mb": round(hwm, 1),
            "writes_by_kind": {k: v for k, v in writes.items() if v},
        }
    finally:
        stop_operator(proc)
    return result


async def run_backlog(cp: ControlPlane, name: str, n: int, workers: int) -> dict[str, Any]:
    """--backlog: the driver writes n creates with no operator running, then the operator starts
    and converges them; it is stopped, the driver changes every Widget, and it starts again."""
    ns = f"bench-{name}-{int(time.time() * 1000) % 100000}"
    cp.create_namespace(ns)
    try:
        async with Client.from_kubeconfig(cp.kubeconfig_path, qps=None) as client:
            sem = asyncio.Semaphore(32)

            async def create(i: int) -> None:
                async with sem:
                    body = {"apiVersion": "bench.kubeop.dev/v1", "kind": "Widget", "spec": {"value": "one"}}
                    body["metadata"] = {"name": f"w{i:05d}", "namespace": ns}
                    await client.create(body, resource=WIDGETS)

            async def update(i: int) -> None:
                async with sem:
                    await client.patch(WIDGETS, f"w{i:05d}", {"spec": {"value": "two"}}, namespace=ns)

            results: dict[str, Any] = {"operator": name, "n": n, "backlog": True}
            for phase, fn, value in (("create", create, "one"), ("update", update, "two")):
                t0 = time.monotonic()
                await asyncio.gather(*(fn(i) for i in range(n)))
                driver = time.monotonic() - t0
                await asyncio.sleep(2.0)  # let the API server settle before the operator starts
                results[phase] = await backlog_phase(cp, client, name, workers, ns, n, value)
                results[phase]["driver_seconds"] = round(driver, 2)
                print(f"  {name} backlog {phase}: {results[phase]}", file=sys.stderr)
            return results
    finally:
        await clear_namespace(cp, ns)


async def run_one(
    cp: ControlPlane, name: str, n: int, workers: int, idle: float, resync: float, fault: bool
) -> dict[str, Any]:
    ns = f"bench-{name}-{int(time.time() * 1000) % 100000}"
    cp.create_namespace(ns)
    seen: Counter[str] = Counter()
    viewer: asyncio.Task[None] | None = None
    if name.endswith("-dashboard"):
        DASHBOARDS[name] = free_port()
        viewer = asyncio.create_task(dashboard_client(DASHBOARDS[name], seen))
    proc = start_operator(cp, name, workers, resync=0.0)
    try:
        if viewer is not None:  # connected before the first change is made
            deadline = time.monotonic() + 30
            while not seen["snapshots"]:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{name}: no dashboard snapshot within 30 s")
                await asyncio.sleep(0.1)
        async with Client.from_kubeconfig(cp.kubeconfig_path, qps=None) as client:
            sem = asyncio.Semaphore(32)

            async def create(i: int) -> None:
                async with sem:
                    await client.create(
                        {
                            "apiVersion": "bench.kubeop.dev/v1",
                            "kind": "Widget",
                            "metadata": {"name": f"w{i:05d}", "namespace": ns},
                            "spec": {"value": "one"},
                        },
                        resource=WIDGETS,
                    )

            async def update(i: int, value: str = "two") -> None:
                async with sem:
                    await client.patch(WIDGETS, f"w{i:05d}", {"spec": {"value": value}}, namespace=ns)

            results: dict[str, Any] = {"operator": name, "n": n}
            if viewer is not None:
                results["dashboard_client"] = seen  # the same Counter: its final counts
            for phase, fn, value in (("create", create, "one"), ("update", update, "two")):
                before = write_counts(cp)
                w0 = sum(before.values())
                c0, _, _ = proc_stats(proc.pid)
                t0 = time.monotonic()
                await asyncio.gather(*(fn(i) for i in range(n)))
                t_written = time.monotonic()  # the driver's own writes bound the wall time from below
                t1 = await wait_converged(client, ns, n, value)
                await asyncio.sleep(1.0)  # let trailing writes land before counting
                c1, rss, _ = proc_stats(proc.pid)
                writes = api_writes(cp) - w0 - n
                results[phase] = {
                    "seconds": round(t1 - t0, 2),
                    "driver_seconds": round(t_written - t0, 2),
                    "writes_per_object": round(writes / n, 3),
                    "cpu_ms_per_object": round((c1 - c0) * 1000 / n, 3),
                    "rss_mb": round(rss, 1),
                    "writes_by_kind": {k: v for k, v in (write_counts(cp) - before).items() if v},
                }
                print(f"  {name} {phase}: {results[phase]}", file=sys.stderr)
            # Idle: restart the operator with a resync period, so every object is reconciled
            # again at start (the initial list) and on every resync; none of that may write.
            w0 = api_writes(cp)
            stop_operator(proc)
            proc = start_operator(cp, name, workers, resync=resync)
            c0, _, _ = proc_stats(proc.pid)
            await asyncio.sleep(idle)
            c1, rss, hwm = proc_stats(proc.pid)
            results["idle"] = {
                "seconds": idle,
                "restarted": True,
                "resync_period": resync,
                "writes": api_writes(cp) - w0,
                "cpu_ms": round((c1 - c0) * 1000, 1),
                "rss_mb": round(rss, 1),
                "peak_rss_mb": round(hwm, 1),
            }
            print(f"  {name} idle: {results['idle']}", file=sys.stderr)
            if fault:
                try:
                    results["outage"] = await asyncio.wait_for(outage(cp, client, ns, n, update), 180)
                except Exception as exc:  # an operator that does not survive the outage
                    results["outage"] = {
                        "failed": f"{type(exc).__name__}: {exc}"[:300],
                        "operator_exit_code": proc.poll(),
                    }
                    if not cp.api.ok("/readyz"):
                        cp.start_apiserver()
                print(f"  {name} outage: {results['outage']}", file=sys.stderr)
            return results
    finally:
        if viewer is not None:
            viewer.cancel()
        stop_operator(proc)
        await clear_namespace(cp, ns)


async def warm_up(cp: ControlPlane, n: int) -> None:
    """Create, change and delete n Widgets with no operator running, so that the first operator
    measured does not pay for a cold API server (its first run was always the slowest)."""
    ns = "bench-warm-up"
    cp.create_namespace(ns)
    async with Client.from_kubeconfig(cp.kubeconfig_path, qps=None) as client:
        sem = asyncio.Semaphore(32)

        async def one(i: int) -> None:
            async with sem:
                body = {"apiVersion": "bench.kubeop.dev/v1", "kind": "Widget", "spec": {"value": "one"}}
                body["metadata"] = {"name": f"w{i:05d}", "namespace": ns}
                await client.create(body, resource=WIDGETS)
                await client.patch(WIDGETS, f"w{i:05d}", {"spec": {"value": "two"}}, namespace=ns)

        await asyncio.gather(*(one(i) for i in range(n)))
    await clear_namespace(cp, ns)


async def clear_namespace(cp: ControlPlane, ns: str) -> None:
    """Delete an operator's Widgets and ConfigMaps once its run is over.

    Every operator here watches all namespaces (as the lean one does): leftovers, such as the
    Widgets a crashed operator never converged, would otherwise be reconciled by the next
    operator and counted as its writes."""
    async with Client.from_kubeconfig(cp.kubeconfig_path, qps=None) as client:
        for res in (WIDGETS, CONFIGMAPS):
            await client.delete_collection(res, namespace=ns)
        deadline = time.monotonic() + 60
        while (await client.list(WIDGETS, namespace=ns)).items:
            if time.monotonic() > deadline:
                print(f"  warning: Widgets in {ns} still there after 60 s (finalizers?)", file=sys.stderr)
                break
            await asyncio.sleep(0.2)


KOPF = ("kopf", "kopf-async")  # real kopf: no "ready" line on stdout
DASHBOARDS: dict[str, int] = {}  # operator -> its dashboard's port (run_one picks a free one)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def dashboard_client(port: int, seen: Counter[str]) -> None:
    """One browser's worth of the dashboard: the overview's event stream, read as it comes, for
    as long as the operator runs (reconnecting across its restart). ``seen``: connections,
    snapshots and bytes received."""
    while True:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.2)
            continue
        seen["connections"] += 1
        try:
            writer.write(b"GET /events/overview HTTP/1.1\r\nHost: bench\r\n\r\n")
            await writer.drain()
            while data := await reader.read(65536):
                seen["bytes"] += len(data)
                seen["snapshots"] += data.count(b"event: snapshot")
        except OSError:
            pass
        finally:
            writer.close()
        await asyncio.sleep(0.2)


def start_operator(
    cp: ControlPlane, name: str, workers: int, *, resync: float, wait: bool = True
) -> subprocess.Popen[str]:
    """Start an operator process and return once it says it is ready (kopf: after 5 s), or at
    once with ``wait=False``."""
    env = dict(cp.env(), BENCH_RESYNC=str(resync), PYTHONUNBUFFERED="1")
    if name in DASHBOARDS:
        env["KUBEOP_DASHBOARD"] = f"127.0.0.1:{DASHBOARDS[name]}"
    if name.endswith("-base") and BASELINE_SRC is not None:
        env["PYTHONPATH"] = BASELINE_SRC
    elif name in ("kopf-on-kubeop", "kopf-async-on-kubeop", "kopf-async"):
        env["PYTHONPATH"] = str(HERE.parent.parent / "src")  # another venv: this checkout's kubeop
    proc = subprocess.Popen(
        command(name, workers),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=HERE,
    )
    if not wait:
        return proc
    if name not in KOPF:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
    else:
        time.sleep(5)
    time.sleep(1)
    return proc


def stop_operator(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--operators", default="kubeop,lean,kopf")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--idle", type=float, default=12.0)
    parser.add_argument("--resync", type=float, default=5.0)
    parser.add_argument("--out", default=str(HERE / "results.json"))
    parser.add_argument("--no-fault", action="store_true", help="skip the API server outage phase")
    parser.add_argument(
        "--backlog",
        action="store_true",
        help="instead of the usual phases: the driver writes n creates (then n updates) with no"
        " operator running, then the operator starts; times start (and ready) to convergence",
    )
    parser.add_argument(
        "--baseline-src", help="src/ of another kubeop checkout, measured as operator 'kubeop-base'"
    )
    args = parser.parse_args()
    global BASELINE_SRC
    BASELINE_SRC = os.path.abspath(args.baseline_src) if args.baseline_src else None
    with ControlPlane(full=False, progress=lambda m: print(m, file=sys.stderr)) as cp:
        cp.install_crds([CRD])
        await warm_up(cp, args.n)
        runs = []
        for label in args.operators.split(","):
            name, _, workers = label.partition("@")  # "kopf-async-on-kubeop@64": its own workers
            if args.backlog:
                result = await run_backlog(cp, name, args.n, int(workers or args.workers))
            else:
                result = await run_one(
                    cp, name, args.n, int(workers or args.workers), args.idle, args.resync, not args.no_fault
                )
            if workers:
                result["workers"] = int(workers)
            runs.append(result)
    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "args": vars(args),
        "runs": runs,
    }
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
