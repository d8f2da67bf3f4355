"""`kubeop version`: versions, pins, the cache, and which binaries a control plane would use."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kubeop
from kubeop.cli import app
from kubeop.testing import binaries as bins

runner = CliRunner()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache, envtest assets holding a right kube-apiserver, an old kubectl on PATH."""
    monkeypatch.setenv("KUBEOP_CACHE_DIR", str(tmp_path / "cache"))
    assets, on_path = tmp_path / "assets", tmp_path / "path"
    for directory, command, output in (
        (assets, "kube-apiserver", f"Kubernetes {bins.KUBERNETES_VERSION}"),
        (on_path, "kubectl", "Client Version: v1.32.4"),
    ):
        directory.mkdir(exist_ok=True)
        (directory / command).write_text(f"#!/bin/sh\necho '{output}'\n")
        (directory / command).chmod(0o755)
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    monkeypatch.setenv("PATH", str(on_path))
    return tmp_path


def test_text(env: Path) -> None:
    result = runner.invoke(app, ["version"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith(f"kubeop {kubeop.__version__}\nPython {platform.python_version()} ")
    assert f"kubernetes {bins.KUBERNETES_VERSION}, kwok {bins.KWOK_VERSION}, helm {bins.HELM_VERSION}" in out
    assert f"etcd {bins.ETCD_VERSION}: {bins.ETCD_VERSION.join(['etcd-', ''])} is not built yet" in out
    assert f"{env / 'assets' / 'kube-apiserver'} (from KUBEBUILDER_ASSETS)" in out
    assert "(not built yet: built on first use or by `kubeop cluster build`)" in out
    assert f"kubectl: not using {env / 'path' / 'kubectl'} (PATH): it is v1.32.4" in out


def test_json(env: Path) -> None:
    result = runner.invoke(app, ["version", "--output", "json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["kubeop"] == kubeop.__version__
    assert info["pinned"]["kubernetes"] == bins.KUBERNETES_VERSION
    assert info["cache"]["dir"] == str(env / "cache" / "bin")
    assert info["cache"]["components"]["etcd"]["built"] is False
    assert info["binaries"]["kube-apiserver"]["source"] == "KUBEBUILDER_ASSETS"
    assert info["binaries"]["etcd"]["source"] == "build"
    assert [(f["command"], f["used"]) for f in info["installed"]] == [
        ("kube-apiserver", True),
        ("kubectl", False),
    ]


def test_bad_output_format() -> None:
    result = runner.invoke(app, ["version", "-o", "yaml"])
    assert result.exit_code == 2
    assert "--output must be text or json, not 'yaml'" in result.output


def test_envtest_assets_that_are_a_file_are_one_line(env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(env / "assets" / "kube-apiserver"))
    result = runner.invoke(app, ["version"])
    assert result.exit_code == 0, result.output
    assert (
        f"KUBEBUILDER_ASSETS={env / 'assets' / 'kube-apiserver'} is not a directory: point it"
        in result.output
    )
    info = json.loads(runner.invoke(app, ["version", "-o", "json"]).output)
    assert len(info["notes"]) == 1
