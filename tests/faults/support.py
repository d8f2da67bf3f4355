"""Support for the fault suite (tests/faults): the Widget operator as a process, Widgets, and the
checks every scenario ends with.

Scale
    ``FULL`` is True under ``KUBEOP_FAULTS=full`` (``make faults``); ``scale(short, full)`` picks a
    number. The short versions run in ``make test`` and keep the assertions and the recovery
    bounds; only repetitions and object counts shrink. ``rng(scenario)`` is a random generator
    seeded from ``SEED`` (``KUBEOP_FAULTS_SEED`` replays a run; ``report`` records it).

Control planes (fixtures in conftest.py, one of each per session, started on first use, never
the shared ``control_plane``: these tests kill, pause and compact things)
    ``fault_plane``: etcd + kube-apiserver; ``fault_plane_full``: plus controller-manager (the
    garbage collector; it takes up the Widget CRD up to ~45 s after the start:
    ``wait_garbage_collector(plane)`` waits for that), scheduler and one KWOK node. Both have the
    Widget CRD installed.
    ``fault_namespace(plane)`` (a function fixture of the same name uses ``fault_plane``) makes a
    fresh namespace.

The operator
    ``OperatorProcess(plane, namespace, log_dir, workers=16, leader_election=False, ...)`` runs
    ``widget_operator.py`` (see its docstring for what it does) as a child process:
    ``start(wait="synced")`` returns once it printed that line (``"leading"``, ``"metrics"`` or
    None also work), ``stop()`` is SIGTERM (graceful), ``kill()`` SIGKILL, ``pause()`` /
    ``resume()`` SIGSTOP / SIGCONT, ``restart()`` kills and starts again. ``wait_for(prefix,
    since=t)`` waits for a stdout line (``"lists widgets 2"``: a relist; see the operator's
    docstring); ``lines`` holds ``(monotonic time, line)`` of every line since the last start.
    ``requests()`` scrapes its ``rest_client_requests_total`` into ``{(method, code): count}``
    and ``writes()`` sums the write methods: counters restart from 0 when the process does.
    ``log_tail()`` is its stderr, for failure messages. Use it as a context manager (or call
    ``close()``) so no process outlives a test; a process also exits when the test runner dies.

Widgets
    ``WIDGETS`` / ``CONFIGMAPS`` resources, ``widget(name, ns, value, labels)``,
    ``create_widgets(client, ns, names, value)``, ``set_values(client, ns, {name: value})``,
    ``delete_widgets(client, ns, names)`` (bounded concurrency, with the client's retries).

Checks
    ``problems(widgets, configmaps, expected=None, allow_orphans=False)`` is the whole invariant,
    as a list of human-readable problems (empty: all good), on plain lists of objects:
    every Widget has exactly one ConfigMap it controls, named after it, with
    ``data.value == spec.value``, and ``status.observedGeneration == metadata.generation``; no
    ConfigMap is controlled by two owners or by a Widget that does not exist (orphan); with
    ``expected`` ({name: value}), exactly those Widgets exist with those values (nothing the test
    wrote was lost).
    ``await state(client, ns, consistent=False)`` lists both kinds (``consistent=False`` reads the
    API server's watch cache, cheap enough to poll; True reads etcd).
    ``await wait_converged(client, ns, expected, timeout, informers=None)`` returns the monotonic
    time at which the problems were first gone (AssertionError with the remaining problems on
    timeout); it watches the stores of ``informers`` (Widgets, ConfigMaps) of the test process
    if given (free for the API server), else lists every 100 ms.
    ``await assert_converged(client, ns, expected)`` checks once with a consistent read.
    ``with_value(cm_informer, ns, value)`` counts ConfigMaps with that value in a store (to act
    mid-converge).
    ``await assert_store_matches(informer, client, resource, ns)``: an informer's store holds
    exactly the objects (uid and resourceVersion) of a fresh consistent list.
    ``await wait_server_back(plane, ns)``: the monotonic time at which kube-apiserver answers
    ``/readyz`` and the Widget endpoint again (polled every 20 ms).

Reporting
    ``report(scenario, **numbers)`` prints one JSON line (``pytest -s`` shows it) and appends it
    to the file named by ``KUBEOP_FAULTS_RESULTS``, if set; ``summary(values)`` formats a series.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from kubeop.client import Client
from kubeop.core.resource import ApiResource
from kubeop.testing import ControlPlane
from tests.support.crds import widget_crd

T = TypeVar("T")
Obj = dict[str, Any]

FULL = os.environ.get("KUBEOP_FAULTS", "").strip().lower() == "full"


def scale(short: T, full: T) -> T:
    """``full`` under KUBEOP_FAULTS=full, else ``short``."""
    return full if FULL else short


#: Seed of every random choice the scenarios make (when to kill, what to change); set
#: KUBEOP_FAULTS_SEED to replay a run (each scenario reports the seed it used).
SEED = int(os.environ.get("KUBEOP_FAULTS_SEED") or time.time_ns() % 2**32)


def rng(scenario: str) -> random.Random:
    """A random generator for one scenario, from ``SEED``."""
    return random.Random(f"{SEED}:{scenario}")


HERE = Path(__file__).resolve().parent
OPERATOR_SCRIPT = HERE / "widget_operator.py"
GROUP = "faults.kubeop.dev"
WIDGETS = ApiResource(GROUP, "v1", "widgets", kind="Widget")
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
OWNER_LABEL = f"{GROUP}/widget"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

WIDGET_CRD: Obj = widget_crd(GROUP)


def client_for(plane: ControlPlane, **overrides: Any) -> Client:
    """An admin client without a client-side rate limit (as the operator's)."""
    return Client.from_kubeconfig(plane.kubeconfig_path, qps=None, **overrides)


# -- the operator process ------------------------------------------------------------------------


class OperatorProcess:
    """The Widget operator (``widget_operator.py``) in a child process; see the module docstring."""

    def __init__(
        self,
        plane: ControlPlane,
        namespace: str,
        log_dir: Path,
        *,
        workers: int = 16,
        leader_election: bool = False,
        lease_duration: float = 6.0,
        renew_deadline: float = 4.0,
        retry_period: float = 1.0,
        resync: float = 0.0,
        log_level: str = "INFO",
        name: str = "operator",
        extra_env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.plane = plane
        self.namespace = namespace
        self.name = name
        self.log_path = Path(log_dir) / f"{name}.log"
        self.args = [
            sys.executable,
            str(OPERATOR_SCRIPT),
            f"--namespace={namespace}",
            f"--workers={workers}",
            f"--resync={resync}",
            f"--log-level={log_level}",
        ]
        if leader_election:
            self.args += [
                "--leader-election",
                f"--lease-duration={lease_duration}",
                f"--renew-deadline={renew_deadline}",
                f"--retry-period={retry_period}",
            ]
        self.args += list(extra_args)
        self.env = dict(plane.env(), PYTHONUNBUFFERED="1", **(extra_env or {}))
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[tuple[float, str]] = []
        self.metrics_port: int | None = None
        self.webhook_port: int | None = None
        self.starts = 0
        self._cond = threading.Condition()
        self._reader: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self, wait: str | None = "synced", timeout: float = 60.0) -> OperatorProcess:
        """Start the process; with ``wait``, return once it printed a line starting with it."""
        if self.alive:
            raise RuntimeError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._cond:
            self.lines = []
            self.metrics_port = None
        with self.log_path.open("a") as log:
            log.write(f"==== start {self.starts + 1} at {time.strftime('%H:%M:%S')} ====\n")
            log.flush()
            self.proc = subprocess.Popen(
                self.args,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                cwd=HERE,
            )
        self.starts += 1
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self._reader.start()
        if wait:
            self.wait_for(wait, timeout)
        return self

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.strip()
            with self._cond:
                if proc is not self.proc:
                    return
                self.lines.append((time.monotonic(), line))
                if line.startswith("metrics "):
                    self.metrics_port = int(line.split()[1])
                elif line.startswith("webhook "):
                    self.webhook_port = int(line.split()[1])
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, prefix: str, timeout: float = 60.0, *, since: float | None = None) -> float:
        """Wait for a stdout line starting with ``prefix`` (from this start, and printed at or
        after the monotonic time ``since`` if given); returns the time it was read."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for at, line in self.lines:
                    if line.startswith(prefix) and (since is None or at >= since):
                        return at
                if not self.alive:
                    raise AssertionError(
                        f"{self.name} exited ({self.returncode}) before printing {prefix!r}:\n"
                        + self.log_tail()
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"{self.name} did not print {prefix!r} within {timeout:.0f} s:\n{self.log_tail()}"
                    )
                self._cond.wait(min(left, 0.2))

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout``); returns the exit code."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGCONT)  # a paused process cannot handle SIGTERM
                proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self._join()
        return proc.returncode

    def kill(self) -> None:
        """SIGKILL: no shutdown, in-flight requests cut wherever they are."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        self._join()

    def restart(self, wait: str | None = "synced", timeout: float = 60.0) -> OperatorProcess:
        self.kill()
        return self.start(wait, timeout)

    def pause(self) -> None:
        assert self.proc is not None and self.alive, "not running"
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def close(self) -> None:
        """Make sure nothing is left running (SIGKILL)."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGCONT)
            self.kill()

    def _join(self) -> None:
        if self._reader is not None:
            self._reader.join(5)
            self._reader = None

    def __enter__(self) -> OperatorProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc is not None else None

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    # -- metrics -----------------------------------------------------------------------------------
    def requests(self) -> collections.Counter[tuple[str, str]]:
        """``rest_client_requests_total`` of the running process by (method, code)."""
        if self.metrics_port is None:
            raise AssertionError(f"{self.name} has not reported its metrics port")
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        counts: collections.Counter[tuple[str, str]] = collections.Counter()
        for line in text.splitlines():
            if line.startswith("rest_client_requests_total{"):
                labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
                counts[(labels.get("method", ""), labels.get("code", ""))] += int(
                    float(line.rsplit(" ", 1)[1])
                )
        return counts

    def writes(self) -> int:
        """Write requests (any answer, conflicts included) the running process has sent."""
        return sum(n for (method, _), n in self.requests().items() if method in WRITE_METHODS)


# -- widgets ---------------------------------------------------------------------------------------


def widget(name: str, namespace: str, value: str, labels: Mapping[str, str] | None = None) -> Obj:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": {"value": value},
    }


def names(n: int, prefix: str = "w") -> list[str]:
    return [f"{prefix}{i:05d}" for i in range(n)]


async def _bounded(jobs: Iterable[Any], concurrency: int) -> None:
    sem = asyncio.Semaphore(concurrency)

    async def one(job: Any) -> None:
        async with sem:
            await job

    await asyncio.gather(*(one(j) for j in jobs))


async def create_widgets(
    client: Client, namespace: str, widget_names: Sequence[str], value: str = "v0", concurrency: int = 32
) -> None:
    await _bounded(
        (client.create(widget(n, namespace, value), resource=WIDGETS) for n in widget_names), concurrency
    )


async def set_values(
    client: Client, namespace: str, values: Mapping[str, str], concurrency: int = 32
) -> None:
    """Merge-patch ``spec.value`` of each named Widget."""
    await _bounded(
        (client.patch(WIDGETS, n, {"spec": {"value": v}}, namespace=namespace) for n, v in values.items()),
        concurrency,
    )


async def delete_widgets(
    client: Client, namespace: str, widget_names: Sequence[str], concurrency: int = 32
) -> None:
    await _bounded((client.delete(WIDGETS, n, namespace=namespace) for n in widget_names), concurrency)


# -- checks ----------------------------------------------------------------------------------------


def _controllers(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [r for r in refs if r.get("controller")]


def problems(
    widgets: Sequence[Mapping[str, Any]],
    configmaps: Sequence[Mapping[str, Any]],
    expected: Mapping[str, str] | None = None,
    *,
    allow_orphans: bool = False,
    limit: int = 20,
) -> list[str]:
    """Everything that is not as it should be (see the module docstring); [] when converged."""
    out: list[str] = []
    live = {w["metadata"]["uid"]: w for w in widgets if not w["metadata"].get("deletionTimestamp")}
    children: dict[str, list[Mapping[str, Any]]] = collections.defaultdict(list)
    for cm in configmaps:
        cm_name = cm["metadata"]["name"]
        refs = _controllers(cm)
        widget_refs = [
            r for r in refs if r.get("kind") == "Widget" and r.get("apiVersion", "").startswith(GROUP)
        ]
        if len(refs) > 1:
            out.append(f"ConfigMap {cm_name} has {len(refs)} controller references")
        if not widget_refs:
            if OWNER_LABEL in ((cm["metadata"].get("labels")) or {}):
                out.append(f"ConfigMap {cm_name} is labelled as a Widget's but has no Widget controller")
            continue
        for ref in widget_refs:
            if ref.get("uid") in live:
                children[ref["uid"]].append(cm)
            elif not allow_orphans:
                out.append(
                    f"orphan: ConfigMap {cm_name} is controlled by a Widget that does not exist "
                    f"({ref.get('name')} {ref.get('uid')})"
                )
    for uid, w in live.items():
        name = w["metadata"]["name"]
        kids = children.get(uid, [])
        value = (w.get("spec") or {}).get("value")
        if not kids:
            out.append(f"Widget {name}: no ConfigMap")
        elif len(kids) > 1:
            out.append(
                f"Widget {name}: {len(kids)} ConfigMaps ({sorted(k['metadata']['name'] for k in kids)})"
            )
        else:
            cm = kids[0]
            if cm["metadata"]["name"] != name:
                out.append(f"Widget {name}: its ConfigMap is named {cm['metadata']['name']}")
            got = (cm.get("data") or {}).get("value")
            if got != value:
                out.append(f"Widget {name}: ConfigMap has value {got!r}, spec has {value!r}")
        status = w.get("status") or {}
        if status.get("observedGeneration") != w["metadata"].get("generation"):
            out.append(
                f"Widget {name}: status.observedGeneration {status.get('observedGeneration')} "
                f"!= generation {w['metadata'].get('generation')}"
            )
    if expected is not None:
        have = {w["metadata"]["name"]: (w.get("spec") or {}).get("value") for w in live.values()}
        missing = sorted(set(expected) - set(have))
        extra = sorted(set(have) - set(expected))
        if missing:
            out.append(f"{len(missing)} Widgets missing: {missing[:10]}")
        if extra:
            out.append(f"{len(extra)} unexpected Widgets: {extra[:10]}")
        wrong = sorted(n for n in set(expected) & set(have) if expected[n] != have[n])
        if wrong:
            out.append(f"{len(wrong)} Widgets lost a write: {[(n, have[n], expected[n]) for n in wrong[:5]]}")
    if len(out) > limit:
        out = [*out[:limit], f"... and {len(out) - limit} more"]
    return out


async def state(client: Client, namespace: str, *, consistent: bool = False) -> tuple[list[Obj], list[Obj]]:
    """(widgets, configmaps) in ``namespace``: from the watch cache, or from etcd if ``consistent``."""
    if consistent:
        ws = await client.list_all(WIDGETS, namespace=namespace)
        cms = await client.list_all(CONFIGMAPS, namespace=namespace)
    else:
        ws = await client.list(WIDGETS, namespace=namespace, resource_version="0")
        cms = await client.list(CONFIGMAPS, namespace=namespace, resource_version="0")
    return ws.items, cms.items


async def wait_converged(
    client: Client,
    namespace: str,
    expected: Mapping[str, str] | None = None,
    *,
    timeout: float = 60.0,
    allow_orphans: bool = False,
    informers: tuple[Any, Any] | None = None,
) -> float:
    """Wait until :func:`problems` finds nothing; returns the monotonic time it first did.

    With ``informers`` (a Widget and a ConfigMap informer of the test process) their stores are
    checked every 20 ms, which costs the API server nothing, and each success is confirmed with
    a list (the time returned is the store's: a store sees changes after they happen, so it is
    never early). Without, both kinds are listed from the watch cache every 100 ms (500 + 500
    objects 20 times a second would take a good part of a core from the API server).
    """
    deadline = time.monotonic() + timeout
    last: list[str] | str = "no answer yet"
    while True:
        at = time.monotonic()
        try:
            if informers is not None:
                ws, cms = (
                    [o for o in inf.store.list() if o["metadata"].get("namespace") == namespace]
                    for inf in informers
                )
                found = problems(ws, cms, expected, allow_orphans=allow_orphans)
                if not found:
                    found = problems(*(await state(client, namespace)), expected, allow_orphans=allow_orphans)
            else:
                found = problems(*(await state(client, namespace)), expected, allow_orphans=allow_orphans)
        except Exception as exc:  # the API server may be down or starting
            last = f"{type(exc).__name__}: {exc}"
        else:
            if not found:
                return at
            last = found
        if time.monotonic() > deadline:
            raise AssertionError(f"not converged after {timeout:.0f} s: {last}")
        await asyncio.sleep(0.02 if informers is not None else 0.1)


def with_value(configmaps: Any, namespace: str, value: str) -> int:
    """How many ConfigMaps in a ConfigMap informer's store have ``data.value == value``."""
    return sum(
        1
        for o in configmaps.store.list()
        if o["metadata"].get("namespace") == namespace and (o.get("data") or {}).get("value") == value
    )


async def assert_converged(
    client: Client, namespace: str, expected: Mapping[str, str] | None = None, *, allow_orphans: bool = False
) -> None:
    """The invariant on a consistent read (etcd, not the watch cache)."""
    found = problems(
        *(await state(client, namespace, consistent=True)), expected, allow_orphans=allow_orphans
    )
    assert not found, "\n".join(found)


async def assert_store_matches(informer: Any, client: Client, resource: ApiResource, namespace: str) -> None:
    """``informer``'s store holds exactly what a fresh consistent list returns (uid and
    resourceVersion of every object): nothing missed, nothing stale, nothing extra."""
    listed = await client.list_all(resource, namespace=namespace)
    want = {
        o["metadata"]["name"]: (o["metadata"]["uid"], o["metadata"]["resourceVersion"]) for o in listed.items
    }
    have = {
        o["metadata"]["name"]: (o["metadata"]["uid"], o["metadata"]["resourceVersion"])
        for o in informer.store.list()
        if o["metadata"].get("namespace") == namespace
    }
    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want))
    stale = sorted(n for n in set(want) & set(have) if want[n] != have[n])
    assert not (missing or extra or stale), (
        f"informer store != list: {len(missing)} missing {missing[:5]}, {len(extra)} extra {extra[:5]}, "
        f"{len(stale)} stale {[(n, have[n], want[n]) for n in stale[:5]]}"
    )


async def wait_server_back(
    plane: ControlPlane, namespace: str, timeout: float = 90.0, seen: dict[str, float] | None = None
) -> float:
    """Monotonic time at which kube-apiserver answers /readyz and the Widget endpoint again
    (polled every 20 ms). ``seen``, if given, gets the monotonic times at which each of
    ``"readyz"`` and ``"widgets"`` first answered 200."""
    seen = {} if seen is None else seen
    path = f"/apis/{GROUP}/v1/namespaces/{namespace}/widgets?limit=1"
    deadline = time.monotonic() + timeout
    while True:
        for what, check in (("readyz", "/readyz"), ("widgets", path)):
            if what not in seen:
                try:
                    status, _ = await asyncio.to_thread(plane.api.raw, "GET", check)
                except OSError:
                    status = 0
                if status == 200:
                    seen[what] = time.monotonic()
        if len(seen) == 2:
            return max(seen.values())
        if time.monotonic() > deadline:
            raise AssertionError(f"kube-apiserver not back within {timeout:.0f} s (answered: {sorted(seen)})")
        await asyncio.sleep(0.02)


def fresh_namespace(plane: ControlPlane, prefix: str) -> str:
    """Create a namespace named ``prefix-<random>``; returns its name."""
    name = f"{prefix}-{os.urandom(3).hex()}"
    plane.create_namespace(name)
    return name


def install_widget_crd(plane: ControlPlane) -> None:
    plane.install_crds([WIDGET_CRD])


def wait_garbage_collector(plane: ControlPlane, timeout: float = 90.0) -> float:
    """Wait until kube-controller-manager's garbage collector deletes the ConfigMap of a deleted
    Widget (it picks up a new CRD at its next discovery, every 30 s); returns the seconds it took.
    """
    t0 = time.monotonic()
    ns = fresh_namespace(plane, "gc-check")
    base = f"/apis/{GROUP}/v1/namespaces/{ns}/widgets"
    owner = plane.api.call("POST", base, widget("owner", ns, "x"))
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "child",
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/v1",
                    "kind": "Widget",
                    "name": "owner",
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
    }
    plane.api.call("POST", f"/api/v1/namespaces/{ns}/configmaps", cm)
    plane.api.call("DELETE", f"{base}/owner")
    while plane.api.raw("GET", f"/api/v1/namespaces/{ns}/configmaps/child")[0] != 404:
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"the garbage collector did not delete a Widget's child in {timeout:.0f} s")
        time.sleep(0.2)
    plane.delete_namespace(ns)
    return time.monotonic() - t0


def summary(values: Sequence[float]) -> str:
    """'n=10 min 0.21 median 0.35 max 0.80 s' for a report line."""
    if not values:
        return "n=0"
    ordered = sorted(values)
    median = ordered[len(ordered) // 2] if len(ordered) % 2 else sum(ordered[len(ordered) // 2 - 1 :][:2]) / 2
    return f"n={len(values)} min {ordered[0]:.2f} median {median:.2f} max {ordered[-1]:.2f} s"


def report(scenario: str, **data: Any) -> None:
    """Print one scenario's measurements (seen with ``pytest -s``) and, when
    ``KUBEOP_FAULTS_RESULTS`` names a file, append them to it as a JSON line."""
    import json

    record = {
        "scenario": scenario,
        "full": FULL,
        "seed": SEED,
        "at": time.strftime("%Y-%m-%dT%H:%M:%S"),
        **data,
    }
    line = json.dumps(record, default=str)
    print(f"\n[faults] {line}")
    path = os.environ.get("KUBEOP_FAULTS_RESULTS")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
