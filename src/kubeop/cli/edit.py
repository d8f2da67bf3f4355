"""``kubeop edit``: change how the project is laid out (kubebuilder's ``edit``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from kubeop.cli.output import Directory, errors_as_messages, fail, project_at, say

__all__ = ["edit"]


def edit(
    multigroup: Annotated[
        bool | None,
        typer.Option(
            "--multigroup/--no-multigroup",
            help="one package per API group: new APIs go to api/<group>/<version>/, their controllers to "
            "controllers/<group>/, so a kind may exist in several groups",
        ),
    ] = None,
    directory: Directory = None,
) -> None:
    """Change the project's layout: --multigroup puts new APIs under api/<group>/<version>/."""
    if multigroup is None:
        fail("nothing to change: pass --multigroup or --no-multigroup")
    with errors_as_messages():
        project = project_at(directory)
        if project.multigroup == multigroup:
            say(f"the project is {'already' if multigroup else 'not'} multigroup: nothing to do")
            return
        if not multigroup and len({r.full_group for r in project.resources if r.api}) > 1:
            fail(
                "the project has APIs in several groups, which only the multigroup layout keeps apart: "
                "remove the other groups' APIs first, or keep --multigroup"
            )
        replace(project, multigroup=multigroup).save()
    say(f"updated PROJECT (multigroup: {'true' if multigroup else 'false'})")
    if multigroup and project.resources:
        say(
            "Existing APIs stay where they are (PROJECT records their modules); new ones go to "
            f"{project.package}/api/<group>/<version>/ and {project.package}/controllers/<group>/. "
            "To move an existing API, move its files and update its path in PROJECT."
        )
