"""The tools kubeop pins and caches: their versions, where their builds live, and whether a
cached build is whole.

Both the local control plane (:mod:`kubeop.testing.binaries`, which builds them from Go modules)
and the Helm operator and its scaffolding (:func:`find_helm`, which only looks up) read this
module, so the runtime never imports the test support. It imports nothing of kubeop.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "COMPONENTS",
    "ETCD_VERSION",
    "HELM_VERSION",
    "KUBERNETES_VERSION",
    "KWOK_VERSION",
    "Component",
    "cache_dir",
    "cached_command",
    "check_component",
    "component_dir",
    "find_helm",
    "sha256",
]

KUBERNETES_VERSION = "v1.36.3"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.8.0"
HELM_VERSION = "v3.22.0"


@dataclass(frozen=True)
class Component:
    """One versioned build unit: a wrapper module producing one or more commands."""

    name: str
    version: str
    packages: tuple[str, ...]
    tags: str = ""
    ldflags: str = ""
    cold_minutes: float = 1.0

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"

    @property
    def commands(self) -> tuple[str, ...]:
        return tuple(p.rsplit("/", 1)[-1] for p in self.packages)


def _k8s_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return "-s -w " + " ".join(flags)


COMPONENTS: dict[str, Component] = {
    "etcd": Component(
        "etcd",
        ETCD_VERSION,
        ("go.etcd.io/etcd/server/v3",),
        ldflags="-s -w",
        cold_minutes=1.5,
    ),
    "kubernetes": Component(
        "kubernetes",
        KUBERNETES_VERSION,
        (
            "k8s.io/kubernetes/cmd/kube-apiserver",
            "k8s.io/kubernetes/cmd/kube-controller-manager",
            "k8s.io/kubernetes/cmd/kube-scheduler",
            "k8s.io/kubernetes/cmd/kubectl",
        ),
        tags="selinux,notest,grpcnotrace",
        ldflags=_k8s_ldflags(KUBERNETES_VERSION),
        cold_minutes=7.0,
    ),
    "kwok": Component(
        "kwok", KWOK_VERSION, ("sigs.k8s.io/kwok/cmd/kwok",), ldflags="-s -w", cold_minutes=1.0
    ),
    "helm": Component(
        "helm",
        HELM_VERSION,
        ("helm.sh/helm/v3/cmd/helm",),
        ldflags=f"-s -w -X helm.sh/helm/v3/internal/version.version={HELM_VERSION}",
        cold_minutes=2.0,
    ),
}


def cache_dir() -> Path:
    """``$KUBEOP_CACHE_DIR``, else ``$XDG_CACHE_HOME/kubeop``, else ``~/.cache/kubeop``."""
    explicit = os.environ.get("KUBEOP_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "kubeop"


def component_dir(component: Component, root: Path | None = None) -> Path:
    return (root or cache_dir()) / "bin" / component.key


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_component(component: Component, root: Path | None = None, *, deep: bool = False) -> str | None:
    """Return None when the cached build is complete, else a sentence saying what is wrong.

    The cheap check compares sizes with the manifest written after a successful build (a
    truncated or half-written binary fails it); ``deep`` also compares SHA-256 hashes.
    """
    directory = component_dir(component, root)
    manifest = directory / "manifest.json"
    if not manifest.exists():
        return f"{component.key} is not built yet ({directory})"
    try:
        entries: dict[str, dict[str, object]] = json.loads(manifest.read_text())["files"]
    except (ValueError, KeyError, TypeError):
        return f"the manifest of {component.key} is unreadable ({manifest})"
    for rel, meta in entries.items():
        path = directory / rel
        if not path.is_file():
            return f"{path} is missing"
        if path.stat().st_size != meta.get("size"):
            return f"{path} has the wrong size (corrupt or half-written)"
        if deep and sha256(path) != meta.get("sha256"):
            return f"{path} does not match its recorded SHA-256 (corrupt)"
        if rel.startswith("bin/") and not os.access(path, os.X_OK):
            return f"{path} is not executable"
    return None


def cached_command(name: str, command: str, root: Path | None = None) -> Path | None:
    """``bin/<command>`` of the cached build of component ``name``, or None when that build is
    missing or incomplete."""
    component = COMPONENTS[name]
    if check_component(component, root) is not None:
        return None
    return component_dir(component, root) / "bin" / command


def find_helm(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The helm binary to use: ``explicit``, ``$KUBEOP_HELM``, the pinned build in kubeop's cache
    (``kubeop cluster build --helm``), then ``helm`` on PATH. FileNotFoundError says how to get one."""
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise FileNotFoundError(f"helm binary {path} does not exist")
        return path
    env = os.environ.get("KUBEOP_HELM")
    if env:
        path = Path(env)
        if not path.is_file():
            raise FileNotFoundError(f"$KUBEOP_HELM is {env}, which does not exist")
        return path
    cached = cached_command("helm", "helm")
    if cached is not None:
        return cached
    found = shutil.which("helm")
    if found:
        return Path(found)
    raise FileNotFoundError(
        "no helm binary found: run `kubeop cluster build --helm` (builds the pinned Helm from Go "
        "modules into kubeop's cache), put helm on PATH, or set $KUBEOP_HELM"
    )
