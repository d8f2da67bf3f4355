"""The fault suite's Widget operator, run as a separate process by ``support.OperatorProcess``.

    KUBECONFIG=... python widget_operator.py --namespace NS [--workers 16]
        [--leader-election [--lease-duration 6 --renew-deadline 4 --retry-period 1]]
        [--log-level INFO] [--resync SECONDS] [--webhook-cert-dir DIR]

Each Widget (``faults.kubeop.dev/v1``) in NS gets a ConfigMap of the same name that it controls
(controller reference, so the garbage collector deletes it with its Widget), with
``data.value = spec.value`` and the label ``faults.kubeop.dev/widget=NAME``; then
``status.observedGeneration = metadata.generation`` and ``status.configMap = NAME``. A deleted
Widget needs nothing from the operator: its ConfigMap is garbage-collected. Reads come from the
cache, writes are compared first (``create_or_update``, ``patch_status``): in a steady state the
operator makes no request.

One line on stdout per event, for the harness:

    metrics PORT   /metrics (controller-runtime's series, rest_client_requests_total among them)
                   listens on 127.0.0.1:PORT
    leading ID     (with --leader-election) this process holds the lease, as identity ID
    webhook PORT   (with --webhook-cert-dir) the admission webhook server listens on
                   https://127.0.0.1:PORT with the directory's certificate; it serves ``guard``:
                   ConfigMaps labelled ``faults.kubeop.dev/guarded=yes`` are denied when their
                   data has a key ``deny``
    synced         every cache has synced; reconciling
    lists KIND N   the KIND informer (widgets, configmaps) has completed N lists: the initial one,
                   then one per relist (after a 410 Gone)
    stopped        a graceful shutdown (SIGTERM) has finished

Logs (stderr) carry wall-clock timestamps with milliseconds, so they can be lined up with the
harness's own timeline. The process exits by itself when its parent dies.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from typing import Any

from kubeop.controller import Context, Controller, Request, set_controller_reference
from kubeop.core.resource import ApiResource
from kubeop.manager import Manager, Runtime, Serving
from kubeop.webhook import Denied, Webhooks, validating

GROUP = "faults.kubeop.dev"
WIDGETS = ApiResource(GROUP, "v1", "widgets", kind="Widget")
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
OWNER_LABEL = f"{GROUP}/widget"
GUARDED_LABEL = f"{GROUP}/guarded"
# WIDGET_OPERATOR_TRACE=1: log every reconcile's outcome (for finding where time goes).
TRACE = os.environ.get("WIDGET_OPERATOR_TRACE") == "1"
trace = logging.getLogger("widget-operator.trace")


@validating(
    CONFIGMAPS,
    name="guard.faults.kubeop.dev",
    timeout_seconds=10,
    object_selector={"matchLabels": {GUARDED_LABEL: "yes"}},
)
async def guard(new: dict[str, Any]) -> None:
    if "deny" in (new.get("data") or {}):
        raise Denied("data.deny is set")


async def reconcile(req: Request, ctx: Context) -> None:
    if TRACE:
        try:
            await _reconcile(req, ctx)
        except Exception as exc:
            trace.info("reconcile %s failed: %s", req.name, type(exc).__name__)
            raise
        trace.info("reconcile %s ok", req.name)
    else:
        await _reconcile(req, ctx)


async def _reconcile(req: Request, ctx: Context) -> None:
    widget = await ctx.client.get(WIDGETS, req.name, namespace=req.namespace)
    if widget is None or widget["metadata"].get("deletionTimestamp"):
        return  # gone or going: the garbage collector deletes the ConfigMap
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": req.name, "namespace": req.namespace, "labels": {OWNER_LABEL: req.name}},
        "data": {"value": (widget.get("spec") or {}).get("value", "")},
    }
    set_controller_reference(widget, cm)
    await ctx.client.create_or_update(cm)
    await ctx.client.patch_status(
        widget, {"observedGeneration": widget["metadata"]["generation"], "configMap": req.name}
    )


def say(line: str) -> None:
    print(line, flush=True)


async def run(args: argparse.Namespace) -> None:
    manager = Manager(
        name="widget-operator",
        leader_election=args.leader_election,
        leader_election_id="widget-operator",
        leader_election_namespace=args.namespace,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
        webhooks=Webhooks([guard]) if args.webhook_cert_dir else None,
        serving=Serving(
            metrics_address="127.0.0.1:0",
            health_address=None,
            webhook_address="127.0.0.1:0",
            webhook_cert_dir=args.webhook_cert_dir,
        ),
        runtime=Runtime(graceful_shutdown_timeout=10, resync_period=args.resync),
    )
    manager.add(
        Controller.for_(WIDGETS, namespace=args.namespace)
        .owns(CONFIGMAPS)
        .max_concurrent(args.workers)
        .reconcile(reconcile)
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    parent = os.getppid()

    async def announce() -> None:
        # The manager offers no events for these: poll (a few checks, once per start).
        while not manager.servers:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        say(f"metrics {manager.servers[0].port}")
        if args.webhook_cert_dir:
            while manager.webhook_server is None or not manager.webhook_server.ready():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            say(f"webhook {manager.webhook_server.port}")
        if args.leader_election:
            while manager.elector is None or not manager.elector.is_leader:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
            say(f"leading {manager.elector.identity}")
        while not manager._synced:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        say("synced")
        assert manager.cache is not None
        lists: dict[str, int] = {}
        while True:
            for informer in manager.cache.informers:
                kind = informer.source.description.split()[0].split(".")[0]
                done = informer.watcher.stats.lists_completed
                if lists.get(kind) != done:
                    lists[kind] = done
                    say(f"lists {kind} {done}")
            await asyncio.sleep(0.05)

    async def orphaned() -> None:
        while os.getppid() == parent:  # noqa: ASYNC110
            await asyncio.sleep(0.5)
        logging.getLogger("widget-operator").error("the harness died; exiting")
        os._exit(3)

    helpers = [asyncio.create_task(announce()), asyncio.create_task(orphaned())]
    try:
        await manager.start(stop)
    finally:
        for task in helpers:
            task.cancel()
    say("stopped")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--leader-election", action="store_true")
    parser.add_argument("--lease-duration", type=float, default=6.0)
    parser.add_argument("--renew-deadline", type=float, default=4.0)
    parser.add_argument("--retry-period", type=float, default=1.0)
    parser.add_argument("--resync", type=float, default=0.0)
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("--webhook-cert-dir", default=None)
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
