"""The Demo operator (seed 000).

For every ``Demo`` (yuerblog.cc/v1) keep exactly one busybox Pod named ``<demo>-pod``, owned by
the Demo: a deleted Pod is created again, and deleting the Demo garbage-collects its Pod. Not
found means deleted; an error means requeue; the Pod is got-or-created, never duplicated.
"""

from __future__ import annotations

from typing import Any

from examples.demo.crd import Demo
from kubeop import ApiResource, Context, Controller, Request, is_being_deleted, set_controller_reference

DEMOS = Demo.resource
PODS = ApiResource("", "v1", "pods", kind="Pod")


def desired_pod(demo: dict[str, Any]) -> dict[str, Any]:
    md = demo["metadata"]
    spec = demo.get("spec") or {}
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{md['name']}-pod",
            "namespace": md["namespace"],
            "labels": {"demo": md["name"]},
        },
        "spec": {
            "containers": [
                {
                    "name": "busybox",
                    "image": spec.get("image", "busybox"),
                    "command": ["sh", "-c", "while true; do sleep 3600; done"],
                }
            ]
        },
    }
    set_controller_reference(demo, pod)
    return pod


async def reconcile(req: Request, ctx: Context) -> None:
    demo = await ctx.client.get(DEMOS, req.name, namespace=req.namespace)
    if demo is None:
        return  # deleted; its Pod is garbage-collected
    want = desired_pod(demo)
    current = await ctx.client.get(PODS, want["metadata"]["name"], namespace=req.namespace)
    if current is not None and is_being_deleted(current):
        return  # the Pod's delete event brings us back once it is gone
    if current is None:
        await ctx.client.create_or_update(want)
        ctx.recorder.event(demo, "Normal", "PodCreated", f"created Pod {want['metadata']['name']}")
    phase = ((current or {}).get("status") or {}).get("phase", "Pending")
    await ctx.client.patch_status(demo, {"pod": want["metadata"]["name"], "phase": phase})


def controller() -> Controller:
    return Controller.for_(DEMOS).owns(PODS).named("demo").reconcile(reconcile)
