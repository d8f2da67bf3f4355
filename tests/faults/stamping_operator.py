"""``widget_operator.py`` with its writes signed, for the leader-failover and soak scenarios.

    FAULTS_WRITER=alpha KUBECONFIG=... python stamping_operator.py --namespace NS [widget_operator's options]

Reconciles exactly as ``widget_operator.py`` does, and adds ``writer: $FAULTS_WRITER`` to every
ConfigMap's data and every Widget's status it writes: a watch on the two kinds then tells which
process made each write, ordered by resourceVersion (the same order as the lease's own changes).
The stamp is constant per process, so compare-before-write still makes the reconcile idempotent.

With ``FAULTS_EVENTS=1`` it also records a Kubernetes Event (``Normal``, ``Synced``, the same note
every time: one series per Widget) whenever it created or updated a ConfigMap, so the event
recorder's bookkeeping is exercised. Its ``/metrics`` has one more series,
``faults_watch_events_total``: every watch event its informers delivered (adds, updates, deletes).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from prometheus_client import Counter

from kubeop.cache import FuncHandler, SharedInformerFactory
from kubeop.controller import Context, Request, set_controller_reference
from kubeop.manager import Manager

wo: Any = importlib.import_module("widget_operator")  # the script next to this one

WRITER = os.environ.get("FAULTS_WRITER", "")
EVENTS = os.environ.get("FAULTS_EVENTS", "") == "1"


async def reconcile(req: Request, ctx: Context) -> None:
    widget = await ctx.client.get(wo.WIDGETS, req.name, namespace=req.namespace)
    if widget is None or widget["metadata"].get("deletionTimestamp"):
        return
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": req.name, "namespace": req.namespace, "labels": {wo.OWNER_LABEL: req.name}},
        "data": {"value": (widget.get("spec") or {}).get("value", ""), "writer": WRITER},
    }
    set_controller_reference(widget, cm)
    action, _ = await ctx.client.create_or_update(cm)
    if EVENTS and action != "unchanged":
        ctx.recorder.event(widget, "Normal", "Synced", "ConfigMap is up to date")
    await ctx.client.patch_status(
        widget,
        {"observedGeneration": widget["metadata"]["generation"], "configMap": req.name, "writer": WRITER},
    )


class CountingManager(Manager):
    """The manager, with ``faults_watch_events_total`` on its /metrics."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        global WATCH_EVENTS
        WATCH_EVENTS = Counter(
            "faults_watch_events_total",
            "Watch events delivered by the operator's informers",
            registry=self.metrics.registry,
        )


WATCH_EVENTS: Counter | None = None
_counted: set[int] = set()
_informer = SharedInformerFactory.informer


def _counting_informer(self: SharedInformerFactory, *args: Any, **kwargs: Any) -> Any:
    informer = _informer(self, *args, **kwargs)
    if id(informer) not in _counted and WATCH_EVENTS is not None:
        _counted.add(id(informer))
        inc = WATCH_EVENTS.inc
        informer.add_event_handler(
            FuncHandler(
                on_add=lambda obj, initial: inc(),
                on_update=lambda old, new: inc(),
                on_delete=lambda obj: inc(),
            )
        )
    return informer


SharedInformerFactory.informer = _counting_informer  # type: ignore[method-assign]
wo.reconcile = reconcile
wo.Manager = CountingManager

if os.environ.get("FAULTS_TRACEMALLOC"):  # a memory hunt: SIGUSR1 prints the top allocations
    import signal
    import sys
    import tracemalloc

    tracemalloc.start(int(os.environ["FAULTS_TRACEMALLOC"]))
    _snapshots: list[tracemalloc.Snapshot] = []

    def _dump(*_: Any) -> None:
        snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        stats = snap.compare_to(_snapshots[-1], "traceback") if _snapshots else snap.statistics("traceback")
        _snapshots[:] = [snap]
        print(
            f"==== tracemalloc: {sum(s.size for s in snap.statistics('filename')) / 2**20:.1f} MB",
            file=sys.stderr,
        )
        for stat in stats[:25]:
            print(stat, file=sys.stderr)
            for line in stat.traceback.format()[-8:]:
                print("   ", line, file=sys.stderr)
        sys.stderr.flush()

    signal.signal(signal.SIGUSR1, _dump)

if __name__ == "__main__":
    wo.main()
