"""``kubeop deploy`` / ``kubeop undeploy``: the operator in the cluster, from config/default."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from kubeop.cli.cluster_ops import apply_all, connect, delete_all, in_apply_order, wait_available
from kubeop.cli.output import Context, Directory, Kubeconfig, any_project_at, errors_as_messages, say
from kubeop.crd import render_yaml
from kubeop.scaffold import HelmProject, Project, build_kustomization

Wait = Annotated[bool, typer.Option(help="wait until the operator is available (deploy) or gone (undeploy)")]
Timeout = Annotated[float, typer.Option(help="seconds to wait for the cluster")]


def _objects(project: Project | HelmProject, image: str | None) -> list[dict[str, Any]]:
    return build_kustomization(
        project.root / "config" / "default", images={"controller": image} if image else None
    )


def _namespaces(objs: list[dict[str, Any]]) -> str:
    """The namespaces the objects go to, as applied (what deploy reports)."""
    found = sorted(
        {str(o["metadata"]["namespace"]) for o in objs if (o.get("metadata") or {}).get("namespace")}
    )
    return ", ".join(found) or "(none: cluster-scoped objects only)"


def deploy(
    image: Annotated[
        str | None, typer.Option(help="the operator's image (default: config/manager's)")
    ] = None,
    directory: Directory = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    wait: Wait = False,
    timeout: Timeout = 120,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="print (YAML, in apply order) what deploy would apply; apply nothing"),
    ] = False,
) -> None:
    """Apply config/default: namespace, CRDs, service account, RBAC, manager Deployment, metrics Service."""
    with errors_as_messages():
        project = any_project_at(directory)
        objs = in_apply_order(_objects(project, image))
        names = project.names
        if dry_run:
            typer.echo(render_yaml(objs), nl=False)
            say(
                f"dry run: {names.name} ({len(objs)} objects) to namespace {_namespaces(objs)}; "
                "nothing applied"
            )
            return
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
    say(f"deployed {names.name} ({len(objs)} objects) to namespace {_namespaces(objs)}: {', '.join(images)}")


def undeploy(
    directory: Directory = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    wait: Wait = False,
    timeout: Timeout = 120,
) -> None:
    """Delete what deploy applied, CRDs included (and so every object of the project's kinds)."""
    with errors_as_messages():
        project = any_project_at(directory)
        objs = _objects(project, None)

        async def run() -> int:
            async with connect(kubeconfig, context) as client:
                return await delete_all(client, objs, wait=wait, timeout=timeout)

        deleted = asyncio.run(run())
    say(f"undeployed {project.names.name} ({deleted} objects deleted)")
