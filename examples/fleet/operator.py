"""The Widget fleet operator: one controller, declared once, run against every cluster.

Each Widget owns a ConfigMap of its name holding ``spec.value`` and the name of the cluster that
wrote it (``req.cluster``); the Widget's status names both. ``ctx.client`` is the client of the
Widget's own cluster, so nothing here knows how many clusters there are.
"""

from __future__ import annotations

from examples.fleet.crd import Widget
from kubeop import Context, Controller, Request
from kubeop.controller import set_controller_reference
from kubeop.core.resource import ApiResource

WIDGETS = Widget.resource
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")


async def reconcile(req: Request, ctx: Context) -> None:
    widget = await ctx.client.get(WIDGETS, req.name, namespace=req.namespace)
    if widget is None:
        return  # deleted: its ConfigMap is garbage-collected
    value = (widget.get("spec") or {}).get("value", "")
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": req.name, "namespace": req.namespace},
        "data": {"value": value, "cluster": req.cluster},
    }
    set_controller_reference(widget, cm)
    await ctx.client.create_or_update(cm)
    status = {
        "configMap": req.name,
        "cluster": req.cluster,
        "observedGeneration": widget["metadata"]["generation"],
    }
    if widget.get("status") != status:
        await ctx.client.patch_status(widget, status)


def controller() -> Controller:
    return Controller.for_(WIDGETS).owns(CONFIGMAPS).named("widget").reconcile(reconcile)
