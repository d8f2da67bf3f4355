"""``kubeop init``: a new operator project in the current (or given) directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kubeop.cli.helm import init_helm
from kubeop.cli.output import errors_as_messages, fail, report, say
from kubeop.scaffold import init_project


def init(
    domain: Annotated[str, typer.Option(help="the domain of the project's API groups: <group>.<domain>")],
    repo: Annotated[str, typer.Option(help="the project's repository, e.g. github.com/example/my-operator")],
    plugin: Annotated[
        str, typer.Option(help="the kind of operator: python, or helm (a chart per kind, kubeop.helm)")
    ] = "python",
    project_name: Annotated[
        str | None, typer.Option(help="a lower-case DNS label (default: the directory's name)")
    ] = None,
    namespace: Annotated[
        str | None,
        typer.Option(help="where kubeop deploy puts the operator (default: <project-name>-system)"),
    ] = None,
    directory: Annotated[
        Path | None,
        typer.Option("--dir", help="where to create the project (default: the current directory)"),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            help="write into a non-empty directory, replacing only files still as kubeop wrote them"
        ),
    ] = False,
    kubeop_source: Annotated[
        Path | None,
        typer.Option(
            envvar="KUBEOP_SOURCE",
            help="make the project depend on this local kubeop checkout instead of a released kubeop",
        ),
    ] = None,
) -> None:
    """Create a kubebuilder-style operator project: PROJECT, package, config/, Dockerfile, Makefile, tests."""
    root = directory or Path.cwd()
    if plugin == "helm":
        init_helm(root, domain=domain, repo=repo, project_name=project_name, force=force, namespace=namespace)
        return
    with errors_as_messages():
        if kubeop_source is not None and not (kubeop_source / "pyproject.toml").is_file():
            fail(f"--kubeop-source {kubeop_source} is not a kubeop checkout (it has no pyproject.toml)")
        changes = init_project(
            root,
            domain=domain,
            repo=repo,
            project_name=project_name,
            plugin=plugin,
            force=force,
            kubeop_source=str(kubeop_source) if kubeop_source else None,
            namespace=namespace,
        )
    report(changes)
    say(
        f"\nA kubeop project is ready in {root.resolve()}. Next:\n"
        "  kubeop create api --group <group> --version v1 --kind <Kind>\n"
        "  make manifests install run"
    )
