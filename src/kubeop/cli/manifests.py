"""``kubeop manifests`` / ``kubeop generate``: config/ from the project's code."""

from __future__ import annotations

from typing import Annotated

import typer

from kubeop.cli.output import Directory, errors_as_messages, fail, project_at, report, say
from kubeop.scaffold import generated, pending, plan_manifests, write_planned

Check = Annotated[
    bool, typer.Option("--check", help="write nothing; fail if config/ is out of date (for CI)")
]


def manifests(directory: Directory = None, check: Check = False) -> None:
    """Write the CRDs, RBAC and samples index under config/ from the models and @rbac_rule declarations."""
    with errors_as_messages():
        project = project_at(directory)
        found = generated(project)
        plans = plan_manifests(project, found)
        if check:
            stale = [c.path for c in pending(project.root, plans) if c.action in ("created", "updated")]
            if stale:
                fail(f"config/ is out of date ({', '.join(stale)}): run kubeop manifests")
            say(f"config/ is up to date ({len(found.models)} kind{'s' if len(found.models) != 1 else ''})")
            return
        changes = write_planned(project.root, plans)
    report(changes)
    kinds = sorted({m.kind for m in found.models})
    say(f"config/ is written for {', '.join(kinds) if kinds else 'no kinds yet'}")


def generate(directory: Directory = None, check: Check = False) -> None:
    """Write everything derived from the code: the same as manifests (models need no generated code)."""
    manifests(directory, check)
