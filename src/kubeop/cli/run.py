"""``kubeop run``: the project's operator, here, against the cluster of the kubeconfig.

The operator runs as ``python -m <package>`` (what the image runs too), replacing this process,
so signals and the exit code are the operator's own. Arguments after ``--`` go to it:
``kubeop run -- --leader-elect --metrics-bind-address 0``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

from kubeop.cli.cluster_ops import connect
from kubeop.cli.output import Directory, Kubeconfig, errors_as_messages, fail, project_at, say
from kubeop.cli.permissions import accesses, denied, identity
from kubeop.crd.rbac import LEASE_VERBS, PolicyRule
from kubeop.scaffold import Project, generated

__all__ = ["run"]

_TRUE = ("1", "true", "yes")


def _flag_value(args: Sequence[str], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


def _leader_election(args: Sequence[str]) -> tuple[bool, str | None]:
    """Whether the operator will elect a leader, and in which namespace if it was told."""
    enabled = os.environ.get("LEADER_ELECT", "false").lower() in _TRUE
    for arg in args:
        if arg == "--leader-elect":
            enabled = True
        elif arg == "--no-leader-elect":
            enabled = False
    namespace = (
        _flag_value(args, "--leader-election-namespace")
        or os.environ.get("LEADER_ELECTION_NAMESPACE")
        or os.environ.get("POD_NAMESPACE")
    )
    return enabled, namespace


async def _check(project: Project, args: Sequence[str], kubeconfig: Path | None) -> None:
    rules = generated(project, command="run").manager_rules()
    elect, le_namespace = _leader_election(args)
    async with connect(kubeconfig, None) as client:
        wanted = accesses(rules)
        if elect:
            lease = PolicyRule(("coordination.k8s.io",), ("leases",), LEASE_VERBS)
            namespace = le_namespace or client.namespace or "default"
            wanted += [
                a for a in accesses([lease], namespace=namespace) if a.verb in ("get", "create", "update")
            ]
        say(f"checking the operator's permissions ({len(wanted)} checks) ...")
        missing = await denied(client, wanted)
        if missing:
            who = await identity(client)
            lines = "\n".join(f"  - {a.describe()}" for a, _ in missing)
            roles = "config/rbac/role.yaml" + (" and leader_election_role.yaml" if elect else "")
            fail(
                f"Forbidden: {who} may not\n{lines}\n"
                f"but the operator's code declares it needs to ({roles}). Bind the generated RBAC to this "
                "identity (kubeop deploy does, for the operator's service account), run with a kubeconfig "
                "that has it, or skip this check with --no-rbac-check"
            )


def run(
    ctx: typer.Context,
    directory: Directory = None,
    kubeconfig: Kubeconfig = None,
    rbac_check: Annotated[
        bool, typer.Option(help="first ask the cluster whether it grants what the code declares")
    ] = True,
) -> None:
    """Run the operator here against the cluster; arguments after -- go to the operator."""
    args = list(ctx.args)
    with errors_as_messages():
        project = project_at(directory)
        if not (project.root / project.package / "__main__.py").is_file():
            fail(f"{project.package}/__main__.py is missing: restore it (kubeop init --force) to run")
        if rbac_check:
            asyncio.run(_check(project, args, kubeconfig))
    env = dict(os.environ)
    if kubeconfig:
        env["KUBECONFIG"] = str(kubeconfig)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(project.root), env.get("PYTHONPATH")) if p)
    command = [sys.executable, "-m", project.package, *args]
    say(f"starting {project.project_name}: python -m {' '.join(command[2:])}")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, command, env)
