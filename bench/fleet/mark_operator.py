"""The benchmark's operator: marks every ConfigMap labelled ``fleet-bench=yes`` with the run's
id (the label ``fleet-bench-run=<id>``, through a merge patch), in every cluster it is given.

    python bench/fleet/mark_operator.py RUN_ID KUBECONFIG [KUBECONFIG ...]

One kubeconfig: a Manager on that cluster (what a user runs today, one process per cluster);
several: one Fleet over all of them (cluster ``c0``, ``c1``, ... in the order given). Prints
``ready`` once every cluster's caches are synced, then runs until SIGTERM.
"""

from __future__ import annotations

import asyncio
import signal
import sys

from kubeop.controller import Context, Controller, Request
from kubeop.core.resource import ApiResource
from kubeop.fleet import Fleet, Kubeconfigs
from kubeop.manager import Manager, Serving

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
RUN_LABEL = "fleet-bench-run"


def controller(run_id: str) -> Controller:
    async def reconcile(req: Request, ctx: Context) -> None:
        obj = await ctx.client.get(CM, req.name, namespace=req.namespace)
        if obj is None or (obj["metadata"].get("labels") or {}).get(RUN_LABEL) == run_id:
            return
        await ctx.client.patch(
            CM, req.name, {"metadata": {"labels": {RUN_LABEL: run_id}}}, namespace=req.namespace
        )

    return Controller.for_(CM, label_selector="fleet-bench=yes").named("marker").reconcile(reconcile)


async def main(run_id: str, kubeconfigs: list[str]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if len(kubeconfigs) == 1:
        from kubeop.client import Client, load_kubeconfig

        manager = Manager(
            Client(load_kubeconfig(kubeconfigs[0])),
            name="fleet-bench",
            serving=Serving(metrics_address=None, health_address=None),
        )
        manager.add(controller(run_id))
        run = asyncio.create_task(manager.start(stop))
        async with asyncio.timeout(300):
            while not manager._caches_synced():
                if run.done():
                    await run
                await asyncio.sleep(0.05)
    else:
        fleet = Fleet(Kubeconfigs({f"c{i}": path for i, path in enumerate(kubeconfigs)}), name="fleet-bench")
        fleet.add(controller(run_id))
        run = asyncio.create_task(fleet.start(stop))
        for i in range(len(kubeconfigs)):
            await fleet.wait_engaged(f"c{i}", 300)
    print("ready", flush=True)
    await run


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
