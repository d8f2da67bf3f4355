"""More support for the fault suite, on top of ``support.py``: operators whose writes are signed,
a ledger of who wrote what under which lease, and samplers of a process's memory and metrics.

``StampingOperator(plane, ns, log_dir, writer="alpha", ...)`` is an ``OperatorProcess`` running
``stamping_operator.py``: the Widget operator, with ``writer: alpha`` in every ConfigMap and Widget
status it writes (and, with ``events=True``, a Kubernetes Event per change). ``identity`` is its
lease identity once it led.

``Ledger(client, ns)`` (``async with``) watches Widgets, ConfigMaps and the operator's Lease from
the test process and records, in resourceVersion order, every write an operator made (a
ConfigMap written, or a Widget status changed: ``Write``) and every change of the lease's holder.
``ledger.foreign_writes(identities)`` lists the writes made by a process that did not hold the
lease at that resourceVersion: the "never two leaders writing at once" check, exact and free of
clocks (etcd orders the lease's updates and the objects' writes on one revision counter).

``Sampler(pid, metrics_port)`` samples a process's RSS (``/proc/PID/status``) and chosen /metrics
series in a thread while a scenario runs.
"""

from __future__ import annotations

import asyncio
import bisect
import re
import threading
import time
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubeop.client import Client
from kubeop.core.errors import Gone
from kubeop.core.resource import ApiResource
from kubeop.testing import ControlPlane

from .support import CONFIGMAPS, HERE, WIDGETS, OperatorProcess

STAMPING_SCRIPT = HERE / "stamping_operator.py"
LEASES = ApiResource("coordination.k8s.io", "v1", "leases", kind="Lease")
LEASE_NAME = "widget-operator"  # widget_operator.py's leader_election_id


class StampingOperator(OperatorProcess):
    """The Widget operator signing its writes with ``writer`` (see the module docstring)."""

    def __init__(
        self,
        plane: ControlPlane,
        namespace: str,
        log_dir: Path,
        *,
        writer: str,
        events: bool = False,
        **kwargs: Any,
    ) -> None:
        env = {"FAULTS_WRITER": writer, "FAULTS_EVENTS": "1" if events else "0"}
        env.update(kwargs.pop("extra_env", None) or {})
        super().__init__(plane, namespace, log_dir, name=writer, extra_env=env, **kwargs)
        self.writer = writer
        self.args[1] = str(STAMPING_SCRIPT)
        self.identities: list[str] = []  # every lease identity it led as (one per start)

    def wait_leading(self, timeout: float = 60.0) -> float:
        at = self.wait_for("leading ", timeout)
        for _, line in self.lines:
            if line.startswith("leading "):
                ident = line.split(" ", 1)[1]
                if ident not in self.identities:
                    self.identities.append(ident)
        return at

    @property
    def leading(self) -> bool:
        return any(line.startswith("leading ") for _, line in self.lines)

    def metrics_text(self) -> str:
        if self.metrics_port is None:
            raise AssertionError(f"{self.name} has not reported its metrics port")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as resp:
            return str(resp.read().decode())


def metric_values(text: str, names: Iterable[str]) -> dict[str, float]:
    """Sum of the samples of each named series in a Prometheus text page (all label sets)."""
    wanted = set(names)
    out = dict.fromkeys(wanted, 0.0)
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        name = re.split(r"[{ ]", line, maxsplit=1)[0]
        if name in wanted:
            out[name] += float(line.rsplit(" ", 1)[1])
    return out


def labelled_values(text: str, name: str, label: str) -> dict[str, float]:
    """``{label value: sample}`` of one series (e.g. the event recorder's sizes by ``kind``)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            out[labels.get(label, "")] = float(line.rsplit(" ", 1)[1])
    return out


# -- the ledger ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    rv: int
    kind: str
    name: str
    writer: str
    seen: float  # the test's monotonic clock when the watch delivered it


@dataclass
class Ledger:
    """Every operator write and every lease holder change in a namespace (see module docstring)."""

    client: Client
    namespace: str
    writes: list[Write] = field(default_factory=list)
    holders: list[tuple[int, str, float]] = field(default_factory=list)  # (rv, holder, seen)
    errors: list[str] = field(default_factory=list)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _ready: int = 0

    async def __aenter__(self) -> Ledger:
        for res in (WIDGETS, CONFIGMAPS, LEASES):
            self._tasks.append(asyncio.create_task(self._follow(res)))
        deadline = time.monotonic() + 30
        while self._ready < 3:
            if time.monotonic() > deadline:
                raise AssertionError(f"the ledger's watches did not start: {self.errors}")
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _follow(self, res: ApiResource) -> None:
        listed = await self.client.list(res, namespace=self.namespace)
        last: dict[str, Any] = {}
        for obj in listed.items:
            self._record(res, "ADDED", obj, last)
        rv = listed.resource_version
        self._ready += 1
        while True:
            try:
                async for event in self.client.watch(
                    res, namespace=self.namespace, resource_version=rv, timeout_seconds=3600
                ):
                    rv = event.resource_version or rv
                    if event.type != "BOOKMARK":
                        self._record(res, event.type, event.object, last)
            except asyncio.CancelledError:
                raise
            except Gone:
                self.errors.append(f"{res.plural}: watch expired at {rv}: events may be missing")
                return
            except Exception as exc:  # the server went away: resume from the last version seen
                self.errors.append(f"{res.plural}: {type(exc).__name__}: {exc}")
                await asyncio.sleep(0.2)

    def _record(self, res: ApiResource, kind: str, obj: Mapping[str, Any], last: dict[str, Any]) -> None:
        md = obj.get("metadata") or {}
        name = md.get("name", "")
        rv = int(md.get("resourceVersion") or 0)
        now = time.monotonic()
        if kind == "DELETED":
            last.pop(name, None)
            return
        if res is LEASES:
            if name != LEASE_NAME:
                return
            holder = (obj.get("spec") or {}).get("holderIdentity") or ""
            if not self.holders or self.holders[-1][1] != holder:
                self.holders.append((rv, holder, now))
            return
        if res is CONFIGMAPS:
            writer = (obj.get("data") or {}).get("writer")
            if writer:
                self.writes.append(Write(rv, "ConfigMap", name, writer, now))
            return
        status = obj.get("status") or {}
        if status and status != last.get(name):
            self.writes.append(Write(rv, "Widget/status", name, str(status.get("writer", "")), now))
        last[name] = status

    # -- questions ------------------------------------------------------------------------------------
    def holder_at(self, rv: int) -> str:
        """The lease's holder identity in effect at revision ``rv`` ("" for none)."""
        revs = [h[0] for h in self.holders]
        i = bisect.bisect_left(revs, rv) - 1
        return self.holders[i][1] if i >= 0 else ""

    def foreign_writes(self, writers: Mapping[str, str], after_rv: int = 0) -> list[str]:
        """Writes made (after ``after_rv``) by a process that did not hold the lease then.

        ``writers`` maps lease identities to writer stamps (``StampingOperator.identities``)."""
        out = []
        for w in self.writes:
            if w.rv <= after_rv:
                continue
            holder = self.holder_at(w.rv)
            if writers.get(holder) != w.writer:
                out.append(
                    f"{w.kind} {w.name} written by {w.writer} at rv {w.rv} while the lease was held by "
                    f"{writers.get(holder, holder or 'nobody')}"
                )
        return out

    def first_write(self, writer: str, after_rv: int = 0) -> Write | None:
        return next((w for w in self.writes if w.writer == writer and w.rv > after_rv), None)

    def last_write(self, writer: str) -> Write | None:
        return next((w for w in reversed(self.writes) if w.writer == writer), None)

    def acquired(self, identity: str) -> tuple[int, float] | None:
        """(rv, seen) of the first lease change that made ``identity`` the holder."""
        return next(((rv, seen) for rv, holder, seen in self.holders if holder == identity), None)

    def current_rv(self) -> int:
        return max([w.rv for w in self.writes] + [h[0] for h in self.holders] + [0])


def stamped_by(writer_of: Mapping[str, str], objects: Sequence[Mapping[str, Any]]) -> set[str]:
    return {str((o.get("data") or {}).get("writer")) for o in objects} & set(writer_of.values())


# -- sampling a process -------------------------------------------------------------------------------


def rss_bytes(pid: int) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    match = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
    assert match, f"no VmRSS for pid {pid}"
    return int(match.group(1)) * 1024


@dataclass
class Sample:
    t: float
    rss: int
    metrics: dict[str, float]


class Sampler:
    """RSS every ``interval`` seconds and the given /metrics series every ``metrics_every``."""

    def __init__(
        self,
        operator: StampingOperator,
        series: Sequence[str],
        *,
        interval: float = 1.0,
        metrics_every: int = 1,
        extra: Mapping[str, tuple[str, str]] | None = None,
    ) -> None:
        self.operator = operator
        self.series = list(series)
        self.extra = dict(extra or {})  # alias -> (series, label=value) e.g. "events.series"
        self.interval = interval
        self.metrics_every = metrics_every
        self.samples: list[Sample] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        n = 0
        pid = self.operator.pid
        assert pid is not None
        last: dict[str, float] = {}
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                rss = rss_bytes(pid)
                if n % self.metrics_every == 0:
                    text = self.operator.metrics_text()
                    last = metric_values(text, self.series)
                    for alias, (name, selector) in self.extra.items():
                        label, value = selector.split("=", 1)
                        last[alias] = labelled_values(text, name, label).get(value, 0.0)
                self.samples.append(Sample(t, rss, dict(last)))
            except Exception as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
            n += 1
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t)))


async def pump(
    client: Client,
    namespace: str,
    names: Sequence[str],
    *,
    until: asyncio.Event,
    concurrency: int = 16,
    rate: float | None = None,
    expected: dict[str, str] | None = None,
) -> int:
    """Merge-patch ``spec.value`` of the named Widgets until ``until`` is set: ``concurrency``
    workers, each owning a slice of the names and patching them in turn, at most ``rate``
    patches per second in all. A failed patch is retried with the same value until acknowledged,
    so ``expected`` ({name: value}) always holds each Widget's last written value. Returns the
    number of acknowledged patches."""
    done = 0
    interval = concurrency / rate if rate else 0.0

    async def worker(mine: Sequence[str], k: int) -> None:
        nonlocal done
        i = 0
        next_at = time.monotonic()
        while not until.is_set() and mine:
            name = mine[i % len(mine)]
            value = f"v{k}-{i}"
            while True:
                try:
                    await client.patch(WIDGETS, name, {"spec": {"value": value}}, namespace=namespace)
                    break
                except Exception:  # a fault is being injected: the same value again, later
                    await asyncio.sleep(0.1)
            done += 1
            if expected is not None:
                expected[name] = value
            i += 1
            if interval:
                next_at += interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                else:
                    next_at = time.monotonic()

    await asyncio.gather(*(worker(names[k::concurrency], k) for k in range(concurrency)))
    return done
