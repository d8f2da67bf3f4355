"""``kubeop docker-build``: the operator's image, or its build context where no engine runs."""

from __future__ import annotations

import shlex
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Annotated

import typer

from kubeop.cli.output import Directory, any_project_at, errors_as_messages, fail, say
from kubeop.scaffold import HelmProject, write_helm_build_context
from kubeop.scaffold.image import ENV_VAR, REQUIREMENTS_FILE, write_build_context

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


def _read(path: Path) -> str:
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return ""  # a FIFO would block the read; write_build_context refuses it
        return path.read_text()
    except OSError:
        return ""  # write_build_context says what is missing


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
    kubeop_from: Annotated[
        str | None,
        typer.Option(
            envvar=ENV_VAR,
            help="where the image gets kubeop: 'wheel' (default: a wheel of this kubeop, put in the "
            "build context), an index URL (https://.../simple) or a VCS URL (git+https://...@tag)",
        ),
    ] = None,
) -> None:
    """Write the image build context and build the image with docker or podman."""
    with errors_as_messages():
        project = any_project_at(directory)
        dest = (context_dir or project.root / "build" / "image").resolve()
        if isinstance(project, HelmProject):
            if f"-r {REQUIREMENTS_FILE}" not in _read(project.root / "Dockerfile"):
                say(
                    f"warning: Dockerfile does not install {REQUIREMENTS_FILE} (an older kubeop init "
                    "--plugin helm wrote it), so the image may not get kubeop: take the pip lines of a "
                    "new Helm project's Dockerfile"
                )
            context = write_helm_build_context(project, dest, kubeop_from)
        else:
            if f"-r {REQUIREMENTS_FILE}" not in _read(project.root / "Dockerfile"):
                say(
                    f"warning: Dockerfile does not install {REQUIREMENTS_FILE} (an older kubeop init "
                    "wrote it), so the image may not get kubeop: make its pip line "
                    f"`pip wheel --no-cache-dir --wheel-dir /wheels -r {REQUIREMENTS_FILE} .`"
                )
            context = write_build_context(project, dest, kubeop_from)
        entries, origin = context.entries, context.kubeop
    shown = dest.relative_to(project.root) if dest.is_relative_to(project.root) else dest
    say(origin)
    say(f"wrote the build context to {shown} ({', '.join(e for e in entries if not e.startswith('.'))})")
    if context_only:
        return
    found, reasons = usable_engine((engine,) if engine else ENGINES)
    if found is None:
        installed = [r.split(" ", 1)[0] for r in reasons if "is installed" in r]
        fix = (
            f"start {installed[0]}'s engine (e.g. sudo systemctl start {installed[0]})"
            if installed
            else "install docker or podman"
        )
        fail(
            f"cannot build {image}: no usable container engine here ({'; '.join(reasons)}): {fix}, or "
            f"build the context kubeop wrote where an engine runs: docker build -t {shlex.quote(image)} "
            f"{shlex.quote(str(shown))}"
        )
    say(f"building {image} with {Path(found).name} ...")
    res = subprocess.run([found, "build", "-t", image, str(dest)], check=False)
    if res.returncode != 0:
        fail(f"{Path(found).name} build failed (exit code {res.returncode}); its output is above")
    say(f"built {image}")
