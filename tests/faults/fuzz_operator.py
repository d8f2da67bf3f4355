"""The reconciler of the fuzzed-spec scenario, as a process (run by ``support.OperatorProcess``).

    KUBECONFIG=... python fuzz_operator.py --namespace NS [--workers N]

Reconciles Gadgets (``fuzz_model.py``) read as typed models from the cache: ``mode: fail``
raises (a retried error: the controller must back off), ``replicas: 7`` raises a TerminalError
(not retried), anything else gets ``status.phase: Ready`` and ``observedGeneration``.

stdout: ``metrics PORT``, ``synced``, then ``r NAME MONOTONIC`` at the start of every reconcile
(the system-wide monotonic clock, comparable with the test's), and ``stopped``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import time

from fuzz_model import TERMINAL_REPLICAS, Gadget  # type: ignore[import-not-found,unused-ignore]

from kubeop.controller import Context, Controller, Request, TerminalError
from kubeop.manager import Manager, Serving


async def reconcile(req: Request, ctx: Context) -> None:
    print(f"r {req.name} {time.monotonic():.4f}", flush=True)
    gadget = await ctx.client.get(Gadget, req.name, namespace=req.namespace)
    if gadget is None:
        return
    if gadget.spec.mode == "fail":
        raise RuntimeError(f"gadget {req.name}: mode 'fail' always fails")
    if gadget.spec.replicas == TERMINAL_REPLICAS:
        raise TerminalError(f"gadget {req.name}: {TERMINAL_REPLICAS} replicas are not supported")
    await ctx.client.patch_status(
        gadget, {"observedGeneration": gadget.metadata.generation, "phase": "Ready"}
    )


async def run(args: argparse.Namespace) -> None:
    manager = Manager(
        name="fuzz-operator", serving=Serving(metrics_address="127.0.0.1:0", health_address=None)
    )
    manager.add(
        Controller.for_(Gadget, namespace=args.namespace).max_concurrent(args.workers).reconcile(reconcile)
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    parent = os.getppid()

    async def announce() -> None:
        while not manager.servers:  # noqa: ASYNC110 - the manager offers no event for it
            await asyncio.sleep(0.01)
        print(f"metrics {manager.servers[0].port}", flush=True)
        while not manager._synced:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        print("synced", flush=True)

    async def orphaned() -> None:
        while os.getppid() == parent:  # noqa: ASYNC110
            await asyncio.sleep(0.5)
        os._exit(3)

    helpers = [asyncio.create_task(announce()), asyncio.create_task(orphaned())]
    try:
        await manager.start(stop)
    finally:
        for task in helpers:
            task.cancel()
    print("stopped", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--log-level", default="WARNING")
    args, _ = parser.parse_known_args()
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s.%(msecs)03d %(levelname)s %(name)s %(message)s",
        datefmt="%H:%M:%S",
    )
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
