"""Control-plane binaries: built from pinned Go modules, cached by version.

Release downloads are not assumed to be reachable; the Go toolchain and a Go module proxy are.
Each component is built inside a small wrapper module shipped with kubeop (``gomod/<name>``,
go.mod + go.sum committed), so every version is pinned and the build is reproducible. Results go
to ``<cache>/bin/<component>-<version>/`` together with a manifest of sizes and hashes; a warm
start checks the manifest and builds nothing. The versions, the cache layout and that check live
in :mod:`kubeop.binaries`, which the runtime reads too (re-exported here); this module builds.

Binaries the user already has are used instead when they are the pinned versions (envtest's
``KUBEBUILDER_ASSETS``, then ``PATH``; see :mod:`kubeop.testing.installed`). A cold build shows
``n/N packages, ~M min left``: each module's package count and build time are kept in
``<cache>/bin/build-stats.json`` after a build (``go build -v`` names each package it compiles).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from kubeop.binaries import (
    COMPONENTS,
    ETCD_VERSION,
    HELM_VERSION,
    KUBERNETES_VERSION,
    KWOK_VERSION,
    Component,
    cache_dir,
    check_component,
    component_dir,
    sha256,
)
from kubeop.testing.installed import Installed, assets_problem, find_installed

__all__ = [
    "COMPONENTS",
    "ETCD_VERSION",
    "HELM_VERSION",
    "KUBERNETES_VERSION",
    "KWOK_STAGES",
    "KWOK_VERSION",
    "MIN_GO",
    "Binaries",
    "BinaryError",
    "BuildEstimate",
    "Choice",
    "Component",
    "Selection",
    "build_component",
    "cache_dir",
    "check_component",
    "component_dir",
    "ensure_binaries",
    "load_estimate",
    "locate_binaries",
    "record_build",
    "select_binaries",
    "sha256",
]
MIN_GO = (1, 26)

# The KWOK stages that make fake nodes Ready (with lease heartbeats) and pods Running. They ship
# in the kwok module; the build copies them beside the binary.
KWOK_STAGES = ("node/fast", "node/heartbeat-with-lease", "pod/fast")

Progress = Callable[[str], None]


class BinaryError(RuntimeError):
    """A binary is missing, corrupt, or cannot be built; the message says how to fix it."""


# etcd's server package builds a binary named after its path ("server"); we install it as "etcd".
_RENAME = {"server": "etcd", "v3": "etcd"}


@dataclass(frozen=True)
class Binaries:
    """Paths of the control-plane binaries (all checked to exist)."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path
    kwok: Path
    kwok_stages: Path
    helm: Path | None = None


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BinaryError(
            "Go is not on PATH. kubeop builds its local control plane from Go modules: install Go >= "
            f"{MIN_GO[0]}.{MIN_GO[1]} (e.g. `apt-get install golang` or your distribution's package) or "
            "point KUBEOP_CACHE_DIR at a cache that already holds the binaries."
        )
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False).stdout
    match = re.match(r"go(\d+)\.(\d+)", out.strip())
    if match is None or (int(match[1]), int(match[2])) < MIN_GO:
        raise BinaryError(
            f"{go} is {out.strip() or 'unknown'}; kubeop's pinned Kubernetes needs Go >= "
            f"{MIN_GO[0]}.{MIN_GO[1]} (GOTOOLCHAIN=local: no toolchain download). Install a newer Go."
        )
    return go


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Serialise builds of one cache between processes (two test runs starting at once)."""
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _print(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class BuildEstimate:
    """How far a build is, from the package count and duration of the last build of its module."""

    packages: int | None = None
    seconds: float | None = None
    width: int = 20

    def line(self, done: int, elapsed: float) -> str:
        spent = f"{int(elapsed) // 60}m{int(elapsed) % 60:02d}s"
        if not self.packages:
            return f"{done} packages compiled in {spent} (first build: no estimate yet)"
        total = max(self.packages, done)
        # The current rate once it means something (a few per cent in), else the last build's.
        if done >= max(10, total // 20) and elapsed > 0:
            per_package: float | None = elapsed / done
        elif self.seconds:
            per_package = self.seconds / self.packages
        else:
            per_package = None
        filled = min(self.width, self.width * done // total)
        bar = "[" + "#" * filled + "-" * (self.width - filled) + "]"
        if per_package is None:
            left = "no estimate yet"
        else:
            remaining = (total - done) * per_package
            left = "<1 min left" if remaining < 60 else f"~{round(remaining / 60)} min left"
        return f"{bar} {done}/{total} packages, {left} ({spent})"


def _stats_path(root: Path | None) -> Path:
    return (root or cache_dir()) / "bin" / "build-stats.json"


def load_estimate(component: Component, root: Path | None = None) -> BuildEstimate:
    """The estimate kept from the last build of ``component`` (empty before the first)."""
    try:
        entry = json.loads(_stats_path(root).read_text())[component.key]
        return BuildEstimate(int(entry["packages"]), float(entry["seconds"]))
    except (OSError, ValueError, KeyError, TypeError):
        return BuildEstimate()


def record_build(component: Component, packages: int, seconds: float, root: Path | None = None) -> None:
    """Keep a build's package count and duration for the next one's estimate.

    ``go build -v`` names only the packages it compiles, so a build helped by Go's own cache
    counts fewer: the largest count is kept, and the duration only of a build that compiled
    (about) all of them; a build that compiled none (all from Go's cache) teaches nothing.
    """
    if packages <= 0:
        return
    path = _stats_path(root)
    try:
        stats: dict[str, dict[str, float]] = json.loads(path.read_text())
    except (OSError, ValueError):
        stats = {}
    previous = stats.get(component.key, {})
    known = int(previous.get("packages", 0))
    entry = {"packages": max(known, packages), "seconds": float(previous.get("seconds", seconds))}
    if packages >= 0.9 * known:
        entry["seconds"] = round(seconds, 1)
    stats[component.key] = entry
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(stats, indent=1, sort_keys=True))
    tmp.replace(path)


def _run_go(
    args: list[str],
    cwd: Path,
    env: dict[str, str],
    label: str,
    progress: Progress,
    estimate: BuildEstimate | None = None,
    interval: float = 15.0,
) -> int:
    """Run a go command, reporting progress every ``interval`` seconds from its ``-v`` package
    lines; returns how many packages it compiled."""
    started = time.monotonic()
    count = 0
    lines: list[str] = []
    estimate = estimate or BuildEstimate()
    proc = subprocess.Popen(
        args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(interval):
            progress(f"  {label}: {estimate.line(count, time.monotonic() - started)}")

    ticker = threading.Thread(target=heartbeat, daemon=True)
    ticker.start()
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip("\n")
        if line and " " not in line and not line.startswith("go:"):
            count += 1
        else:
            lines.append(line)
    rc = proc.wait()
    done.set()
    if rc != 0:
        tail = "\n".join(lines[-40:])
        raise BinaryError(f"building {label} failed (exit {rc}):\n{tail}")
    return count


def build_component(
    component: Component, root: Path | None = None, *, progress: Progress = _print, force: bool = False
) -> Path:
    """Build one component into the cache (no-op when already built and intact)."""
    directory = component_dir(component, root)
    with _locked(directory.parent):
        if not force and check_component(component, root) is None:
            return directory
        go = _go()
        source = resources.files("kubeop.testing") / "gomod" / component.name
        staging = Path(tempfile.mkdtemp(prefix=f".{component.key}-", dir=directory.parent))
        staging.chmod(0o755)
        try:
            module = staging / "module"
            module.mkdir()
            for name in ("go.mod", "go.sum", "tools.go"):
                (module / name).write_bytes((source / name).read_bytes())
            env = dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-mod=readonly")
            out_bin = staging / "bin"
            out_bin.mkdir()
            estimate = load_estimate(component, root)
            took = (
                f"the last cold build here took ~{max(1, round(estimate.seconds / 60))} min"
                if estimate.seconds
                else f"a cold build takes ~{component.cold_minutes:g} min on 2 cores"
            )
            progress(
                f"==> building {component.key} ({', '.join(_RENAME.get(c, c) for c in component.commands)}); "
                f"{took}, later starts reuse the cache"
            )
            args = [go, "build", "-v", "-trimpath", "-o", str(out_bin) + "/"]
            if component.tags:
                args.append(f"-tags={component.tags}")
            if component.ldflags:
                args.append(f"-ldflags={component.ldflags}")
            args += list(component.packages)
            started = time.monotonic()
            packages = _run_go(args, module, env, component.key, progress, estimate)
            record_build(component, packages, time.monotonic() - started, root)
            for src, dst in _RENAME.items():
                if (out_bin / src).exists():
                    (out_bin / src).rename(out_bin / dst)
            if component.name == "kwok":
                _copy_kwok_stages(go, module, env, staging / "stages")
            files = {}
            for path in sorted(p for p in staging.rglob("*") if p.is_file() and p.parent != module):
                rel = path.relative_to(staging).as_posix()
                files[rel] = {"size": path.stat().st_size, "sha256": sha256(path)}
            (staging / "manifest.json").write_text(
                json.dumps({"component": component.key, "files": files}, indent=1)
            )
            shutil.rmtree(module)
            if directory.exists():
                shutil.rmtree(directory)
            staging.rename(directory)
            progress(f"==> built {component.key} in {time.monotonic() - started:.0f} s -> {directory}")
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    return directory


def _copy_kwok_stages(go: str, module: Path, env: dict[str, str], dest: Path) -> None:
    res = subprocess.run(
        [go, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"],
        cwd=module,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    stage_root = Path(res.stdout.strip()) / "kustomize" / "stage"
    dest.mkdir(parents=True)
    for stage in KWOK_STAGES:
        for yaml_file in sorted((stage_root / stage).glob("*.yaml")):
            if yaml_file.name == "kustomization.yaml":
                continue
            target = dest / f"{stage.replace('/', '-')}-{yaml_file.name}"
            target.write_bytes(yaml_file.read_bytes())


# Which component builds each command, and which commands each mode of the control plane runs.
COMMAND_COMPONENT = {
    "etcd": "etcd",
    "kube-apiserver": "kubernetes",
    "kube-controller-manager": "kubernetes",
    "kube-scheduler": "kubernetes",
    "kubectl": "kubernetes",
    "kwok": "kwok",
    "helm": "helm",
}
MINIMAL_COMMANDS = ("etcd", "kube-apiserver", "kubectl")
FULL_COMMANDS = (*MINIMAL_COMMANDS, "kube-controller-manager", "kube-scheduler", "kwok")
# kwok's stages come from its module, so kwok is always kubeop's own build.
NOT_INSTALLED = frozenset({"kwok"})


def _cached_path(command: str, root: Path | None) -> Path:
    return component_dir(COMPONENTS[COMMAND_COMPONENT[command]], root) / "bin" / command


@dataclass(frozen=True)
class Choice:
    """Where one command comes from: ``KUBEBUILDER_ASSETS``, ``PATH``, ``cache`` or ``build``."""

    command: str
    path: Path
    source: str
    version: str


@dataclass
class Selection:
    """The binaries a control plane would use, and what has to be built first."""

    choices: dict[str, Choice]
    installed: dict[str, list[Installed]] = field(default_factory=dict)
    to_build: list[Component] = field(default_factory=list)
    root: Path | None = None
    notes: list[str] = field(default_factory=list)  # e.g. a KUBEBUILDER_ASSETS it cannot look into

    def lines(self) -> list[str]:
        """One line per binary found outside the cache: used, or why not (nothing when none)."""
        return [
            *self.notes,
            *(found.line() for candidates in self.installed.values() for found in candidates),
        ]

    def binaries(self) -> Binaries:
        def path(command: str) -> Path:
            choice = self.choices.get(command)
            return choice.path if choice else _cached_path(command, self.root)

        helm = self.choices.get("helm")
        return Binaries(
            etcd=path("etcd"),
            kube_apiserver=path("kube-apiserver"),
            kube_controller_manager=path("kube-controller-manager"),
            kube_scheduler=path("kube-scheduler"),
            kubectl=path("kubectl"),
            kwok=path("kwok"),
            kwok_stages=component_dir(COMPONENTS["kwok"], self.root) / "stages",
            helm=helm.path if helm else None,
        )


def select_binaries(
    *,
    full: bool = True,
    with_helm: bool = False,
    root: Path | None = None,
    use_installed: bool = True,
    env: Mapping[str, str] | None = None,
) -> Selection:
    """Choose each command the mode needs: an installed binary of the pinned version, else the
    cached build, else the component to build."""
    commands = [*(FULL_COMMANDS if full else MINIMAL_COMMANDS), *(["helm"] if with_helm else [])]
    wanted = {c: COMPONENTS[COMMAND_COMPONENT[c]].version for c in commands if c not in NOT_INSTALLED}
    installed = find_installed(wanted, env) if use_installed else {}
    selection = Selection({}, installed, root=root)
    problem = assets_problem(env) if use_installed else None
    if problem:
        selection.notes.append(problem)
    for command in commands:
        component = COMPONENTS[COMMAND_COMPONENT[command]]
        usable = [found for found in installed.get(command, []) if found.usable]
        if usable:
            selection.choices[command] = Choice(command, usable[0].path, usable[0].origin, component.version)
            continue
        built = check_component(component, root) is None
        source = "cache" if built else "build"
        selection.choices[command] = Choice(command, _cached_path(command, root), source, component.version)
        if not built and component not in selection.to_build:
            selection.to_build.append(component)
    return selection


def ensure_binaries(
    *,
    with_helm: bool = False,
    progress: Progress = _print,
    root: Path | None = None,
    force: bool = False,
    full: bool = True,
    use_installed: bool = True,
) -> Binaries:
    """Return the control-plane binaries, building whatever is neither installed (at the pinned
    version) nor cached. ``full=False``: only what a minimal control plane runs (etcd,
    kube-apiserver, kubectl). ``force`` rebuilds the cache and uses only it."""
    if force:
        for name in ["etcd", "kwok", "kubernetes"] + (["helm"] if with_helm else []):
            build_component(COMPONENTS[name], root, progress=progress, force=True)
        return locate_binaries(root=root, with_helm=with_helm, full=full, use_installed=False)
    selection = select_binaries(full=full, with_helm=with_helm, root=root, use_installed=use_installed)
    for line in selection.lines():
        progress(f"==> {line}")
    for component in selection.to_build:
        problem = check_component(component, root)
        if problem and (component_dir(component, root) / "manifest.json").exists():
            progress(f"==> rebuilding {component.key}: {problem}")
        build_component(component, root, progress=progress)
    return selection.binaries()


def locate_binaries(
    *, root: Path | None = None, with_helm: bool = False, full: bool = True, use_installed: bool = True
) -> Binaries:
    """Paths of installed or already built binaries; raises BinaryError naming the fix when any
    is missing."""
    selection = select_binaries(full=full, with_helm=with_helm, root=root, use_installed=use_installed)
    for component in selection.to_build:
        problem = check_component(component, root)
        raise BinaryError(f"{problem}. Run `kubeop cluster build` to build the control-plane binaries.")
    return selection.binaries()
