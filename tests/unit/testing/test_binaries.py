"""The binary cache: manifests catch corruption; a missing Go is a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubeop.testing import binaries as bins


def _fake_build(root: Path, component: bins.Component) -> Path:
    directory = bins.component_dir(component, root)
    (directory / "bin").mkdir(parents=True)
    files = {}
    for cmd in component.commands:
        path = directory / "bin" / bins._RENAME.get(cmd, cmd)
        path.write_bytes(b"\x7fELF" + b"x" * 100)
        path.chmod(0o755)
        files[path.relative_to(directory).as_posix()] = {
            "size": path.stat().st_size,
            "sha256": bins.sha256(path),
        }
    (directory / "manifest.json").write_text(json.dumps({"files": files}))
    return directory


def test_component_keys_are_versioned() -> None:
    assert bins.COMPONENTS["kubernetes"].key == f"kubernetes-{bins.KUBERNETES_VERSION}"
    assert bins.component_dir(bins.COMPONENTS["etcd"], Path("/c")) == Path(f"/c/bin/etcd-{bins.ETCD_VERSION}")


def test_k8s_version_ldflags() -> None:
    flags = bins.COMPONENTS["kubernetes"].ldflags
    assert f"k8s.io/component-base/version.gitVersion={bins.KUBERNETES_VERSION}" in flags
    assert f"k8s.io/client-go/pkg/version.gitVersion={bins.KUBERNETES_VERSION}" in flags
    assert "gitMinor=36" in flags


def test_intact_cache_passes(tmp_path: Path) -> None:
    comp = bins.COMPONENTS["etcd"]
    _fake_build(tmp_path, comp)
    assert bins.check_component(comp, tmp_path) is None
    assert bins.check_component(comp, tmp_path, deep=True) is None


def test_truncated_binary_is_detected(tmp_path: Path) -> None:
    comp = bins.COMPONENTS["etcd"]
    directory = _fake_build(tmp_path, comp)
    (directory / "bin" / "etcd").write_bytes(b"\x7fELF")
    problem = bins.check_component(comp, tmp_path)
    assert problem is not None and "wrong size" in problem


def test_same_size_corruption_needs_deep_check(tmp_path: Path) -> None:
    comp = bins.COMPONENTS["etcd"]
    directory = _fake_build(tmp_path, comp)
    path = directory / "bin" / "etcd"
    path.write_bytes(b"\x7fELF" + b"y" * 100)
    assert bins.check_component(comp, tmp_path) is None
    problem = bins.check_component(comp, tmp_path, deep=True)
    assert problem is not None and "SHA-256" in problem


def test_missing_and_unbuilt(tmp_path: Path) -> None:
    comp = bins.COMPONENTS["kwok"]
    problem = bins.check_component(comp, tmp_path)
    assert problem is not None and "not built" in problem
    with pytest.raises(bins.BinaryError, match="kubeop cluster build"):
        bins.locate_binaries(root=tmp_path)


def test_unreadable_manifest(tmp_path: Path) -> None:
    comp = bins.COMPONENTS["etcd"]
    directory = _fake_build(tmp_path, comp)
    (directory / "manifest.json").write_text("{not json")
    problem = bins.check_component(comp, tmp_path)
    assert problem is not None and "unreadable" in problem


def test_missing_go_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(bins.BinaryError, match="Go is not on PATH"):
        bins.build_component(bins.COMPONENTS["etcd"], tmp_path, progress=lambda _: None)


def test_old_go_names_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "go"
    fake.write_text("#!/bin/sh\necho go1.20.1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(bins.BinaryError, match=r"needs Go >= 1\.26"):
        bins.build_component(bins.COMPONENTS["etcd"], tmp_path, progress=lambda _: None)


def test_cache_dir_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KUBEOP_CACHE_DIR", str(tmp_path))
    assert bins.cache_dir() == tmp_path
    monkeypatch.delenv("KUBEOP_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert bins.cache_dir() == tmp_path / "x" / "kubeop"


def test_wrapper_modules_are_shipped() -> None:
    from importlib import resources

    for name in bins.COMPONENTS:
        module = resources.files("kubeop.testing") / "gomod" / name
        assert (
            (module / "go.mod").is_file()
            and (module / "go.sum").is_file()
            and (module / "tools.go").is_file()
        )
        assert bins.COMPONENTS[name].version in (module / "go.mod").read_text()
