"""The Widget operator sharded across processes (``Manager(sharding=Sharding())``), run by
``test_sharding.py``. Same arguments as ``widget_operator.py`` plus:

    --reconcile-log PATH   append "start|end KEY MONOTONIC_NS" per reconcile (CLOCK_MONOTONIC is
                           one clock for every process on the machine): the test checks that no
                           key's reconciles overlap across processes
    --hold SECONDS         each reconcile sleeps this long first (widens any overlap)
    --labels               label mode: ``Sharding(labels=True)``

Prints ``member ID`` once it joined the ring (ID its identity), then ``synced`` as the Widget
operator does.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import signal
import sys
import time
from typing import Any

from kubeop.controller import Context, Controller, Request
from kubeop.manager import Manager, Runtime, Serving, Sharding

wo: Any = importlib.import_module("widget_operator")  # the script next to this one


async def run(args: argparse.Namespace) -> None:
    manager = Manager(
        name="widget-operator",
        leader_election_namespace=args.namespace,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
        sharding=Sharding(labels=args.labels),
        serving=Serving(metrics_address="127.0.0.1:0", health_address=None),
        runtime=Runtime(graceful_shutdown_timeout=10),
    )
    fd = os.open(args.reconcile_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def record(what: str, req: Request) -> None:
        os.write(fd, f"{what} {req.namespace}/{req.name} {time.monotonic_ns()} {os.getpid()}\n".encode())

    async def reconcile(req: Request, ctx: Context) -> None:
        record("start", req)
        try:
            if args.hold:
                await asyncio.sleep(args.hold)
            await wo._reconcile(req, ctx)
        finally:
            record("end", req)

    manager.add(
        Controller.for_(wo.WIDGETS, namespace=args.namespace)
        .owns(wo.CONFIGMAPS)
        .max_concurrent(args.workers)
        .reconcile(reconcile)
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    parent = os.getppid()

    async def announce() -> None:
        while not manager.servers:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        wo.say(f"metrics {manager.servers[0].port}")
        while manager.sharder is None:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        wo.say(f"member {manager.sharder.identity}")
        while not manager._synced:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        wo.say("synced")

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
        os.close(fd)
    wo.say("stopped")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--lease-duration", type=float, default=6.0)
    parser.add_argument("--renew-deadline", type=float, default=4.0)
    parser.add_argument("--retry-period", type=float, default=1.0)
    parser.add_argument("--resync", type=float, default=0.0)
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("--reconcile-log", required=True)
    parser.add_argument("--hold", type=float, default=0.0)
    parser.add_argument("--labels", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s.%(msecs)03d %(levelname)s %(name)s %(message)s",
        datefmt="%H:%M:%S",
    )
    asyncio.run(run(args))


if __name__ == "__main__":
    main()
