"""``kubeop create api``: a kind and its controller in the current project; ``create webhook`` and
``create apiserver`` (a kind served by the project's own aggregated API server)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from kubeop.cli.helm import create_helm_api
from kubeop.cli.output import Directory, errors_as_messages, project_at, report, say
from kubeop.scaffold import create_api, create_apiserver, create_webhook
from kubeop.scaffold.project import check_webhook_certs

app = typer.Typer(
    help="Add to the project: create api, create webhook, create apiserver.",
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
)


@app.command()
def api(
    group: Annotated[
        str,
        typer.Option(
            help="the API group's first part, e.g. webapp (joined with the domain), or the whole group "
            "(webapp.example.com)"
        ),
    ],
    version: Annotated[str, typer.Option(help="the API version: v1, v1beta1, v2alpha1, ...")],
    kind: Annotated[str, typer.Option(help="the CamelCase kind, e.g. Guestbook")],
    plural: Annotated[
        str | None,
        typer.Option(help="the resource name, when the guessed plural is wrong (e.g. people for Person)"),
    ] = None,
    resource: Annotated[bool, typer.Option(help="scaffold the kind's model, sample and tests")] = True,
    controller: Annotated[bool, typer.Option(help="scaffold the kind's controller and register it")] = True,
    namespaced: Annotated[
        bool, typer.Option("--namespaced/--cluster", help="objects live in namespaces, or cluster-wide")
    ] = True,
    external_api_domain: Annotated[
        str | None,
        typer.Option(
            help="with --no-resource: a controller for another operator's kind, of group "
            "<group>.<this domain> (e.g. --group cert-manager --external-api-domain io); built-in "
            "kinds need no flag (--group apps --version v1 --kind Deployment --no-resource)"
        ),
    ] = None,
    directory: Directory = None,
    helm_chart: Annotated[
        Path | None,
        typer.Option(help="in a Helm operator project: serve the kind with this chart directory"),
    ] = None,
) -> None:
    """Add a kind (spec/status model, sample, test) and its controller (reconciler with RBAC declarations)."""
    if helm_chart is not None:
        create_helm_api(
            directory, group=group, version=version, kind=kind, chart=helm_chart, namespaced=namespaced
        )
        return
    with errors_as_messages():
        project = project_at(directory)
        result = create_api(
            project,
            group=group,
            version=version,
            kind=kind,
            resource=resource,
            controller=controller,
            namespaced=namespaced,
            plural=plural or "",
            external_api_domain=external_api_domain or "",
        )
    entry = result.resource
    api_version = f"{entry.full_group}/{entry.version}" if entry.full_group else entry.version
    if result.exists:
        say(f"{kind} ({api_version}) already exists in this project: nothing to do")
        return
    report(result.changes)
    for todo in result.todo:
        say(f"todo: {todo}")
    pkg = project.package
    if entry.external:
        module = result.changes[0].path
        say(
            f"\nA controller for {kind} ({api_version}) is in {module}. "
            "Next: its reconcile, then make manifests run"
        )
        return
    names = entry.names
    say(
        f"\n{kind} ({names.api_version}) is in the project. Next: edit its spec and status in "
        f"{pkg}/api/{version}/{names.module}.py and its reconcile in {pkg}/controllers/{names.module}.py, "
        "then make manifests install run"
    )


@app.command()
def webhook(
    group: Annotated[str, typer.Option(help="the API group's first part, e.g. webapp")],
    version: Annotated[str, typer.Option(help="the version of the kind the webhooks take")],
    kind: Annotated[str, typer.Option(help="the kind, created before with kubeop create api")],
    defaulting: Annotated[bool, typer.Option(help="a defaulting (mutating) webhook")] = False,
    programmatic_validation: Annotated[bool, typer.Option(help="a validating webhook")] = False,
    conversion: Annotated[
        bool, typer.Option(help="a conversion webhook: this version is the hub, the kind's others spokes")
    ] = False,
    webhook_certs: Annotated[
        str | None,
        typer.Option(
            help="the certificate in the cluster: self-managed (a Secret the operator keeps; the default) or "
            "cert-manager (recorded in PROJECT)"
        ),
    ] = None,
    directory: Directory = None,
) -> None:
    """Add webhooks for a kind: handlers on its model, a test, registration in main.py, config/webhook."""
    with errors_as_messages():
        project = project_at(directory)
        if webhook_certs is not None and webhook_certs != project.webhook_certs:
            project = replace(project, webhook_certs=check_webhook_certs(webhook_certs))
            project.save()
        result = create_webhook(
            project,
            group=group,
            version=version,
            kind=kind,
            defaulting=defaulting,
            validation=programmatic_validation,
            conversion=conversion,
        )
    if result.exists:
        say(f"{result.path} already exists: nothing to do")
        return
    report(result.changes)
    for todo in result.todo:
        say(f"todo: {todo}")
    say(f"\nEdit the handlers in {result.path}, then make manifests test run")


@app.command()
def apiserver(
    group: Annotated[
        str, typer.Option(help="the API group's first part, e.g. metrics (joined with the domain)")
    ],
    version: Annotated[str, typer.Option(help="the API version: v1, v1beta1, v1alpha1, ...")],
    kind: Annotated[str, typer.Option(help="the CamelCase kind, e.g. Usage")],
    plural: Annotated[
        str | None, typer.Option(help="the resource name, when the guessed plural is wrong")
    ] = None,
    namespaced: Annotated[
        bool, typer.Option("--namespaced/--cluster", help="objects live in namespaces, or cluster-wide")
    ] = True,
    directory: Directory = None,
) -> None:
    """Add a kind served by the project's own aggregated API server (an APIService, not a CRD)."""
    with errors_as_messages():
        project = project_at(directory)
        result = create_apiserver(
            project, group=group, version=version, kind=kind, namespaced=namespaced, plural=plural or ""
        )
    if result.exists:
        say(f"{result.path} already exists: nothing to do")
        return
    report(result.changes)
    for todo in result.todo:
        say(f"todo: {todo}")
    say(
        f"\nEdit {kind} in {result.path}, then: kubeop run (serves it from here, behind the cluster's "
        f"API server), or python -m {project.package}.apiserver manifests, and "
        f"python -m {project.package}.apiserver serve --cert-dir DIR"
    )
