"""Control-plane binaries the user already has: envtest's ``KUBEBUILDER_ASSETS`` and ``PATH``.

envtest (controller-runtime's test harness) reads ``KUBEBUILDER_ASSETS``, a directory holding
``kube-apiserver``, ``etcd`` and ``kubectl`` (``setup-envtest`` fills one). kubeop uses such a
binary, or one found on ``PATH``, instead of building it when its ``--version`` output names the
version kubeop pins; a binary of another version is refused with one line saying so (a
different API server could make tests pass here and fail elsewhere). ``kwok`` is always built:
its node and pod stages come from the same module.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ASSETS_ENV", "VERSION_ARGS", "Installed", "assets_problem", "find_installed", "version_of"]

ASSETS_ENV = "KUBEBUILDER_ASSETS"

# How each command reports its version ("Kubernetes v1.36.3", "etcd Version: 3.6.16",
# "Client Version: v1.36.3", "v3.22.0+g..."): the first x.y.z in the output is the version.
VERSION_ARGS: dict[str, tuple[str, ...]] = {
    "etcd": ("--version",),
    "kube-apiserver": ("--version",),
    "kube-controller-manager": ("--version",),
    "kube-scheduler": ("--version",),
    "kubectl": ("version", "--client"),
    "helm": ("version", "--short"),
}
_VERSION = re.compile(r"\bv?(\d+\.\d+\.\d+)\b")


def _normal(version: str) -> str:
    return "v" + version.removeprefix("v")


@dataclass(frozen=True)
class Installed:
    """One binary found outside kubeop's cache, with the version it reports."""

    command: str
    path: Path
    origin: str  # "KUBEBUILDER_ASSETS" or "PATH"
    version: str | None  # None: it printed no version (or did not run)
    wanted: str
    problem: str | None = None  # why it was not even asked (e.g. not executable)

    @property
    def usable(self) -> bool:
        return (
            self.problem is None
            and self.version is not None
            and _normal(self.version) == _normal(self.wanted)
        )

    def line(self) -> str:
        """One line saying whether kubeop uses it, and why not."""
        if self.usable:
            return f"{self.command}: using {self.path} ({self.origin}, {self.version})"
        if self.problem:
            return f"{self.command}: not using {self.path} ({self.origin}): {self.problem}"
        found = f"it is {self.version}" if self.version else "it printed no version"
        return f"{self.command}: not using {self.path} ({self.origin}): {found}, kubeop pins {self.wanted}"


def version_of(path: Path, args: Sequence[str], timeout: float = 10.0) -> str | None:
    """The version ``path`` reports (``v1.2.3``), or None when it runs badly or prints none."""
    try:
        res = subprocess.run([str(path), *args], capture_output=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    # bytes: a binary printing something that is not text must not raise here
    match = _VERSION.search((res.stdout + b"\n" + res.stderr).decode(errors="replace"))
    return _normal(match[1]) if match else None


def assets_problem(env: Mapping[str, str] | None = None) -> str | None:
    """One line when ``KUBEBUILDER_ASSETS`` is set but is no directory kubeop can look into."""
    env = os.environ if env is None else env
    assets = env.get(ASSETS_ENV)
    if not assets:
        return None
    path = Path(assets).expanduser()
    if not path.exists():
        problem = "does not exist"
    elif not path.is_dir():
        problem = "is not a directory"
    else:
        return None
    return (
        f"{ASSETS_ENV}={assets} {problem}: point it at the directory holding kube-apiserver, etcd and "
        f"kubectl (setup-envtest use -p path), or unset it; kubeop builds what it needs meanwhile"
    )


def _candidates(command: str, env: Mapping[str, str]) -> list[tuple[Path, str, str | None]]:
    found: list[tuple[Path, str, str | None]] = []
    assets = env.get(ASSETS_ENV)
    if assets:
        path = Path(assets).expanduser() / command
        if path.is_file():
            executable = os.access(path, os.X_OK)
            found.append((path, ASSETS_ENV, None if executable else "it is not executable (chmod +x it)"))
    on_path = shutil.which(command, path=env.get("PATH", ""))
    if on_path and all(Path(on_path).resolve() != p.resolve() for p, _, _ in found):
        found.append((Path(on_path), "PATH", None))
    return found


def find_installed(
    wanted: Mapping[str, str], env: Mapping[str, str] | None = None
) -> dict[str, list[Installed]]:
    """For each command (name -> pinned version): what ``KUBEBUILDER_ASSETS`` and ``PATH`` hold,
    in that order of preference, each with the version it reports."""
    env = os.environ if env is None else env
    out: dict[str, list[Installed]] = {}
    for command, version in wanted.items():
        out[command] = [
            Installed(
                command,
                path,
                origin,
                None if problem else version_of(path, VERSION_ARGS[command]),
                version,
                problem,
            )
            for path, origin, problem in _candidates(command, env)
        ]
    return out
