"""Benchmark: the Helm operator (examples/php_deployment) with 100 releases on a local control plane.

The operator runs as its own process (``python -m kubeop.helm``), namespace-scoped, with the
pinned helm binary behind a tiny counting wrapper (one ``sh`` exec per helm call, which logs the
operation: install, upgrade, dry-run, rollback, uninstall). Measured:

1. latency: one PhpDeployment at a time, time from the create request to its Deployment,
   Service and Ingress all existing (the driver polls the three every 20 ms) and to its
   Deployed=True condition;
2. burst: the rest of the N resources created at once, time until every release has its three
   objects and is Deployed, and the operator's CPU for it;
3. steady state with the default reconcile period (1m): for a window longer than the period,
   the operator's CPU (its own and its helm children's, from /proc), helm calls by operation,
   and API writes counted by the API server (apiserver_request_total, write verbs on the
   resources the operator and Helm write: phpdeployments(+status), deployments, services,
   ingresses, secrets, events), minus nothing: the driver does not write during the window;
4. restart with a 10 min reconcile period: the new process renders each release once (its
   inputs are unknown to it), then a steady window in which nothing must happen at all;
5. delete everything: time until every release is uninstalled and its objects are gone.

    python bench/helm/run.py [--n 100] [--samples 10] [--window 70] [--quiet-window 60]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from examples.php_deployment.crd import CRD, sample  # noqa: E402
from examples.php_deployment.operator import CHART, DEPLOYMENTS, INGRESSES, PHP_DEPLOYMENTS, SERVICES  # noqa: E402

from kubeop.client import Client  # noqa: E402
from kubeop.core.resource import ApiResource  # noqa: E402
from kubeop.helm import find_helm  # noqa: E402
from kubeop.testing import ControlPlane  # noqa: E402
from kubeop.testing.binaries import ensure_binaries  # noqa: E402

HERE = Path(__file__).parent
NS = "bench-helm"
SECRETS = ApiResource("", "v1", "secrets", kind="Secret")
WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION"}
OPERATOR_RESOURCES = {"phpdeployments", "deployments", "services", "ingresses", "secrets", "events"}

COUNTER = """#!/bin/sh
# Log one line per helm call (the operation), then become the real helm.
case " $* " in
  *" --dry-run=server "*) echo dry-run >> "$KUBEOP_BENCH_HELM_LOG" ;;
  *) echo "$1" >> "$KUBEOP_BENCH_HELM_LOG" ;;
esac
exec "$KUBEOP_BENCH_REAL_HELM" "$@"
"""


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def write_counts(cp: ControlPlane) -> Counter[str]:
    """The API server's count of writes on the resources the operator and Helm write."""
    status, body = cp.api.raw("GET", "/metrics")
    assert status == 200
    counts: Counter[str] = Counter()
    for line in body.decode().splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
        if labels.get("verb") not in WRITE_VERBS or labels.get("resource") not in OPERATOR_RESOURCES:
            continue
        if labels.get("resource") == "deployments" and labels.get("subresource"):
            continue  # deployments/status: the controller-manager's
        sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
        counts[f"{labels['verb']} {labels['resource']}{sub}"] += int(float(line.rsplit(" ", 1)[1]))
    return counts


def diff(after: Counter[str], before: Counter[str]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in sorted(after) if after[k] - before[k]}


def cpu_seconds(pid: int) -> tuple[float, float]:
    """CPU of a process itself, and of the children it has waited for (its helm processes, and
    the post-renderers those ran)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks, (int(fields[13]) + int(fields[14])) / ticks


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+)", status)[1]) / 1024  # type: ignore[index]


class Operator:
    """``python -m kubeop.helm`` in its own process, helm calls counted."""

    def __init__(self, cp: ControlPlane, workdir: Path, period: str, real_helm: Path, *extra: str) -> None:
        self.log = workdir / f"helm-calls-{period}.log"
        self.log.write_text("")
        wrapper = workdir / "helm"
        wrapper.write_text(COUNTER)
        wrapper.chmod(0o755)
        watches = workdir / "watches.yaml"
        watches.write_text(
            f"- group: web.example.com\n  version: v1\n  kind: PhpDeployment\n  chart: {CHART}\n"
        )
        env = dict(
            cp.env(),
            KUBEOP_HELM=str(wrapper),
            KUBEOP_BENCH_REAL_HELM=str(real_helm),
            KUBEOP_BENCH_HELM_LOG=str(self.log),
            PYTHONUNBUFFERED="1",
        )
        self.stderr = (workdir / f"operator-{period}.log").open("w")
        self.proc = subprocess.Popen(
            [
                sys.executable, "-m", "kubeop.helm", "--watches-file", str(watches), "--watch-namespace", NS,
                "--reconcile-period", period, "--metrics-bind-address", "", "--health-probe-bind-address", "",
                "--log-level", "WARNING", *extra,
            ],
            env=env, stdout=subprocess.DEVNULL, stderr=self.stderr, cwd=ROOT,
        )  # fmt: skip

    def calls(self) -> Counter[str]:
        return Counter(line.strip() for line in self.log.read_text().splitlines() if line.strip())

    def cpu(self) -> float:
        own, children = cpu_seconds(self.proc.pid)
        return own + children

    def cpu_split(self) -> tuple[float, float]:
        return cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)
        self.stderr.close()


async def children_present(client: Client, name: str) -> bool:
    for res in (DEPLOYMENTS, SERVICES, INGRESSES):
        if await client.get_or_none(res, name, namespace=NS) is None:
            return False
    return True


def is_deployed(obj: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Deployed" and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


async def wait_until(check: Any, timeout: float, what: str, interval: float = 0.02) -> float:
    t0 = time.monotonic()
    while not await check():
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(interval)
    return time.monotonic()


async def all_deployed(client: Client, n: int) -> bool:
    items = (await client.list(PHP_DEPLOYMENTS, namespace=NS)).items
    if len(items) < n or not all(is_deployed(o) for o in items):
        return False
    for res in (DEPLOYMENTS, SERVICES, INGRESSES):
        if len((await client.list(res, namespace=NS)).items) < n:
            return False
    return True


CHANGES = ("install", "upgrade", "rollback", "uninstall")


async def quiet(
    op: Operator, settle: float = 3.0, timeout: float = 300.0, ops: tuple[str, ...] = CHANGES
) -> None:
    """Wait until no helm call of ``ops`` (by default: those that change a release) has
    started for ``settle`` seconds."""
    t0 = time.monotonic()

    def changes() -> list[int]:
        calls = op.calls()
        return [calls[c] for c in ops]

    last, since = changes(), time.monotonic()
    while time.monotonic() - since < settle:
        await asyncio.sleep(0.5)
        now = changes()
        if now != last:
            last, since = now, time.monotonic()
        if time.monotonic() - t0 > timeout:
            raise TimeoutError("the operator never went quiet")


EVENTS = ApiResource("events.k8s.io", "v1", "events", kind="Event")


async def operator_events(client: Client) -> dict[str, str]:
    """The operator's own Events in the namespace (name -> resourceVersion): the API server's
    write counter cannot tell them from the controller-manager's and the scheduler's."""
    items = (await client.list(EVENTS, namespace=NS)).items
    return {
        e["metadata"]["name"]: e["metadata"]["resourceVersion"]
        for e in items
        if e.get("reportingController") == "helm-operator"
    }


async def steady(cp: ControlPlane, client: Client, op: Operator, window: float) -> dict[str, Any]:
    events0 = await operator_events(client)
    calls0, writes0, (own0, kids0), t0 = op.calls(), write_counts(cp), op.cpu_split(), time.monotonic()
    await asyncio.sleep(window)
    calls1, writes1, (own1, kids1), t1 = op.calls(), write_counts(cp), op.cpu_split(), time.monotonic()
    events1 = await operator_events(client)
    seconds = t1 - t0
    cpu = own1 + kids1 - own0 - kids0
    return {
        "window_s": round(seconds, 1),
        "cpu_s": round(cpu, 2),
        "cpu_s_operator_process": round(own1 - own0, 2),
        "cpu_s_helm_processes": round(kids1 - kids0, 2),
        "cpu_percent_of_one_core": round(100 * cpu / seconds, 1),
        "helm_calls": dict(calls1 - calls0),
        "api_writes": diff(writes1, writes0),
        "api_writes_note": "all clients: events include the controller-manager's and the scheduler's",
        "operator_events_written": sum(1 for k, v in events1.items() if events0.get(k) != v),
        "rss_mb": round(rss_mb(op.proc.pid), 1),
    }


async def run(cp: ControlPlane, args: argparse.Namespace, workdir: Path, real_helm: Path) -> dict[str, Any]:
    cp.install_crds([CRD])
    cp.create_namespace(NS)
    out: dict[str, Any] = {}
    async with Client.from_kubeconfig(cp.kubeconfig_path, qps=None) as client:
        op = Operator(cp, workdir, args.period, real_helm, *args.operator_args)
        try:
            await asyncio.sleep(3)  # start-up and cache sync
            # 1. latency, one at a time
            to_children, to_deployed = [], []
            cpu0 = op.cpu()
            for i in range(args.samples):
                name = f"lat-{i}"
                t0 = time.monotonic()
                await client.create(sample(name, NS))
                t1 = await wait_until(lambda name=name: children_present(client, name), 60, name)  # type: ignore[misc]

                async def deployed(name: str = name) -> bool:
                    obj = await client.get_or_none(PHP_DEPLOYMENTS, name, namespace=NS)
                    return obj is not None and is_deployed(obj)

                t2 = await wait_until(deployed, 60, f"{name} Deployed")
                to_children.append(t1 - t0)
                to_deployed.append(t2 - t0)
            out["latency"] = {
                "samples": args.samples,
                "create_to_children_s": _summary(to_children),
                "create_to_deployed_s": _summary(to_deployed),
                "operator_cpu_per_install_s": round((op.cpu() - cpu0) / args.samples, 3),
            }
            say(f"==> latency {out['latency']}")

            # 2. burst
            await quiet(op)
            rest = args.n - args.samples
            calls0, (own0, kids0), t0 = op.calls(), op.cpu_split(), time.monotonic()
            cpu0 = own0 + kids0
            await asyncio.gather(*(client.create(sample(f"php-{i}", NS)) for i in range(rest)))
            created = time.monotonic()
            t1 = await wait_until(lambda: all_deployed(client, args.n), 600, "all releases", interval=0.25)
            await quiet(op)
            out["burst"] = {
                "created": rest,
                "create_requests_s": round(created - t0, 2),
                "all_children_and_deployed_s": round(t1 - t0, 2),
                "releases_per_s": round(rest / (t1 - t0), 1),
                "operator_cpu_s": round(op.cpu() - cpu0, 2),
                "operator_cpu_per_release_s": round((op.cpu() - cpu0) / rest, 3),
                "of_which_helm_processes_s": round(op.cpu_split()[1] - kids0, 2),
                "helm_calls": dict(op.calls() - calls0),
            }
            say(f"==> burst {out['burst']}")

            # 3. steady state, default reconcile period
            out["steady_default_period"] = {
                "reconcile_period": args.period,
                **await steady(cp, client, op, args.window),
            }
            say(f"==> steady ({args.period}) {out['steady_default_period']}")
        finally:
            op.stop()

        # 4. restart with a long period: one render per release, then nothing
        op = Operator(cp, workdir, args.quiet_period, real_helm, *args.operator_args)
        try:
            t0 = time.monotonic()

            async def rendered_all() -> bool:
                return op.calls()["dry-run"] >= args.n

            t1 = await wait_until(rendered_all, 600, "a render of every release", interval=0.1)
            await quiet(op, ops=(*CHANGES, "dry-run"))  # ... and the last ones have finished
            out["restart"] = {
                "releases": args.n,
                "all_rendered_s": round(t1 - t0, 1),
                "operator_cpu_s_including_start": round(op.cpu(), 2),
                "helm_calls": dict(op.calls()),
            }
            say(f"==> restart {out['restart']}")
            out["steady_long_period"] = {
                "reconcile_period": args.quiet_period,
                **await steady(cp, client, op, args.quiet_window),
            }
            say(f"==> steady ({args.quiet_period}) {out['steady_long_period']}")

            # 5. delete everything
            calls0, t0 = op.calls(), time.monotonic()
            names = [o["metadata"]["name"] for o in (await client.list(PHP_DEPLOYMENTS, namespace=NS)).items]
            await asyncio.gather(*(client.delete(PHP_DEPLOYMENTS, n, namespace=NS) for n in names))

            async def all_gone() -> bool:
                if (await client.list(PHP_DEPLOYMENTS, namespace=NS)).items:
                    return False
                for res in (DEPLOYMENTS, SERVICES, INGRESSES):
                    if (await client.list(res, namespace=NS)).items:
                        return False
                return not (await client.list(SECRETS, namespace=NS, label_selector="owner=helm")).items

            t1 = await wait_until(all_gone, 600, "every release uninstalled", interval=0.25)
            out["delete_all"] = {
                "releases": len(names),
                "all_uninstalled_s": round(t1 - t0, 2),
                "helm_calls": dict(op.calls() - calls0),
            }
            say(f"==> delete {out['delete_all']}")
        finally:
            op.stop()
    return out


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 3),
        "min": round(ordered[0], 3),
        "p90": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 3),
        "max": round(ordered[-1], 3),
    }


def machine() -> dict[str, Any]:
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "load_average_at_start": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100, help="releases (default 100)")
    parser.add_argument("--samples", type=int, default=10, help="one-at-a-time latency samples (default 10)")
    parser.add_argument("--period", default="1m", help="reconcile period of the first run (default 1m)")
    parser.add_argument("--window", type=float, default=70.0, help="steady window of the first run, seconds")
    parser.add_argument("--quiet-period", default="10m", help="reconcile period after the restart")
    parser.add_argument("--quiet-window", type=float, default=60.0, help="steady window after the restart")
    parser.add_argument("--output", default=str(HERE / "results.json"))
    parser.add_argument("--workdir", help="keep the operator logs and helm call logs here")
    parser.add_argument(
        "--operator-arg", dest="operator_args", action="append", default=[],
        help="extra argument for python -m kubeop.helm (repeat), "
        "e.g. --operator-arg=--disable-openapi-validation",
    )  # fmt: skip
    args = parser.parse_args()
    ensure_binaries(with_helm=True)
    real_helm = find_helm()
    version = subprocess.run(
        [str(real_helm), "version", "--short"], capture_output=True, text=True
    ).stdout.strip()
    result: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": machine(),
        "helm": version,
        "n": args.n,
        "operator_args": args.operator_args,
    }
    with tempfile.TemporaryDirectory(prefix="bench-helm-") as tmp, ControlPlane(full=True, nodes=2) as cp:
        workdir = Path(args.workdir or tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        say(f"==> control plane up; {args.n} releases of {CHART.name}; operator logs in {workdir}")
        result.update(asyncio.run(run(cp, args, workdir, real_helm)))
    Path(args.output).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
