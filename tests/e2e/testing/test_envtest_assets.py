"""A minimal control plane from envtest's KUBEBUILDER_ASSETS, with an empty kubeop cache: the
user's binaries of the pinned version run, nothing is built."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeop.testing import ControlPlane
from kubeop.testing import binaries as bins

pytestmark = pytest.mark.controlplane


def test_minimal_control_plane_runs_from_kubebuilder_assets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = bins.locate_binaries(full=False, use_installed=False)  # the shared cache, as a user's copies
    assets = tmp_path / "assets"
    assets.mkdir()
    for command, path in (
        ("etcd", built.etcd),
        ("kube-apiserver", built.kube_apiserver),
        ("kubectl", built.kubectl),
    ):
        (assets / command).symlink_to(path)
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    monkeypatch.setenv("KUBEOP_CACHE_DIR", str(tmp_path / "empty-cache"))
    messages: list[str] = []
    with ControlPlane(full=False, progress=messages.append) as cp:
        assert cp.api.ok("/readyz")
        assert cp.binaries.kube_apiserver == assets / "kube-apiserver"
        assert cp.kubectl("get", "namespaces").returncode == 0
    used = f"using {assets / 'kube-apiserver'} (KUBEBUILDER_ASSETS, {bins.KUBERNETES_VERSION})"
    assert f"==> kube-apiserver: {used}" in messages
    assert not any("building" in m for m in messages), messages
    assert not (tmp_path / "empty-cache" / "bin").exists()
