"""``kubeop docker-build``: the operator's image, or its build context where no engine runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Annotated

import typer

from kubeop.cli.output import Directory, any_project_at, errors_as_messages, fail, say
from kubeop.scaffold import HelmProject, write_helm_build_context
from kubeop.scaffold.image import write_build_context

__all__ = ["docker_build", "usable_engine"]

ENGINES = ("docker", "podman")


def usable_engine(candidates: tuple[str, ...]) -> tuple[str | None, list[str]]:
    """The first container engine that answers ``<engine> info``, and why each other one did not."""
    reasons = []
    for name in candidates:
        path = shutil.which(name)
        if path is None:
            reasons.append(f"{name} is not installed")
            continue
        try:
            res = subprocess.run([path, "info"], capture_output=True, text=True, timeout=20, check=False)
        except subprocess.TimeoutExpired:
            reasons.append(f"{name} info did not answer within 20 s")
            continue
        if res.returncode == 0:
            return path, reasons
        detail = (res.stderr.strip().splitlines() or [f"exit code {res.returncode}"])[-1]
        reasons.append(f"{name} is installed but its engine does not answer ({name} info: {detail})")
    return None, reasons


def docker_build(
    image: Annotated[str, typer.Option(help="the image to build")] = "controller:latest",
    directory: Directory = None,
    context_dir: Annotated[
        Path | None, typer.Option(help="where to write the build context (default: build/image)")
    ] = None,
    engine: Annotated[
        str | None, typer.Option(help="docker or podman (default: the first that runs)")
    ] = None,
    context_only: Annotated[bool, typer.Option(help="only write the build context")] = False,
) -> None:
    """Write the image build context and build the image with docker or podman."""
    with errors_as_messages():
        project = any_project_at(directory)
        dest = (context_dir or project.root / "build" / "image").resolve()
        if isinstance(project, HelmProject):
            entries, dist = write_helm_build_context(project, dest)
        else:
            entries = write_build_context(project, dest)
    shown = dest.relative_to(project.root) if dest.is_relative_to(project.root) else dest
    say(f"wrote the build context to {shown} ({', '.join(e for e in entries if not e.startswith('.'))})")
    if isinstance(project, HelmProject):
        say(f"the image installs kubeop {dist.version} from {shown}/wheels/{dist.wheel_name} ({dist.source})")
        if "wheels/" not in (dest / "Dockerfile").read_text():
            say(
                "note: the Dockerfile does not install kubeop from wheels/ (it predates kubeop carrying "
                "its wheel); take the install lines of a new kubeop init --plugin helm project's Dockerfile"
            )
    if context_only:
        return
    found, reasons = usable_engine((engine,) if engine else ENGINES)
    if found is None:
        fail(
            f"cannot build {image}: no usable container engine here ({'; '.join(reasons)}). "
            f"The build context is ready: build it where an engine runs (docker build -t {image} {shown}), "
            "or pass --context-only to only write it"
        )
    say(f"building {image} with {Path(found).name} ...")
    res = subprocess.run([found, "build", "-t", image, str(dest)], check=False)
    if res.returncode != 0:
        fail(f"{Path(found).name} build failed (exit code {res.returncode}); its output is above")
    say(f"built {image}")
