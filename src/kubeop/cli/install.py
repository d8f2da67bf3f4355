"""``kubeop install`` / ``kubeop uninstall``: the project's CRDs in the cluster of the kubeconfig."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from kubeop.cli.cluster_ops import apply_all, connect, delete_all
from kubeop.cli.output import Context, Directory, Kubeconfig, any_project_at, errors_as_messages, fail, say
from kubeop.scaffold import HelmProject, Project, build_kustomization, stale_helm_manifests, stale_manifests

Timeout = Annotated[float, typer.Option(help="seconds to wait for the cluster")]


def _crds(project: Project | HelmProject) -> list[dict[str, Any]]:
    crds = [
        o
        for o in build_kustomization(project.root / "config" / "crd")
        if o.get("kind") == "CustomResourceDefinition"
    ]
    if not crds:
        how = "kubeop create api --helm-chart" if isinstance(project, HelmProject) else "kubeop create api"
        fail(f"config/crd has no CRDs: add a kind ({how}) and run kubeop manifests")
    return crds


def install(
    directory: Directory = None, kubeconfig: Kubeconfig = None, context: Context = None, timeout: Timeout = 60
) -> None:
    """Install the project's CRDs (config/crd) and wait until they are served."""
    with errors_as_messages():
        project = any_project_at(directory)
        crds = _crds(project)
        stale = (
            stale_helm_manifests(project)
            if isinstance(project, HelmProject)
            else stale_manifests(project.root)
        )
        if any(path.startswith("config/crd/") for path in stale):
            say("note: config/crd is older than the models; run kubeop manifests first (make install does)")

        async def run() -> None:
            async with connect(kubeconfig, context) as client:
                await apply_all(client, crds, timeout=timeout)

        asyncio.run(run())
    say(f"installed {len(crds)} CRD{'s' if len(crds) != 1 else ''}")


def uninstall(
    directory: Directory = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    wait: Annotated[bool, typer.Option(help="wait until the CRDs (and their objects) are gone")] = True,
    timeout: Timeout = 120,
) -> None:
    """Delete the project's CRDs, and with them every object of their kinds."""
    with errors_as_messages():
        project = any_project_at(directory)
        crds = _crds(project)

        async def run() -> int:
            async with connect(kubeconfig, context) as client:
                return await delete_all(client, crds, wait=wait, timeout=timeout)

        deleted = asyncio.run(run())
    say(
        f"uninstalled {deleted} CRD{'s' if deleted != 1 else ''}"
        if deleted
        else "no CRD of this project was installed"
    )
