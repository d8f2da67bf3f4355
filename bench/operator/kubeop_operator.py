"""The benchmark operator, written with kubeop: each Widget owns a ConfigMap and gets a status.

Run: KUBECONFIG=... python kubeop_operator.py [workers]
"""

from __future__ import annotations

import logging
import os
import sys

from kubeop.controller import Context, Controller, Request, set_controller_reference
from kubeop.core.resource import ApiResource
from kubeop.manager import Manager

WIDGETS = ApiResource("bench.kubeop.dev", "v1", "widgets", kind="Widget")
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")


async def reconcile(req: Request, ctx: Context) -> None:
    widget = await ctx.client.get(WIDGETS, req.name, namespace=req.namespace)
    if widget is None:
        return
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": req.name, "namespace": req.namespace},
        "data": {"value": widget["spec"]["value"]},
    }
    set_controller_reference(widget, cm)
    await ctx.client.create_or_update(cm)
    await ctx.client.patch_status(
        widget, {"observedGeneration": widget["metadata"]["generation"], "configMap": req.name}
    )


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    resync = float(os.environ.get("BENCH_RESYNC", "0"))
    manager = Manager(name="widget-operator", metrics_address=None, health_address=None, resync_period=resync)
    manager.add(Controller.for_(WIDGETS).owns(CONFIGMAPS).max_concurrent(workers).reconcile(reconcile))
    print("ready", flush=True)
    profile = os.environ.get("BENCH_PROFILE")
    if profile:  # cProfile the whole run; stats are written on SIGTERM
        import cProfile

        out = f"{profile}.{os.getpid()}"  # one file per process: the idle phase restarts it
        cProfile.runctx("manager.run()", globals(), {"manager": manager}, out)
        import gc
        import json

        with open(f"{out}.gc", "w") as f:  # garbage collections by generation (not in the profile)
            json.dump([s["collections"] for s in gc.get_stats()], f)
    else:
        manager.run()


if __name__ == "__main__":
    main()
