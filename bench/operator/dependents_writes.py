"""Writes per change of a five-dependent workflow at N primaries, on kubeop.testing.FakeCluster.

A web app (the WebApp kind) as a workflow of a ConfigMap, a Secret, a Deployment, a Service and a
PodDisruptionBudget. Phases: create N WebApps; change what only the ConfigMap is made of; change
what the Deployment and the PodDisruptionBudget are made of; stay idle through resyncs. Every
write the operator's client sends is counted, per phase and per primary: a change should cost
the dependents it changes plus the one status write (the conditions' observedGeneration), and
idle nothing.

    .venv/bin/python bench/operator/dependents_writes.py [--n 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time
from collections import Counter
from typing import Any

from kubeop.client import Client
from kubeop.controller import Controller, Dependent
from kubeop.core.resource import ApiResource
from kubeop.manager import Manager, Serving
from kubeop.testing import FakeCluster

WEBAPPS = ApiResource("bench.kubeop.dev", "v1", "webapps", kind="WebApp")
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "webapps.bench.kubeop.dev"},
    "spec": {
        "group": "bench.kubeop.dev",
        "scope": "Namespaced",
        "names": {"plural": "webapps", "singular": "webapp", "kind": "WebApp"},
        "versions": [{"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}}],
    },
}


def _labels(app: dict[str, Any]) -> dict[str, str]:
    return {"app": app["metadata"]["name"]}


def config(app: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"metadata": {"name": app["metadata"]["name"]}, "data": {"greeting": app["spec"]["greeting"]}}


def secret(app: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"metadata": {"name": app["metadata"]["name"]}, "data": {"token": "bm90LWEtc2VjcmV0"}}


def deployment(app: dict[str, Any], ctx: Any) -> dict[str, Any]:
    pod = {"metadata": {"labels": _labels(app)}, "spec": {"containers": [{"name": "web", "image": "nginx"}]}}
    spec = {"replicas": app["spec"]["replicas"], "selector": {"matchLabels": _labels(app)}, "template": pod}
    return {"metadata": {"name": app["metadata"]["name"]}, "spec": spec}


def service(app: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": app["metadata"]["name"]},
        "spec": {"selector": _labels(app), "ports": [{"port": 80}]},
    }


def budget(app: dict[str, Any], ctx: Any) -> dict[str, Any]:
    spec = {"minAvailable": max(1, app["spec"]["replicas"] - 1), "selector": {"matchLabels": _labels(app)}}
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": app["metadata"]["name"]},
        "spec": spec,
    }


def controller() -> Controller:
    return (
        Controller.for_(WEBAPPS)
        .dependents(
            Dependent(CONFIGMAPS, desired=config, name="config"),
            Dependent("secrets", desired=secret, name="secret"),
            Dependent(
                "deployments.apps", desired=deployment, name="deployment", depends_on=("config", "secret")
            ),
            Dependent("services", desired=service, name="service", depends_on="deployment"),
            Dependent("poddisruptionbudgets.policy", desired=budget, name="budget", depends_on="deployment"),
        )
        .max_concurrent(16)
    )


async def main(n: int) -> dict[str, Any]:
    cluster = FakeCluster()
    cluster.add_crd(CRD)
    transport = cluster.transport()
    manager = Manager(
        Client(transport=transport),
        serving=Serving(metrics_address=None, health_address=None),
        resync_period=1.0,
    )
    manager.add(controller())
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    api = cluster.client()
    seen = 0
    report: dict[str, Any] = {"n": n}

    def writes() -> Counter[str]:
        nonlocal seen
        sent = transport.sent[seen:]
        seen = len(transport.sent)
        out: Counter[str] = Counter()
        for r in sent:
            if (
                r.method in ("POST", "PUT", "PATCH", "DELETE")
                and "/events" not in r.path
                and "/leases" not in r.path
            ):
                what = r.path.rsplit("/", 2)[-2] if r.method != "POST" else r.path.rsplit("/", 1)[-1]
                out[f"{r.method} {'status' if r.path.endswith('/status') else what}"] += 1
        return out

    async def converged(check: Any) -> None:
        async with asyncio.timeout(600):
            while True:
                items = (await api.list(WEBAPPS, namespace="default")).items
                if len(items) == n and all(check(a) for a in items):
                    return
                await asyncio.sleep(0.2)

    def ready(app: dict[str, Any]) -> bool:
        conds = {c["type"]: c for c in (app.get("status") or {}).get("conditions", [])}
        ok = conds.get("Ready", {})
        return ok.get("status") == "True" and ok.get("observedGeneration") == app["metadata"]["generation"]

    try:
        await asyncio.sleep(0.5)
        writes()
        started = time.monotonic()
        for i in range(n):
            body = {
                "apiVersion": "bench.kubeop.dev/v1",
                "kind": "WebApp",
                "spec": {"greeting": "hi", "replicas": 2},
            }
            await api.create({**body, "metadata": {"name": f"app{i:05d}", "namespace": "default"}})
        await converged(ready)
        await asyncio.sleep(1.5)  # trailing reconciles
        report["create"] = {"seconds": round(time.monotonic() - started, 1), **_per(writes(), n)}
        for phase, spec in (("greeting", {"greeting": "hello"}), ("replicas", {"replicas": 3})):
            started = time.monotonic()
            for i in range(n):
                await api.patch(WEBAPPS, f"app{i:05d}", {"spec": spec}, namespace="default")
            await converged(ready)
            await asyncio.sleep(1.5)
            report[phase] = {"seconds": round(time.monotonic() - started, 1), **_per(writes(), n)}
        await asyncio.sleep(3.0)  # three resyncs: every WebApp reconciled again, nothing to write
        report["idle (3 resyncs)"] = _per(writes(), n)
    finally:
        stop.set()
        await task
        await api.close()
    return report


def _per(counts: Counter[str], n: int) -> dict[str, Any]:
    return {"writes_per_primary": round(sum(counts.values()) / n, 3), "by_kind": dict(sorted(counts.items()))}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(json.dumps(asyncio.run(main(args.n)), indent=1))
