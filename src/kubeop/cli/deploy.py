"""``kubeop deploy`` / ``kubeop undeploy``: the operator in the cluster, from config/default."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from kubeop.cli.cluster_ops import apply_all, connect, delete_all, wait_available
from kubeop.cli.output import Context, Directory, Kubeconfig, errors_as_messages, project_at, say
from kubeop.scaffold import Project, build_kustomization

Wait = Annotated[bool, typer.Option(help="wait until the operator is available (deploy) or gone (undeploy)")]
Timeout = Annotated[float, typer.Option(help="seconds to wait for the cluster")]


def _objects(project: Project, image: str | None) -> list[dict[str, Any]]:
    return build_kustomization(
        project.root / "config" / "default", images={"controller": image} if image else None
    )


def deploy(
    image: Annotated[
        str | None, typer.Option(help="the operator's image (default: config/manager's)")
    ] = None,
    directory: Directory = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    wait: Wait = False,
    timeout: Timeout = 120,
) -> None:
    """Apply config/default: namespace, CRDs, service account, RBAC, manager Deployment, metrics Service."""
    with errors_as_messages():
        project = project_at(directory)
        objs = _objects(project, image)
        names = project.names
        deployments = [o for o in objs if o.get("kind") == "Deployment"]

        async def run() -> None:
            async with connect(kubeconfig, context) as client:
                await apply_all(client, objs, timeout=timeout)
                if wait:
                    for dep in deployments:
                        md = dep["metadata"]
                        say(f"waiting for Deployment {md['name']} to be available ...")
                        took = await wait_available(client, md["name"], md["namespace"], timeout=timeout)
                        say(f"  available ({took:.1f} s)")

        asyncio.run(run())
    images = sorted(
        {c.get("image", "") for d in deployments for c in d["spec"]["template"]["spec"]["containers"]}
    )
    say(f"deployed {names.name} ({len(objs)} objects) to namespace {names.namespace}: {', '.join(images)}")


def undeploy(
    directory: Directory = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    wait: Wait = False,
    timeout: Timeout = 120,
) -> None:
    """Delete what deploy applied, CRDs included (and so every object of the project's kinds)."""
    with errors_as_messages():
        project = project_at(directory)
        objs = _objects(project, None)

        async def run() -> int:
            async with connect(kubeconfig, context) as client:
                return await delete_all(client, objs, wait=wait, timeout=timeout)

        deleted = asyncio.run(run())
    say(f"undeployed {project.names.name} ({deleted} objects deleted)")
