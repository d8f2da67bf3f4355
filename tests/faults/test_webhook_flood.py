"""The webhook server under a flood of slow and idle connections, on the real control plane.

The Widget operator runs with leader election and an admission webhook (``guard``: ConfigMaps
labelled ``faults.kubeop.dev/guarded=yes`` are denied when their data has a key ``deny``) that
kube-apiserver calls with ``failurePolicy: Fail``. The test times guarded ConfigMap creates
through kube-apiserver, first quietly, then while ``webhook_flood.py`` holds thousands of idle
TCP and TLS connections, slow heads and 5 MiB partial bodies against the same server (reconnecting
whenever the server closes one). Asserted:

- every create is answered, and the guard is still consulted (a ``deny`` ConfigMap is refused);
- the admission p99 under the flood stays within a bound of the quiet p99 (``P99_FACTOR`` times
  it plus ``P99_SLACK`` seconds);
- the operator keeps its Lease: the same holder throughout, renewed at least every renew
  deadline, and it never logs that it lost leadership;
- the server's memory stays bounded (the operator's RSS grows by less than ``RSS_GROWTH_MB``),
  which holds only if the server caps connections and body bytes in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubeop.core.errors import ApiError
from kubeop.testing import ControlPlane
from kubeop.webhook import Endpoint, local_certificates, webhook_configurations

from .support import CONFIGMAPS, FULL, HERE, OperatorProcess, client_for, report, scale
from .widget_operator import GUARDED_LABEL, guard

pytestmark = pytest.mark.controlplane

FLOOD_SCRIPT = HERE / "webhook_flood.py"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 6.0, 4.0, 1.0
P99_FACTOR, P99_SLACK = 3.0, 0.25
RSS_GROWTH_MB = 100
CREATES = scale(60, 300)
FLOOD = scale(
    {"idle": 400, "tls-idle": 100, "slow-headers": 20, "slow-bodies": 8},
    {"idle": 2500, "tls-idle": 500, "slow-headers": 50, "slow-bodies": 30},
)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


class Watch:
    """Samples the Lease and the operator's RSS every 0.25 s in a thread."""

    def __init__(self, plane: ControlPlane, namespace: str, pid: int) -> None:
        self.plane, self.namespace, self.pid = plane, namespace, pid
        self.holders: set[str] = set()
        self.renewals: list[tuple[float, str]] = []  # (monotonic time seen, renewTime)
        self.rss_peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/widget-operator"
        while not self._stop.wait(0.25):
            with contextlib.suppress(OSError):
                self.rss_peak = max(self.rss_peak, rss_mb(self.pid))
            try:
                spec = self.plane.api.call("GET", path)["spec"]
            except Exception:  # a slow answer is not the point here; the renew gaps are
                continue
            self.holders.add(spec.get("holderIdentity", ""))
            if not self.renewals or self.renewals[-1][1] != spec.get("renewTime"):
                self.renewals.append((time.monotonic(), spec.get("renewTime", "")))

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def longest_gap(self) -> float:
        times = [t for t, _ in self.renewals]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


class FloodProcess:
    def __init__(self, port: int, log_dir: Path) -> None:
        args = [sys.executable, str(FLOOD_SCRIPT), f"--port={port}"]
        args += [f"--{kind}={n}" for kind, n in FLOOD.items()]
        self.log = (log_dir / "flood.log").open("w")
        self.proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True
        )
        self.stats: dict[str, Any] = {}
        self.opened = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("open "):
                self.opened.set()
            elif line.startswith("stats "):
                self.stats = json.loads(line[6:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._reader.join(5)
        self.log.close()


@pytest.fixture
def operator(fault_plane: ControlPlane, fault_namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    cert_dir = tmp_path / "certs"
    certs = local_certificates(cert_dir)
    op = OperatorProcess(
        fault_plane,
        fault_namespace,
        tmp_path,
        leader_election=True,
        lease_duration=LEASE_DURATION,
        renew_deadline=RENEW_DEADLINE,
        retry_period=RETRY_PERIOD,
        extra_args=[f"--webhook-cert-dir={cert_dir}"],
    )
    with op:
        op.start(wait="synced")
        op.wait_for("webhook ")
        assert op.webhook_port is not None
        endpoint = Endpoint.url(f"https://127.0.0.1:{op.webhook_port}", ca_bundle=certs.ca_pem)
        name = f"flood-{fault_namespace}"
        (config,) = webhook_configurations([guard], name, endpoint)
        config["webhooks"][0]["namespaceSelector"] = {
            "matchLabels": {"kubernetes.io/metadata.name": fault_namespace}
        }
        fault_plane.api.call("POST", f"{ADMISSION}/validatingwebhookconfigurations", config)
        try:
            yield op
        finally:
            with contextlib.suppress(Exception):
                fault_plane.api.call(
                    "DELETE", f"{ADMISSION}/validatingwebhookconfigurations/{config['metadata']['name']}"
                )


async def timed_creates(plane: ControlPlane, namespace: str, prefix: str, n: int) -> list[float]:
    """Guarded ConfigMap creates one after another; the seconds each took."""
    out = []
    async with client_for(plane) as client:
        for i in range(n):
            cm = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"{prefix}-{i}",
                    "namespace": namespace,
                    "labels": {GUARDED_LABEL: "yes"},
                },
                "data": {"i": str(i)},
            }
            t0 = time.perf_counter()
            await client.create(cm, resource=CONFIGMAPS)
            out.append(time.perf_counter() - t0)
    return out


async def denied(plane: ControlPlane, namespace: str, name: str) -> str:
    """The message of the guard's denial of a ``deny`` ConfigMap ("" if it was created)."""
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {GUARDED_LABEL: "yes"}},
        "data": {"deny": "1"},
    }
    async with client_for(plane) as client:
        try:
            await client.create(cm, resource=CONFIGMAPS)
        except ApiError as exc:
            return str(exc)
    return ""


def wait_until_guarded(plane: ControlPlane, namespace: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    for i in range(10_000):
        if "data.deny is set" in asyncio.run(denied(plane, namespace, f"probe-{i}")):
            return
        if time.monotonic() > deadline:
            raise AssertionError("kube-apiserver did not start calling the guard webhook")
        time.sleep(0.2)


def test_admission_and_the_lease_survive_a_flood_of_slow_and_idle_connections(
    fault_plane: ControlPlane, fault_namespace: str, operator: OperatorProcess, tmp_path: Path
) -> None:
    assert operator.pid is not None
    wait_until_guarded(fault_plane, fault_namespace)
    asyncio.run(timed_creates(fault_plane, fault_namespace, "warm", 10))
    quiet = asyncio.run(timed_creates(fault_plane, fault_namespace, "quiet", CREATES))
    rss_before = rss_mb(operator.pid)
    operator.wait_for("leading ")
    holder = next(line.split()[1] for _, line in operator.lines if line.startswith("leading "))

    flood = FloodProcess(operator.webhook_port or 0, tmp_path)
    try:
        assert flood.opened.wait(60), "the flood did not open its connections within 60 s"
        time.sleep(2)  # let the slow heads and bodies reach the server
        with Watch(fault_plane, fault_namespace, operator.pid) as watch:
            flooded = asyncio.run(timed_creates(fault_plane, fault_namespace, "flooded", CREATES))
            refused = asyncio.run(denied(fault_plane, fault_namespace, "deny-during-flood"))
            time.sleep(RENEW_DEADLINE + 1)  # a few renewals under the flood, however fast the creates were
        stats = flood.stats
    finally:
        flood.stop()
    after = asyncio.run(timed_creates(fault_plane, fault_namespace, "after", 10))

    quiet_p99, flooded_p99 = p99(quiet), p99(flooded)
    bound = P99_FACTOR * quiet_p99 + P99_SLACK
    report(
        "webhook_flood",
        full=FULL,
        flood=FLOOD,
        flood_stats=stats,
        creates=CREATES,
        quiet_p50_ms=round(sorted(quiet)[len(quiet) // 2] * 1000, 1),
        quiet_p99_ms=round(quiet_p99 * 1000, 1),
        flooded_p50_ms=round(sorted(flooded)[len(flooded) // 2] * 1000, 1),
        flooded_p99_ms=round(flooded_p99 * 1000, 1),
        bound_ms=round(bound * 1000, 1),
        lease_longest_gap_s=round(watch.longest_gap(), 2),
        rss_before_mb=round(rss_before, 1),
        rss_peak_mb=round(watch.rss_peak, 1),
    )
    assert "data.deny is set" in refused, f"the guard was not consulted during the flood: {refused!r}"
    assert len(flooded) == CREATES and len(after) == 10
    assert flooded_p99 <= bound, (
        f"admission p99 under the flood {flooded_p99 * 1000:.0f} ms > bound {bound * 1000:.0f} ms "
        f"(quiet p99 {quiet_p99 * 1000:.0f} ms); flood: {stats}"
    )
    assert watch.holders == {holder}, f"the Lease changed hands during the flood: {watch.holders}"
    assert watch.longest_gap() <= RENEW_DEADLINE + RETRY_PERIOD, (
        f"the Lease went {watch.longest_gap():.1f} s without a renewal (renew deadline {RENEW_DEADLINE} s)"
    )
    assert not [line for _, line in operator.lines if "lost" in line], operator.log_tail()
    assert "lost leadership" not in operator.log_tail(400)
    assert watch.rss_peak - rss_before <= RSS_GROWTH_MB, (
        f"the operator grew from {rss_before:.0f} to {watch.rss_peak:.0f} MB under the flood"
    )
    assert operator.alive
