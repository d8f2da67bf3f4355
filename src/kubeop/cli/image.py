"""``kubeop docker-build``: the operator's image, or its build context where no engine runs."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from kubeop.cli.output import Directory, any_project_at, errors_as_messages, fail, say
from kubeop.scaffold import HelmProject, write_helm_build_context
from kubeop.scaffold.image import ENV_VAR, REQUIREMENTS_FILE, SECRET_ID, SECRET_MOUNT, write_build_context

__all__ = ["build_command", "docker_build", "usable_engine"]

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


def build_command(engine: str, image: str, context: Path, secret: Path | str | None = None) -> list[str]:
    """``<engine> build``: with ``secret``, the netrc file given to the build as the secret
    SECRET_ID (BuildKit's and podman's ``--secret``), which the Dockerfile mounts for pip."""
    command = [engine, "build"]
    if secret is not None:
        command += ["--secret", f"id={SECRET_ID},src={secret}"]
    return [*command, "-t", image, str(context)]


@contextlib.contextmanager
def _secret_file(netrc: str, context: Path) -> Iterator[Path | None]:
    """``netrc`` in a file only this user reads, outside the build context, removed afterwards."""
    if not netrc:
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="kubeop-build-secret-"))  # 0700
    try:
        if folder.resolve().is_relative_to(context.resolve()) or "," in str(folder):
            fail(
                f"cannot pass the index's login to the build: the temporary directory {folder} is inside "
                "the build context or has a comma in its path; set TMPDIR to another directory"
            )
        path = folder / "netrc"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(netrc)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


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
    if context.netrc and f"id={SECRET_ID}" not in _read(project.root / "Dockerfile"):
        say(
            f"warning: Dockerfile does not mount the build secret {SECRET_ID}, so pip in the image cannot "
            f"log in to that URL: start its pip RUN line with `RUN {SECRET_MOUNT} \\` (as a new kubeop "
            "init writes it)"
        )
    # What to run elsewhere: the login is not in the context, so the build is given it as a secret
    elsewhere = shlex.join(build_command("docker", image, Path(shown), "NETRC" if context.netrc else None))
    if context.netrc:
        elsewhere += (
            " (NETRC: a netrc file with the URL's login, machine <host> login <user> password <token>)"
        )
    if context_only:
        if context.netrc:
            say(f"the URL's login is not in the context: build it with {elsewhere}")
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
            f"build the context kubeop wrote where an engine runs: {elsewhere}"
        )
    say(f"building {image} with {Path(found).name} ...")
    with _secret_file(context.netrc, dest) as secret:
        res = subprocess.run(build_command(found, image, dest, secret), check=False)
    if res.returncode != 0:
        fail(f"{Path(found).name} build failed (exit code {res.returncode}); its output is above")
    say(f"built {image}")
