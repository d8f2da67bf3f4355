"""The framework's own CPU per change, without HTTP: kubeop vs the lean operator, deterministic.

The end-to-end benchmark (run.py) measures the whole operator process against a real API server
on 2 shared cores, where CPU per object moves by +-20 % between runs. This one isolates what a
framework adds: both operators run the same reconcile logic against an in-memory API server
behind a fake transport, in one process, and the CPU spent inside that fake server (encoding
responses and watch lines, applying patches) and in the driver is subtracted. What remains is
the operator's own work per change: decoding what the server sent, the informer pipeline, the
work queue, the reconcile and its write helpers (kubeop); the dict cache, the set of dirty keys
and the same reconcile (lean). Add the measured cost of one HTTP request through aiohttp (the
same for both, see RESULTS.md) times the requests per change to get the full figure.

    .venv/bin/python bench/operator/overhead.py [--n 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson

from kubeop.client import Client, ClientConfig
from kubeop.client.watch import WatchEvent, decode_event
from kubeop.core.request import ApiRequest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

Obj = dict[str, Any]
GROUP = "/apis/bench.kubeop.dev/v1"


class Meter:
    """CPU seconds spent in the fake server and the driver (subtracted from the total)."""

    def __init__(self) -> None:
        self.outside = 0.0

    def __enter__(self) -> Meter:
        self._t0 = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.outside += time.process_time() - self._t0


def _resources(group_version: str, plural: str, kind: str, *, status: bool) -> Obj:
    verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
    resources = [{"name": plural, "singularName": "", "namespaced": True, "kind": kind, "verbs": verbs}]
    if status:
        resources.append({"name": f"{plural}/status", "namespaced": True, "kind": kind, "verbs": verbs[3:]})
    return {"kind": "APIResourceList", "groupVersion": group_version, "resources": resources}


DISCOVERY: dict[str, Obj] = {
    "/api": {"kind": "APIVersions", "versions": ["v1"]},
    "/apis": {
        "kind": "APIGroupList",
        "groups": [
            {
                "name": "bench.kubeop.dev",
                "versions": [{"groupVersion": "bench.kubeop.dev/v1", "version": "v1"}],
                "preferredVersion": {"groupVersion": "bench.kubeop.dev/v1", "version": "v1"},
            }
        ],
    },
    "/api/v1": _resources("v1", "configmaps", "ConfigMap", status=False),
    "/apis/bench.kubeop.dev/v1": _resources("bench.kubeop.dev/v1", "widgets", "Widget", status=True),
}


class FakeServer:
    """Widgets (with a status subresource) and ConfigMaps, with resourceVersions, generations,
    managedFields, watches that send JSON lines, and create/update/merge-patch/get/list."""

    def __init__(self, meter: Meter) -> None:
        self.meter = meter
        self.rv = 1000
        self.objects: dict[str, dict[str, Obj]] = {"widgets": {}, "configmaps": {}}
        self.watchers: dict[str, list[asyncio.Queue[bytes]]] = {"widgets": [], "configmaps": []}
        self.writes = 0

    # -- state -------------------------------------------------------------------------------------
    def _store(self, kind: str, obj: Obj, etype: str) -> Obj:
        self.rv += 1
        md = obj["metadata"]
        md["resourceVersion"] = str(self.rv)
        md["managedFields"] = [
            {
                "manager": "operator",
                "operation": "Update",
                "apiVersion": obj.get("apiVersion", "v1"),
                "time": "2026-11-22T00:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data" if kind == "configmaps" else "f:spec": {"f:value": {}}},
            }
        ]
        self.objects[kind][f"{md['namespace']}/{md['name']}"] = obj
        line = orjson.dumps({"type": etype, "object": obj}) + b"\n"
        for q in self.watchers[kind]:
            q.put_nowait(line)
        return obj

    def create(self, kind: str, obj: Obj) -> Obj:
        md = obj["metadata"]
        key = f"{md['namespace']}/{md['name']}"
        if key in self.objects[kind]:
            raise KeyError("AlreadyExists")
        md.update(uid=f"uid-{key}", creationTimestamp="2026-11-22T00:00:00Z")
        if kind == "widgets":
            md["generation"] = 1
        return self._store(kind, obj, "ADDED")

    def patch(self, kind: str, key: str, patch: Obj, subresource: str | None) -> Obj:
        cur = orjson.loads(orjson.dumps(self.objects[kind][key]))
        if subresource == "status":
            cur["status"] = {**(cur.get("status") or {}), **patch["status"]}
        else:
            for k, v in patch.items():
                if k in ("spec", "data") and cur.get(k) != {**(cur.get(k) or {}), **v}:
                    cur[k] = {**(cur.get(k) or {}), **v}
                    if kind == "widgets":
                        cur["metadata"]["generation"] += 1
        return self._store(kind, cur, "MODIFIED")

    def update(self, kind: str, obj: Obj) -> Obj:
        md = obj["metadata"]
        key = f"{md['namespace']}/{md['name']}"
        if self.objects[kind][key]["metadata"]["resourceVersion"] != md.get("resourceVersion"):
            raise KeyError("Conflict")
        return self._store(kind, obj, "MODIFIED")

    # -- HTTP-ish ----------------------------------------------------------------------------------
    def handle(self, method: str, path: str, body: bytes | None) -> bytes:
        with self.meter:
            if path in DISCOVERY:
                return orjson.dumps(DISCOVERY[path])
            parts = path.split("/")
            kind = "widgets" if "widgets" in parts else "configmaps"
            i = parts.index(kind)
            rest = parts[i + 1 :]
            ns = parts[i - 1] if parts[i - 2] == "namespaces" else ""
            data = orjson.loads(body) if body else None
            if method == "GET" and not rest:
                items = list(self.objects[kind].values())
                return orjson.dumps({"metadata": {"resourceVersion": str(self.rv)}, "items": items})
            if method == "GET":
                return orjson.dumps(self.objects[kind][f"{ns}/{rest[0]}"])
            if method != "GET":
                self.writes += 1
            if method == "POST":
                return orjson.dumps(self.create(kind, data))
            if method == "PUT":
                return orjson.dumps(self.update(kind, data))
            if method == "PATCH":
                sub = rest[1] if len(rest) > 1 else None
                return orjson.dumps(self.patch(kind, f"{ns}/{rest[0]}", data, sub))
            raise ValueError(method)

    def watch(self, path: str) -> asyncio.Queue[bytes]:
        kind = "widgets" if path.endswith("widgets") else "configmaps"
        q: asyncio.Queue[bytes] = asyncio.Queue()
        self.watchers[kind].append(q)
        return q


class FakeTransport:
    """What kubeop.client.Client needs of a Transport, answered by the FakeServer."""

    def __init__(self, server: FakeServer) -> None:
        self.server = server
        self.config = ClientConfig(server="https://fake.invalid", qps=None)
        self.observer = None

    async def request(self, req: ApiRequest) -> Any:
        await asyncio.sleep(0)  # a request is a suspension point
        return orjson.loads(self.server.handle(req.method, req.path, req.body))

    async def stream(self, req: ApiRequest) -> AsyncIterator[WatchEvent[Obj]]:
        q = self.server.watch(req.path)
        if ("sendInitialEvents", "true") in req.query:  # a streaming list: state, then a bookmark
            kind = "widgets" if req.path.endswith("widgets") else "configmaps"
            with self.server.meter:
                objects = self.server.objects[kind].values()
                lines = [orjson.dumps({"type": "ADDED", "object": o}) for o in objects]
                end = {
                    "resourceVersion": str(self.server.rv),
                    "annotations": {"k8s.io/initial-events-end": "true"},
                }
                lines.append(orjson.dumps({"type": "BOOKMARK", "object": {"metadata": end}}))
            for line in lines:
                yield decode_event(line)
        while True:
            yield decode_event(await q.get())

    async def probe(self, path: str = "/readyz", *, time_limit: float = 2.0) -> int:
        return 200

    async def close(self) -> None:
        pass


def converged(server: FakeServer, ns: str, n: int, value: str) -> bool:
    with server.meter:
        cms = server.objects["configmaps"]
        done = 0
        for key, w in server.objects["widgets"].items():
            if not key.startswith(ns + "/"):
                continue
            st = w.get("status") or {}
            cm = cms.get(key)
            if (
                st.get("observedGeneration") == w["metadata"]["generation"]
                and cm
                and cm["data"] == {"value": value}
            ):
                done += 1
        return done == n


async def drive(
    server: FakeServer, ns: str, n: int, settle: Callable[[], object] | None = None
) -> dict[str, float]:
    """Create n Widgets, wait for convergence, change them all, wait again: CPU of each phase
    outside the server and the driver (``settle``: called at the end of each phase, counted in
    it: what the operator still owes for the phase, such as the dashboard's drain)."""
    out: dict[str, float] = {}
    for phase, value in (("create", "one"), ("update", "two")):
        gc.collect()
        c0, o0 = time.process_time(), server.meter.outside
        w0 = server.writes
        for i in range(n):
            name = f"w{i:05d}"
            with server.meter:
                if phase == "create":
                    server.create(
                        "widgets",
                        {
                            "apiVersion": "bench.kubeop.dev/v1",
                            "kind": "Widget",
                            "metadata": {"name": name, "namespace": ns},
                            "spec": {"value": value},
                        },
                    )
                else:
                    server.patch("widgets", f"{ns}/{name}", {"spec": {"value": value}}, None)
            if i % 32 == 31:
                await asyncio.sleep(0)
        while not converged(server, ns, n, value):
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.05)  # trailing no-op reconciles
        if settle is not None:
            settle()
        cpu = (time.process_time() - c0) - (server.meter.outside - o0)
        out[phase] = cpu * 1e6 / n
        out[phase + "_writes"] = (server.writes - w0) / n
    return out


async def run_kubeop(n: int) -> dict[str, float]:
    import kubeop_operator as op

    return await _run_manager(n, op.WIDGETS, op.CONFIGMAPS, op.reconcile)


async def run_kubeop_dashboard(n: int) -> dict[str, float]:
    """The same with its dashboard on and one client reading the overview's event stream (its
    reads are this process's too: a few kB a second). The recorder is drained at the end of
    each phase, inside it, so that what the reconciles recorded is paid for there."""
    import kubeop_operator as op

    return await _run_manager(n, op.WIDGETS, op.CONFIGMAPS, op.reconcile, dashboard=True)


async def _read_overview(port: int, seen: list[int]) -> None:
    """The dashboard's one client: the overview's event stream, read as it comes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b"GET /events/overview HTTP/1.1\r\nHost: bench\r\n\r\n")
        await writer.drain()
        while data := await reader.read(65536):
            seen[0] += data.count(b"event: snapshot")
    finally:
        writer.close()


async def run_kubeop_typed(n: int) -> dict[str, float]:
    import kubeop_typed_operator as op

    from kubeop.kinds import ConfigMap

    return await _run_manager(n, op.Widget, ConfigMap, op.reconcile)


async def run_kubeop_dependents(n: int) -> dict[str, float]:
    """The same operator as a one-dependent workflow (kubeop_dependents_operator.py)."""
    import kubeop_dependents_operator as op

    return await _run_manager(n, None, None, None, controller=op.controller(16))


async def run_kubeop_dependents_bare(n: int) -> dict[str, float]:
    """The same without the workflow's conditions: the hand-written operator's status exactly."""
    import kubeop_dependents_operator as op

    return await _run_manager(n, None, None, None, controller=op.controller(16, conditions=False))


async def _run_manager(
    n: int,
    widgets: Any,
    configmaps: Any,
    reconcile: Any,
    *,
    controller: Any = None,
    dashboard: bool = False,
) -> dict[str, float]:
    from kubeop.controller import Controller
    from kubeop.manager import Dashboard, Manager

    server = FakeServer(Meter())
    client = Client(transport=FakeTransport(server))  # type: ignore[arg-type]
    manager = Manager(
        client,
        name="widget-operator",
        metrics_address=None,
        health_address=None,
        dashboard=Dashboard(address="127.0.0.1:0") if dashboard else False,
    )
    if controller is None:
        controller = Controller.for_(widgets).owns(configmaps).max_concurrent(16).reconcile(reconcile)
    manager.add(controller)
    stop = asyncio.Event()
    task = asyncio.create_task(manager.start(stop))
    await asyncio.sleep(0.2)
    seen = [0]
    viewer = settle = None
    if dashboard:
        server_ = manager.dashboard_server
        assert server_ is not None, "the dashboard did not start"
        viewer = asyncio.create_task(_read_overview(server_.port, seen))
        deadline = time.monotonic() + 60
        while not seen[0]:
            if time.monotonic() > deadline or viewer.done():
                raise RuntimeError("the dashboard's event stream sent no snapshot within 60 s")
            await asyncio.sleep(0.01)
        assert manager._dashboard is not None  # the run's recorder (private: a benchmark's look inside)
        settle = manager._dashboard.recorder.drain
    result = await drive(server, "bench", n, settle)
    if viewer is not None:
        result["snapshots"] = seen[0]
        viewer.cancel()
    stop.set()
    await task
    return result


async def run_kopf_async(n: int) -> dict[str, float]:
    """kopf_operator_async.py's handlers on kubeop.kopf (its one client is the fake one here)."""
    import runpy

    import kubeop.kopf
    from kubeop.kopf.running import build_manager

    sys.modules["kopf"] = kubeop.kopf
    before, registry = kubeop.kopf.get_default_registry(), kubeop.kopf.Registry()
    kubeop.kopf.set_default_registry(registry)
    try:
        runpy.run_path(str(HERE / "kopf_operator_async.py"), run_name="__kopf_script__")
    finally:
        kubeop.kopf.set_default_registry(before)
    server = FakeServer(Meter())
    client = Client(transport=FakeTransport(server))  # type: ignore[arg-type]
    manager = build_manager(registry=registry, client=client, memo={"client": client}, workers=16)
    stop = asyncio.Event()
    task = asyncio.create_task(manager.start(stop))
    await asyncio.sleep(0.2)
    result = await drive(server, "bench", n)
    stop.set()
    await task
    return result


async def run_lean(n: int) -> dict[str, float]:
    import lean_operator as lean

    server = FakeServer(Meter())

    class Response:
        def __init__(self, status: int, body: bytes) -> None:
            self.status, self.body = status, body

        async def read(self) -> bytes:
            return self.body

        async def __aenter__(self) -> Response:
            await asyncio.sleep(0)
            return self

        async def __aexit__(self, *exc: object) -> None:
            pass

        @property
        def content(self) -> AsyncIterator[bytes]:
            return self._lines()

        async def _lines(self) -> AsyncIterator[bytes]:
            q = server.watch(self.path)
            while True:
                yield await q.get()

    class Session:
        """The three aiohttp calls the lean operator makes, answered by the fake server."""

        def _call(self, method: str, url: str, data: bytes | None) -> Response:
            path = url.split("fake.invalid", 1)[1].split("?", 1)[0]
            if "watch=1" in url:
                r = Response(200, b"")
                r.path = path  # type: ignore[attr-defined]
                return r
            try:
                return Response(201 if method == "POST" else 200, server.handle(method, path, data))
            except KeyError:
                return Response(409, b"{}")

        def get(self, url: str, **_: Any) -> Response:
            return self._call("GET", url, None)

        def post(self, url: str, data: bytes, **_: Any) -> Response:
            return self._call("POST", url, data)

        def patch(self, url: str, data: bytes, **_: Any) -> Response:
            return self._call("PATCH", url, data)

    operator = lean.Lean("https://fake.invalid", None, 16)  # type: ignore[arg-type]
    operator.session = Session()  # type: ignore[assignment]
    operator.synced = 0
    tasks = [
        asyncio.create_task(operator.watch(f"{GROUP}/widgets", operator.widgets, False)),
        asyncio.create_task(operator.watch("/api/v1/configmaps", operator.cms, True)),
    ]
    tasks += [asyncio.create_task(operator.worker()) for _ in range(16)]
    await asyncio.sleep(0.2)
    result = await drive(server, "bench", n)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return result


RUNS = {
    "kubeop": run_kubeop,
    "kubeop-dashboard": run_kubeop_dashboard,
    "kubeop-typed": run_kubeop_typed,
    "kubeop-dependents": run_kubeop_dependents,
    "kubeop-dependents-bare": run_kubeop_dependents_bare,
    "lean": run_lean,
    "kopf-async-on-kubeop": run_kopf_async,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", choices=list(RUNS), action="append", help="repeatable")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in RUNS}
    for _ in range(args.repeat):
        for name, fn in RUNS.items():
            if args.only and name not in args.only:
                continue
            runs[name].append(asyncio.run(fn(args.n)))
    report: dict[str, Any] = {}
    for name, rs in runs.items():
        if rs:
            report[name] = {k: round(statistics.median(r[k] for r in rs), 2) for k in rs[0]}
    for phase in ("create", "update"):
        if "kubeop" in report and "lean" in report:
            report[f"{phase}_extra_us"] = round(report["kubeop"][phase] - report["lean"][phase], 1)
        if "kubeop" in report and "kubeop-typed" in report:
            typed, untyped = report["kubeop-typed"][phase], report["kubeop"][phase]
            report[f"{phase}_typed_extra_pct"] = round(100 * (typed - untyped) / untyped, 1)
        for name in ("kubeop-dependents", "kubeop-dependents-bare"):
            if "kubeop" in report and name in report:
                deps, untyped = report[name][phase], report["kubeop"][phase]
                report[f"{phase}_{name[7:]}_extra_pct"] = round(100 * (deps - untyped) / untyped, 1)
        if "kubeop" in report and "kubeop-dashboard" in report:
            on, off = report["kubeop-dashboard"][phase], report["kubeop"][phase]
            report[f"{phase}_dashboard_extra_pct"] = round(100 * (on - off) / off, 1)
        if "kubeop" in report and "kopf-async-on-kubeop" in report:
            report[f"{phase}_kopf_extra_us"] = round(
                report["kopf-async-on-kubeop"][phase] - report["kubeop"][phase], 1
            )
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
