"""``kubeop manifests`` / ``kubeop generate``: config/ from the project's code."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from kubeop.cli.helm import helm_manifests
from kubeop.cli.output import (
    Directory,
    errors_as_messages,
    fail,
    fail_if_stale,
    move_namespace,
    project_at,
    report,
    say,
)
from kubeop.scaffold import (
    find_helm_project,
    generated,
    plan_manifests,
    write_planned,
)
from kubeop.scaffold.project import check_webhook_certs

Check = Annotated[
    bool, typer.Option("--check", help="write nothing; fail if config/ is out of date (for CI)")
]


Namespace = Annotated[
    str | None,
    typer.Option(
        help="deploy the operator to this namespace from now on (recorded in PROJECT; default: as recorded)"
    ),
]


WebhookCerts = Annotated[
    str | None,
    typer.Option(
        help="where the webhook certificate comes from in the cluster: self-managed (a Secret the operator "
        "keeps) or cert-manager (recorded in PROJECT; default: as recorded, else self-managed)"
    ),
]


def manifests(
    directory: Directory = None,
    check: Check = False,
    namespace: Namespace = None,
    webhook_certs: WebhookCerts = None,
) -> None:
    """Write the CRDs, RBAC and samples index under config/ from the models and @rbac_rule declarations."""
    with errors_as_messages():
        helm = find_helm_project(directory or Path.cwd())
        if helm is not None:
            return helm_manifests(helm, check=check, namespace=namespace)
        project = project_at(directory)
        project, moved = move_namespace(project, namespace, check=check)
        if webhook_certs is not None and webhook_certs != project.webhook_certs:
            check_webhook_certs(webhook_certs)
            if check:
                fail("--check writes nothing, so it cannot change the certificates: drop --webhook-certs")
            changed = (
                f"webhook certificates: {project.webhook_certs} -> {webhook_certs} (recorded in PROJECT)"
            )
            moved = f"{moved}\n{changed}" if moved else changed
            project = replace(project, webhook_certs=webhook_certs)
        found = generated(project)
        plans = plan_manifests(project, found)
        if check:
            fail_if_stale(project.root, plans)
            say(f"config/ is up to date ({len(found.models)} kind{'s' if len(found.models) != 1 else ''})")
            return
        if moved:
            project.save()
            say(moved)
        changes = write_planned(project.root, plans)
    report(changes)
    default = project.root / "config" / "default" / "kustomization.yaml"
    if any(c.path == "config/default/kustomization.yaml" and c.action == "kept" for c in changes) and (
        f"namespace: {project.namespace}\n" not in default.read_text()
    ):
        say(
            "config/default/kustomization.yaml is yours (its generated header is gone): it decides the "
            f"deploy namespace, so give it 'namespace: {project.namespace}' "
            "(or delete it: manifests rewrites it)"
        )
    kinds = sorted({m.kind for m in found.models})
    say(f"config/ is written for {', '.join(kinds) if kinds else 'no kinds yet'}")


def generate(
    directory: Directory = None,
    check: Check = False,
    namespace: Namespace = None,
    webhook_certs: WebhookCerts = None,
) -> None:
    """Write everything derived from the code: the same as manifests (models need no generated code)."""
    manifests(directory, check, namespace, webhook_certs)
