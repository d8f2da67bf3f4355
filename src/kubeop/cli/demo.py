"""``kubeop demo``: the main job, end to end against a real local control plane.

Until the controller runtime lands this shows the cluster working: fake nodes Ready, a Deployment
whose pods run, a deleted pod replaced, and garbage collection of the whole tree.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from kubeop.testing import binaries as bins
from kubeop.testing.controlplane import ControlPlane, ControlPlaneError

NAMESPACE = "kubeop-demo"


def _say(msg: str) -> None:
    typer.echo(msg, err=True)


def _pods(cp: ControlPlane) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cp.api.call(
        "GET", f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app%3Dweb"
    )["items"]
    return items


def _running(cp: ControlPlane, want: int, timeout: float = 60.0, exclude: str = "") -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        pods = [
            p
            for p in _pods(cp)
            if p["status"].get("phase") == "Running"
            and "deletionTimestamp" not in p["metadata"]
            and p["metadata"]["name"] != exclude
        ]
        if len(pods) >= want:
            return pods
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"only {len(pods)}/{want} pods Running after {timeout:.0f} s")
        time.sleep(0.2)


def demo(
    nodes: Annotated[int, typer.Option(help="number of KWOK fake nodes")] = 3,
    replicas: Annotated[int, typer.Option(help="replicas of the sample Deployment")] = 3,
) -> None:
    """Start a local control plane, run a Deployment on fake nodes, show self-healing, clean up."""
    t0 = time.monotonic()
    try:
        with ControlPlane(full=True, nodes=nodes, progress=_say) as cp:
            _say(f"==> control plane up in {time.monotonic() - t0:.1f} s")
            typer.echo(cp.kubectl("get", "nodes", "-o", "wide").stdout)
            cp.create_namespace(NAMESPACE)
            deployment = {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": NAMESPACE},
                "spec": {
                    "replicas": replicas,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
                    },
                },
            }
            cp.api.call("POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", deployment)
            t1 = time.monotonic()
            pods = _running(cp, replicas)
            _say(
                f"==> Deployment web: {len(pods)}/{replicas} pods Running after {time.monotonic() - t1:.1f} s"
            )
            typer.echo(cp.kubectl("get", "pods", "-n", NAMESPACE, "-o", "wide").stdout)
            victim = pods[0]["metadata"]["name"]
            cp.api.call("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{victim}")
            t2 = time.monotonic()
            _running(cp, replicas, exclude=victim)
            _say(f"==> deleted pod {victim}; the ReplicaSet replaced it in {time.monotonic() - t2:.1f} s")
            cp.api.call(
                "DELETE",
                f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/web",
                {"propagationPolicy": "Background"},
            )
            t3 = time.monotonic()
            while (
                _pods(cp) or cp.api.call("GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/replicasets")["items"]
            ):
                if time.monotonic() - t3 > 60:
                    raise ControlPlaneError(
                        "garbage collection did not remove the ReplicaSet and pods in 60 s"
                    )
                time.sleep(0.2)
            _say(
                f"==> deleted the Deployment; its ReplicaSet and pods were garbage-collected in "
                f"{time.monotonic() - t3:.1f} s"
            )
    except (ControlPlaneError, bins.BinaryError) as exc:
        typer.secho(f"error: {exc}", err=True, fg=typer.colors.RED)
        raise typer.Exit(1) from exc
    _say(f"==> demo finished in {time.monotonic() - t0:.1f} s; every process stopped")
