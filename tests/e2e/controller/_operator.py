"""A tiny operator for process-level tests (leader election, SIGTERM).

python _operator.py NAMESPACE IDENTITY [--leader-election] [--slow SECONDS]

Reconciles ConfigMaps labelled ``app=probe`` in NAMESPACE by annotating them with its identity.
Prints ``leading`` when it becomes the leader and ``reconciling NAME`` when a reconcile starts.
"""

from __future__ import annotations

import asyncio
import sys

from kubeop.client import Client
from kubeop.controller import Context, Controller, Request, label_selector
from kubeop.core.resource import ApiResource
from kubeop.manager import Manager, Runtime, Serving

CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")


def main() -> None:
    namespace, identity = sys.argv[1], sys.argv[2]
    slow = float(sys.argv[sys.argv.index("--slow") + 1]) if "--slow" in sys.argv else 0.0

    async def reconcile(req: Request, ctx: Context) -> None:
        cm = await ctx.client.get(CONFIGMAPS, req.name, namespace=req.namespace)
        if cm is None:
            return
        print(f"reconciling {req.name}", flush=True)
        if slow:
            await asyncio.sleep(slow)
        if (cm["metadata"].get("annotations") or {}).get("reconciled-by") != identity:
            await ctx.client.patch(
                CONFIGMAPS,
                req.name,
                {"metadata": {"annotations": {"reconciled-by": identity}}},
                namespace=req.namespace,
            )

    async def run() -> None:
        client = Client.from_kubeconfig(qps=None)
        manager = Manager(
            client,
            name="probe",
            leader_election="--leader-election" in sys.argv,
            leader_election_namespace=namespace,
            lease_duration=6,
            renew_deadline=4,
            retry_period=1,
            serving=Serving(metrics_address=None, health_address=None),
            runtime=Runtime(graceful_shutdown_timeout=10),
        )
        manager.add(
            Controller.for_(CONFIGMAPS, label_selector("app=probe"), namespace=namespace).reconcile(reconcile)
        )

        async def announce() -> None:
            while True:
                if manager.elector is not None and manager.elector.is_leader:
                    print("leading", flush=True)
                    return
                await asyncio.sleep(0.05)

        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        import signal

        loop.add_signal_handler(signal.SIGTERM, stop.set)
        watcher = asyncio.create_task(announce())
        try:
            await manager.start(stop)
        finally:
            watcher.cancel()
            await client.close()
        print("stopped", flush=True)

    asyncio.run(run())


if __name__ == "__main__":
    main()
