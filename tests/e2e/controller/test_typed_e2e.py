"""The typed path converges what the untyped one does, with the same writes, on the real API server.

The benchmark's Widget operator twice, in one process against one control plane: on dicts in one
namespace, on models (a CustomResource Widget, kubeop.kinds' ConfigMap) in another. Every write
the reconciler client makes is logged (INFO when it changed something, DEBUG when not), so the
two operators' write logs are compared verb by verb.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from pydantic import ConfigDict, Field

from kubeop.controller import Context, Controller, Request, set_controller_reference
from kubeop.core.resource import ApiResource
from kubeop.crd import CamelModel, CustomResource, crd_manifest
from kubeop.kinds import ConfigMap
from kubeop.kinds.meta_v1 import ObjectMeta
from kubeop.manager import Manager, Serving
from kubeop.testing import ControlPlane

from .conftest import client_for, eventually, running

pytestmark = pytest.mark.controlplane
N = 5


class GadgetSpec(CamelModel):
    value: str = ""


class GadgetStatus(CamelModel):
    model_config = ConfigDict(extra="allow")

    observed_generation: int | None = None
    config_map: str | None = None


class Gadget(CustomResource, group="typed.e2e.kubeop.dev", version="v1", subresources=["status"]):
    spec: GadgetSpec = Field(default_factory=GadgetSpec)
    status: GadgetStatus | None = None


GADGETS = ApiResource("typed.e2e.kubeop.dev", "v1", "gadgets", kind="Gadget")
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")


async def untyped(req: Request, ctx: Context) -> None:
    gadget = await ctx.client.get(GADGETS, req.name, namespace=req.namespace)
    if gadget is None:
        return
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": req.name, "namespace": req.namespace},
        "data": {"value": gadget["spec"]["value"]},
    }
    set_controller_reference(gadget, cm)
    await ctx.client.create_or_update(cm)
    await ctx.client.patch_status(
        gadget, {"observedGeneration": gadget["metadata"]["generation"], "configMap": req.name}
    )


async def typed(req: Request, ctx: Context) -> None:
    gadget = await ctx.client.get(Gadget, req.name, namespace=req.namespace)
    if gadget is None:
        return
    cm = ConfigMap(
        metadata=ObjectMeta(name=req.name, namespace=req.namespace), data={"value": gadget.spec.value}
    )
    set_controller_reference(gadget, cm)
    await ctx.client.create_or_update(cm)
    await ctx.client.patch_status(
        gadget, {"observedGeneration": gadget.metadata.generation, "configMap": req.name}
    )


class Writes(logging.Handler):
    """The reconciler client's write log, per namespace: ["created ConfigMap", ...]."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.by_namespace: dict[str, list[str]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        # ReconcilerClient logs "%s %s %s" (verb, kind, namespace/name), ": unchanged" at DEBUG.
        if not str(record.msg).startswith("%s %s %s") or not isinstance(record.args, tuple):
            return
        verb, kind, ref = record.args[:3]
        entry = f"{verb} {kind}" + (" (unchanged)" if "unchanged" in str(record.msg) else "")
        self.by_namespace.setdefault(str(ref).split("/")[0], []).append(entry)


def _manager(client: Any, name: str, ns: str, model: Any, reconcile: Any) -> Manager:
    manager = Manager(client, name=name, serving=Serving(metrics_address=None, health_address=None))
    manager.add(
        Controller.for_(model, namespace=ns)
        .owns(CONFIGMAPS if model is GADGETS else ConfigMap)
        .reconcile(reconcile)
    )
    return manager


async def test_typed_and_untyped_operators_converge_alike(
    control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.install_crds([crd_manifest(Gadget)])
    typed_ns = f"{namespace}-t"
    control_plane.create_namespace(typed_ns)
    writes = Writes()
    log = logging.getLogger("kubeop.controller")
    level = log.level
    log.addHandler(writes)
    log.setLevel(logging.DEBUG)
    try:
        async with (
            client_for(control_plane.kubeconfig_path) as api,
            client_for(control_plane.kubeconfig_path) as c1,
            client_for(control_plane.kubeconfig_path) as c2,
            running(_manager(c1, "untyped", namespace, GADGETS, untyped)),
            running(_manager(c2, "typed", typed_ns, Gadget, typed)),
        ):
            for ns in (namespace, typed_ns):
                for i in range(N):
                    body = {"apiVersion": Gadget.api_version, "kind": "Gadget", "spec": {"value": "one"}}
                    await api.create({**body, "metadata": {"name": f"g{i}", "namespace": ns}})

            async def converged(value: str, generation: int) -> bool:
                for ns in (namespace, typed_ns):
                    for i in range(N):
                        cm = await api.get_or_none(CONFIGMAPS, f"g{i}", namespace=ns)
                        g = await api.get(GADGETS, f"g{i}", namespace=ns)
                        status = g.get("status") or {}
                        if cm is None or cm.get("data") != {"value": value}:
                            return False
                        if status.get("observedGeneration") != generation:
                            return False
                return True

            await eventually(lambda: converged("one", 1), 30, "both operators created their ConfigMaps")
            for ns in (namespace, typed_ns):
                for i in range(N):
                    await api.patch(GADGETS, f"g{i}", {"spec": {"value": "two"}}, namespace=ns)
            await eventually(lambda: converged("two", 2), 30, "both operators updated their ConfigMaps")

            for i in range(N):
                a = await api.get(CONFIGMAPS, f"g{i}", namespace=namespace)
                b = await api.get(CONFIGMAPS, f"g{i}", namespace=typed_ns)
                assert a["data"] == b["data"]
                ref_a, ref_b = a["metadata"]["ownerReferences"], b["metadata"]["ownerReferences"]
                assert [{**r, "uid": ""} for r in ref_a] == [{**r, "uid": ""} for r in ref_b]
                ga = await api.get(GADGETS, f"g{i}", namespace=namespace)
                gb = await api.get(GADGETS, f"g{i}", namespace=typed_ns)
                assert ga["status"] == gb["status"]
    finally:
        log.removeHandler(writes)
        log.setLevel(level)
        control_plane.delete_namespace(typed_ns)
    untyped_writes = sorted(writes.by_namespace.get(namespace, []))
    typed_writes = sorted(writes.by_namespace.get(typed_ns, []))
    assert untyped_writes, writes.by_namespace
    assert typed_writes == untyped_writes
    assert untyped_writes.count("created ConfigMap") == N
    assert untyped_writes.count("updated ConfigMap") == N
