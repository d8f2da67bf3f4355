"""Control-plane binaries: built from pinned Go modules, cached by version.

Release downloads are not assumed to be reachable; the Go toolchain and a Go module proxy are.
Each component is built inside a small wrapper module shipped with kubeop (``gomod/<name>``,
go.mod + go.sum committed), so every version is pinned and the build is reproducible. Results go
to ``<cache>/bin/<component>-<version>/`` together with a manifest of sizes and hashes; a warm
start checks the manifest and builds nothing. The versions, the cache layout and that check live
in :mod:`kubeop.binaries`, which the runtime reads too (re-exported here); this module builds.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
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
    "Component",
    "build_component",
    "cache_dir",
    "check_component",
    "component_dir",
    "ensure_binaries",
    "locate_binaries",
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


def _run_go(args: list[str], cwd: Path, env: dict[str, str], label: str, progress: Progress) -> str:
    """Run a go command, reporting progress every few seconds from its ``-v`` package lines."""
    started = time.monotonic()
    count = 0
    last_pkg = ""
    lines: list[str] = []
    proc = subprocess.Popen(
        args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    )
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(15.0):
            elapsed = int(time.monotonic() - started)
            progress(
                f"  {label}: {elapsed // 60}m{elapsed % 60:02d}s, {count} packages compiled ({last_pkg})"
            )

    ticker = threading.Thread(target=heartbeat, daemon=True)
    ticker.start()
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip("\n")
        if line and " " not in line and not line.startswith("go:"):
            count += 1
            last_pkg = line
        else:
            lines.append(line)
    rc = proc.wait()
    done.set()
    if rc != 0:
        tail = "\n".join(lines[-40:])
        raise BinaryError(f"building {label} failed (exit {rc}):\n{tail}")
    return "\n".join(lines)


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
            progress(
                f"==> building {component.key} ({', '.join(_RENAME.get(c, c) for c in component.commands)}); "
                f"cold build takes ~{component.cold_minutes:g} min on 2 cores, later starts reuse the cache"
            )
            args = [go, "build", "-v", "-trimpath", "-o", str(out_bin) + "/"]
            if component.tags:
                args.append(f"-tags={component.tags}")
            if component.ldflags:
                args.append(f"-ldflags={component.ldflags}")
            args += list(component.packages)
            started = time.monotonic()
            _run_go(args, module, env, component.key, progress)
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


def ensure_binaries(
    *, with_helm: bool = False, progress: Progress = _print, root: Path | None = None, force: bool = False
) -> Binaries:
    """Return the control-plane binaries, building whatever the cache lacks."""
    names = ["etcd", "kwok", "kubernetes"] + (["helm"] if with_helm else [])
    for name in names:
        component = COMPONENTS[name]
        problem = check_component(component, root)
        if force or problem is not None:
            if problem and not force and (component_dir(component, root) / "manifest.json").exists():
                progress(f"==> rebuilding {component.key}: {problem}")
            build_component(component, root, progress=progress, force=force)
    return locate_binaries(root=root, with_helm=with_helm)


def locate_binaries(*, root: Path | None = None, with_helm: bool = False) -> Binaries:
    """Paths of already built binaries; raises BinaryError naming the fix when any is missing."""
    for name in ["etcd", "kwok", "kubernetes"] + (["helm"] if with_helm else []):
        problem = check_component(COMPONENTS[name], root)
        if problem is not None:
            raise BinaryError(f"{problem}. Run `kubeop cluster build` to build the control-plane binaries.")
    k8s = component_dir(COMPONENTS["kubernetes"], root) / "bin"
    kwok = component_dir(COMPONENTS["kwok"], root)
    return Binaries(
        etcd=component_dir(COMPONENTS["etcd"], root) / "bin" / "etcd",
        kube_apiserver=k8s / "kube-apiserver",
        kube_controller_manager=k8s / "kube-controller-manager",
        kube_scheduler=k8s / "kube-scheduler",
        kubectl=k8s / "kubectl",
        kwok=kwok / "bin" / "kwok",
        kwok_stages=kwok / "stages",
        helm=(component_dir(COMPONENTS["helm"], root) / "bin" / "helm") if with_helm else None,
    )
