"""The Demo operator (seed 000).

For every ``Demo`` (yuerblog.cc/v1) keep exactly one busybox Pod named ``<demo>-pod``, owned by
the Demo: a deleted Pod is created again, and deleting the Demo garbage-collects its Pod. The Pod
is a dependent (:class:`kubeop.Dependent`): kubeop creates it, owns it, watches it and writes
the Demo's conditions; the reconcile adds the Pod's name and phase to the same status write.

Typed: the Demo is read as a :class:`~examples.demo.crd.Demo`, the Pod as
:class:`kubeop.kinds.Pod`, and the Pod is written as one.
"""

from __future__ import annotations

from typing import Any

from examples.demo.crd import Demo
from kubeop import Context, Controller, Dependent, Request
from kubeop.kinds import Pod
from kubeop.kinds.core_v1 import Container, PodSpec
from kubeop.kinds.meta_v1 import ObjectMeta

DEMOS = Demo.resource
PODS = Pod.resource


def desired_pod(demo: Demo, ctx: Any = None) -> Pod:
    name = demo.metadata.name or ""
    return Pod(
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


def running(pod: Pod) -> bool:
    return pod.status is not None and pod.status.phase == "Running"


# --8<-- [start:reconcile]
async def report(req: Request, ctx: Context) -> None:
    """After the Pod's dependent: an Event when it was created, its name and phase in the status
    (written with the conditions, in one status write)."""
    result = ctx.dependents
    if result is None or result.deleting:
        return  # deleted; its Pod is garbage-collected
    state = result.states["pod"]
    pod: Pod | None = state.actual
    if state.action == "created" and pod is not None:
        ctx.recorder.event(result.primary, "Normal", "PodCreated", f"created Pod {pod.metadata.name}")
    phase = (pod.status.phase if pod is not None and pod.status else None) or "Pending"
    result.status.update({"pod": desired_pod(result.primary).metadata.name, "phase": phase})


def controller() -> Controller:
    pod = Dependent(Pod, desired=desired_pod, ready=running)
    return Controller.for_(Demo).dependents(pod).named("demo").reconcile(report)


# --8<-- [end:reconcile]
