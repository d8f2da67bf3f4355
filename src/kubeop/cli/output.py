"""What the project commands print: progress on stderr, errors as one message without a traceback.

Bad input and failed cluster calls end a command with ``error: <what> ...<fix>`` and exit code 1
(:func:`errors_as_messages`). Logging is left unconfigured, so the kubeop library stays quiet
below WARNING.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Annotated, NoReturn, TypeVar

import typer

from kubeop.client import ApiConnectionError, ConfigError
from kubeop.core.errors import ApiError
from kubeop.crd import CRDError
from kubeop.scaffold import (
    Change,
    HelmProject,
    Planned,
    Project,
    ScaffoldError,
    check_namespace,
    find_helm_project,
    find_project,
    pending,
)

__all__ = [
    "Context",
    "Directory",
    "Kubeconfig",
    "any_project_at",
    "errors_as_messages",
    "fail",
    "fail_if_stale",
    "move_namespace",
    "project_at",
    "report",
    "say",
]

Directory = Annotated[Path | None, typer.Option("--dir", help="the project (default: the current one)")]
Kubeconfig = Annotated[
    Path | None,
    typer.Option(
        help="the cluster's kubeconfig (default: $KUBECONFIG, then ~/.kube/config)", show_default=False
    ),
]
Context = Annotated[str | None, typer.Option(help="the kubeconfig context (default: its current one)")]


def say(message: str) -> None:
    """A progress line (stderr, so stdout stays clean for what a command outputs)."""
    typer.echo(message, err=True)


def fail(message: str) -> NoReturn:
    typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)
    raise typer.Exit(1)


@contextmanager
def errors_as_messages() -> Iterator[None]:
    """Turn the errors a user can fix into one clear line and exit code 1."""
    try:
        yield
    except (ScaffoldError, CRDError, ConfigError) as e:
        fail(str(e))
    except ApiError as e:
        fail(f"the API server answered {e.code}{' ' + e.reason if e.reason else ''}: {e}")
    except ApiConnectionError as e:
        fail(f"cannot reach the API server: {e}; is the cluster up (kubeop cluster up) and KUBECONFIG right?")
    except TimeoutError as e:
        fail(str(e))


def project_at(directory: Path | None) -> Project:
    return find_project(directory or Path.cwd())


def any_project_at(directory: Path | None) -> Project | HelmProject:
    """The project around ``directory``: a Python one (kubeop init) or a Helm one (--plugin helm)."""
    start = directory or Path.cwd()
    return find_helm_project(start) or find_project(start)


_SHOWN = {"created": "created", "updated": "updated", "kept": "kept   "}


def report(changes: Iterable[Change]) -> None:
    """One line per file written or kept; unchanged files are counted, not listed."""
    unchanged = 0
    for change in changes:
        if change.action == "unchanged":
            unchanged += 1
            continue
        note = "  (exists and is not kubeop's to rewrite)" if change.action == "kept" else ""
        say(f"{_SHOWN[change.action]} {change.path}{note}")
    if unchanged:
        say(f"({unchanged} file{'s' if unchanged != 1 else ''} already up to date)")


AnyProject = TypeVar("AnyProject", Project, HelmProject)


def move_namespace(project: AnyProject, namespace: str | None, *, check: bool) -> tuple[AnyProject, str]:
    """``--namespace`` of manifests/generate: the project with its new deploy namespace (checked as a
    DNS label; recorded in PROJECT when the caller saves it) and the line that says so ("" when it
    does not change). ``--check`` writes nothing, so it cannot change the namespace."""
    if namespace is None or namespace == project.namespace:
        return project, ""
    check_namespace(namespace)
    if check:
        fail("--check writes nothing, so it cannot change the namespace: drop --namespace or --check")
    moved = f"namespace: {project.namespace} -> {namespace} (recorded in PROJECT)"
    return replace(project, namespace=namespace), moved


def fail_if_stale(root: Path, plans: Sequence[Planned]) -> None:
    """``manifests --check``: fail naming the files a run would create or update."""
    stale = [c.path for c in pending(root, plans) if c.action in ("created", "updated")]
    if stale:
        fail(f"config/ is out of date ({', '.join(stale)}): run kubeop manifests")
