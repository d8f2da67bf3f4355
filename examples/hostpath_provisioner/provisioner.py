"""The hostPath provisioner: PersistentVolumes on demand for the local control plane.

kube-controller-manager's PV controller marks a claim of a StorageClass it cannot provision
itself with ``volume.kubernetes.io/storage-provisioner`` (and, under WaitForFirstConsumer, the
scheduler adds ``volume.kubernetes.io/selected-node``). For every such claim naming
``kubeop.dev/hostpath`` this operator creates a directory under the class's ``path`` parameter
and a PersistentVolume for it, pre-bound to the claim (``claimRef``) and pinned to the selected
node; the PV controller then binds the two. A volume of reclaim policy Delete whose claim is gone
(phase Released) is deleted, and its directory removed.

Two controllers: one for claims (namespaced), one for volumes (cluster-scoped). The PV's name is
``pvc-<claim uid>``, so a retried or repeated reconcile never makes a second volume.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from kubeop import Context, Controller, Request, TerminalError
from kubeop.kinds import PersistentVolume, PersistentVolumeClaim, StorageClass
from kubeop.kinds.core_v1 import (
    HostPathVolumeSource,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    ObjectReference,
    PersistentVolumeSpec,
    VolumeNodeAffinity,
)
from kubeop.kinds.meta_v1 import ObjectMeta

PROVISIONER = "kubeop.dev/hostpath"
PROVISIONER_ANNOTATIONS = (
    "volume.kubernetes.io/storage-provisioner",
    "volume.beta.kubernetes.io/storage-provisioner",
)
SELECTED_NODE = "volume.kubernetes.io/selected-node"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"


def _ours(pvc: PersistentVolumeClaim) -> bool:
    ann = pvc.metadata.annotations or {}
    return any(ann.get(a) == PROVISIONER for a in PROVISIONER_ANNOTATIONS)


async def reconcile_claim(req: Request, ctx: Context) -> None:
    pvc = await ctx.client.get(PersistentVolumeClaim, req.name, namespace=req.namespace)
    if pvc is None or not _ours(pvc) or pvc.metadata.deletion_timestamp:
        return
    spec = pvc.spec
    if spec is None or spec.volume_name:
        return
    if pvc.status is not None and pvc.status.phase not in (None, "Pending"):
        return
    sc = await ctx.client.get(StorageClass, spec.storage_class_name or "")
    if sc is None or sc.provisioner != PROVISIONER:
        return
    base = (sc.parameters or {}).get("path")
    size = ((spec.resources.requests if spec.resources else None) or {}).get("storage")
    if not base or not size:
        what = "its StorageClass has no 'path' parameter" if not base else "it requests no storage"
        ctx.recorder.event(pvc, "Warning", "ProvisioningFailed", f"cannot provision: {what}")
        raise TerminalError(what)
    name = f"pvc-{pvc.metadata.uid}"
    path = Path(base) / name
    await asyncio.to_thread(path.mkdir, parents=True, exist_ok=True)
    node = (pvc.metadata.annotations or {}).get(SELECTED_NODE)
    affinity = None
    if node:
        on_node = NodeSelectorRequirement(key="kubernetes.io/hostname", operator="In", values=[node])
        term = NodeSelectorTerm(match_expressions=[on_node])
        affinity = VolumeNodeAffinity(required=NodeSelector(node_selector_terms=[term]))
    pv = PersistentVolume(
        metadata=ObjectMeta(name=name, annotations={PROVISIONED_BY: PROVISIONER}),
        spec=PersistentVolumeSpec(
            capacity={"storage": size},
            access_modes=spec.access_modes or ["ReadWriteOnce"],
            volume_mode=spec.volume_mode or "Filesystem",
            storage_class_name=sc.metadata.name,
            persistent_volume_reclaim_policy=sc.reclaim_policy or "Delete",
            host_path=HostPathVolumeSource(path=str(path), type="DirectoryOrCreate"),
            claim_ref=ObjectReference(
                api_version="v1",
                kind="PersistentVolumeClaim",
                namespace=pvc.metadata.namespace,
                name=pvc.metadata.name,
                uid=pvc.metadata.uid,
            ),
            node_affinity=affinity,
        ),
    )
    action, _ = await ctx.client.create_or_update(pv)
    if action == "created":
        ctx.log.info("provisioned %s (%s) for %s/%s", name, size, req.namespace, req.name)
        ctx.recorder.event(pvc, "Normal", "Provisioned", f"provisioned volume {name} at {path}")


async def reconcile_volume(req: Request, ctx: Context) -> None:
    pv = await ctx.client.get(PersistentVolume, req.name)
    if pv is None or (pv.metadata.annotations or {}).get(PROVISIONED_BY) != PROVISIONER:
        return
    phase = pv.status.phase if pv.status else None
    if phase != "Released" or pv.spec is None or pv.spec.persistent_volume_reclaim_policy != "Delete":
        return
    if pv.spec.host_path is not None and Path(pv.spec.host_path.path).name == pv.metadata.name:
        await asyncio.to_thread(shutil.rmtree, pv.spec.host_path.path, True)
    if await ctx.client.delete(PersistentVolume, req.name):
        ctx.log.info("deleted released volume %s", req.name)


def controllers() -> list[Controller]:
    return [
        Controller.for_(PersistentVolumeClaim).named("hostpath-claims").reconcile(reconcile_claim),
        Controller.for_(PersistentVolume).named("hostpath-volumes").reconcile(reconcile_volume),
    ]
