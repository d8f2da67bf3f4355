"""The benchmark operator as a one-dependent workflow: each Widget's ConfigMap is a Dependent.

The same Widgets and ConfigMaps as kubeop_operator.py (the hand-written reconcile), with the
ConfigMap declared and a reconcile function that adds ``configMap`` and ``observedGeneration``
to the status write the workflow makes with its conditions (``bare``: without them, the
hand-written operator's status exactly). Run as operator ``kubeop-dependents`` (and
``kubeop-dependents-bare``) by run.py.

Run: KUBECONFIG=... python kubeop_dependents_operator.py [workers] [bare]
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from kubeop.controller import Context, Controller, Dependent, Request
from kubeop.core.resource import ApiResource
from kubeop.manager import Manager

WIDGETS = ApiResource("bench.kubeop.dev", "v1", "widgets", kind="Widget")
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")


def config_map(widget: dict[str, Any], ctx: Context) -> dict[str, Any]:
    return {"metadata": {"name": widget["metadata"]["name"]}, "data": {"value": widget["spec"]["value"]}}


async def report(req: Request, ctx: Context) -> None:
    result = ctx.dependents
    if result is not None and not result.deleting:
        generation = result.primary["metadata"]["generation"]
        result.status.update({"observedGeneration": generation, "configMap": req.name})


def controller(workers: int, *, conditions: bool = True) -> Controller:
    """``conditions``: whether the Widget's status also gets the workflow's conditions
    (ConfigReady, Ready, Progressing, Degraded), which the hand-written operator does not write."""
    return (
        Controller.for_(WIDGETS)
        .dependents(Dependent(CONFIGMAPS, desired=config_map, name="config"), conditions=conditions)
        .max_concurrent(workers)
        .reconcile(report)
    )


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    resync = float(os.environ.get("BENCH_RESYNC", "0"))
    manager = Manager(name="widget-operator", metrics_address=None, health_address=None, resync_period=resync)
    manager.add(controller(workers, conditions=sys.argv[2:3] != ["bare"]))
    print("ready", flush=True)
    manager.run()


if __name__ == "__main__":
    main()
