"""The benchmark operator on kubeop's typed path: the same reconcile as kubeop_operator.py, with a
CustomResource model for the Widget and kubeop.kinds' ConfigMap instead of dicts.

Run: KUBECONFIG=... python kubeop_typed_operator.py [workers]
"""

from __future__ import annotations

import logging
import os
import sys

from pydantic import ConfigDict, Field

from kubeop.controller import Context, Controller, Request, set_controller_reference
from kubeop.crd import CamelModel, CustomResource
from kubeop.kinds import ConfigMap
from kubeop.kinds.meta_v1 import ObjectMeta
from kubeop.manager import Manager


class WidgetSpec(CamelModel):
    value: str = ""


class WidgetStatus(CamelModel):
    model_config = ConfigDict(extra="allow")

    observed_generation: int | None = None
    config_map: str | None = None


class Widget(CustomResource, group="bench.kubeop.dev", version="v1", subresources=["status"]):
    spec: WidgetSpec = Field(default_factory=WidgetSpec)
    status: WidgetStatus | None = None


async def reconcile(req: Request, ctx: Context) -> None:
    widget = await ctx.client.get(Widget, req.name, namespace=req.namespace)
    if widget is None:
        return
    cm = ConfigMap(
        metadata=ObjectMeta(name=req.name, namespace=req.namespace),
        data={"value": widget.spec.value},
    )
    set_controller_reference(widget, cm)
    await ctx.client.create_or_update(cm)
    await ctx.client.patch_status(
        widget, {"observedGeneration": widget.metadata.generation, "configMap": req.name}
    )


def main() -> None:
    logging.basicConfig(level=logging.WARNING)
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    resync = float(os.environ.get("BENCH_RESYNC", "0"))
    manager = Manager(name="widget-operator", metrics_address=None, health_address=None, resync_period=resync)
    manager.add(Controller.for_(Widget).owns(ConfigMap).max_concurrent(workers).reconcile(reconcile))
    print("ready", flush=True)
    profile = os.environ.get("BENCH_PROFILE")
    if profile:  # cProfile the whole run; stats are written on SIGTERM
        import cProfile

        cProfile.runctx("manager.run()", globals(), {"manager": manager}, profile)
    else:
        manager.run()


if __name__ == "__main__":
    main()
