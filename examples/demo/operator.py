"""The Demo operator (seed 000).

For every ``Demo`` (yuerblog.cc/v1) keep exactly one busybox Pod named ``<demo>-pod``, owned by
the Demo: a deleted Pod is created again, and deleting the Demo garbage-collects its Pod. Not
found means deleted; an error means requeue; the Pod is got-or-created, never duplicated.

Typed: the Demo is read as a :class:`~examples.demo.crd.Demo`, the Pod as
:class:`kubeop.kinds.Pod`, and the Pod is written as one.
"""

from __future__ import annotations

from examples.demo.crd import Demo
from kubeop import Context, Controller, Request, set_controller_reference
from kubeop.kinds import Pod
from kubeop.kinds.core_v1 import Container, PodSpec
from kubeop.kinds.meta_v1 import ObjectMeta

DEMOS = Demo.resource
PODS = Pod.resource


def desired_pod(demo: Demo) -> Pod:
    name = demo.metadata.name or ""
    pod = Pod(
        metadata=ObjectMeta(name=f"{name}-pod", namespace=demo.metadata.namespace, labels={"demo": name}),
        spec=PodSpec(
            containers=[
                Container(
                    name="busybox",
                    image=demo.spec.image,
                    command=["sh", "-c", "while true; do sleep 3600; done"],
                )
            ]
        ),
    )
    set_controller_reference(demo, pod)
    return pod


# --8<-- [start:reconcile]
async def reconcile(req: Request, ctx: Context) -> None:
    demo = await ctx.client.get(Demo, req.name, namespace=req.namespace)
    if demo is None:
        return  # deleted; its Pod is garbage-collected
    want = desired_pod(demo)
    pod_name = want.metadata.name or ""
    current = await ctx.client.get(Pod, pod_name, namespace=req.namespace)
    if current is not None and current.metadata.deletion_timestamp:
        return  # the Pod's delete event brings us back once it is gone
    if current is None:
        await ctx.client.create_or_update(want)
        ctx.recorder.event(demo, "Normal", "PodCreated", f"created Pod {pod_name}")
    phase = (current.status.phase if current is not None and current.status else None) or "Pending"
    await ctx.client.patch_status(demo, {"pod": pod_name, "phase": phase})


def controller() -> Controller:
    return Controller.for_(Demo).owns(Pod).named("demo").reconcile(reconcile)


# --8<-- [end:reconcile]
