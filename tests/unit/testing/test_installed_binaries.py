"""Binaries the user already has (KUBEBUILDER_ASSETS, PATH): the pinned version is used, another
version is refused with one line, and what is missing is built. Fake executables print versions."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kubeop.testing import binaries as bins
from kubeop.testing.installed import Installed, find_installed

from .test_binaries import _fake_build

K8S, ETCD = bins.KUBERNETES_VERSION, bins.ETCD_VERSION


def fake(directory: Path, command: str, output: str, exit_code: int = 0) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / command
    path.write_text(f"#!/bin/sh\necho '{output}'\nexit {exit_code}\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """(cache root, KUBEBUILDER_ASSETS, a PATH directory), the environment pointing at them."""
    assets, on_path = tmp_path / "assets", tmp_path / "path"
    assets.mkdir()
    on_path.mkdir()
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    monkeypatch.setenv("PATH", str(on_path))
    return tmp_path / "cache", assets, on_path


def test_envtest_assets_of_the_pinned_version_are_used(dirs: tuple[Path, Path, Path]) -> None:
    root, assets, _ = dirs
    fake(assets, "kube-apiserver", f"Kubernetes {K8S}")
    fake(assets, "etcd", f"etcd Version: {ETCD.lstrip('v')}\nGo Version: go1.26.8")
    fake(assets, "kubectl", f"Client Version: {K8S}\nKustomize Version: v5.8.1")
    selection = bins.select_binaries(full=False, root=root)
    assert selection.to_build == []
    assert {c: (ch.source, ch.path) for c, ch in selection.choices.items()} == {
        "etcd": ("KUBEBUILDER_ASSETS", assets / "etcd"),
        "kube-apiserver": ("KUBEBUILDER_ASSETS", assets / "kube-apiserver"),
        "kubectl": ("KUBEBUILDER_ASSETS", assets / "kubectl"),
    }
    assert (
        f"kube-apiserver: using {assets / 'kube-apiserver'} (KUBEBUILDER_ASSETS, {K8S})" in selection.lines()
    )
    assert selection.binaries().kube_apiserver == assets / "kube-apiserver"


def test_wrong_version_is_refused_with_one_line_and_path_is_next(dirs: tuple[Path, Path, Path]) -> None:
    root, assets, on_path = dirs
    fake(assets, "etcd", "etcd Version: 3.5.9")
    fake(on_path, "etcd", f"etcd Version: {ETCD}")
    fake(assets, "kube-apiserver", "Kubernetes v1.30.0")
    fake(on_path, "kubectl", "Client Version: v1.32.4")
    _fake_build(root, bins.COMPONENTS["kubernetes"])
    selection = bins.select_binaries(full=False, root=root)
    assert selection.choices["etcd"].path == on_path / "etcd"
    assert selection.choices["etcd"].source == "PATH"
    assert selection.choices["kube-apiserver"].source == "cache"
    assert selection.choices["kubectl"].source == "cache"
    assert selection.to_build == []
    lines = selection.lines()
    assert (
        f"etcd: not using {assets / 'etcd'} (KUBEBUILDER_ASSETS): it is v3.5.9, kubeop pins {ETCD}" in lines
    )
    assert f"etcd: using {on_path / 'etcd'} (PATH, {ETCD})" in lines
    assert (
        f"kube-apiserver: not using {assets / 'kube-apiserver'} (KUBEBUILDER_ASSETS): it is v1.30.0, "
        f"kubeop pins {K8S}" in lines
    )
    assert f"kubectl: not using {on_path / 'kubectl'} (PATH): it is v1.32.4, kubeop pins {K8S}" in lines
    assert len(lines) == 4


def test_a_binary_that_prints_no_version_is_refused(dirs: tuple[Path, Path, Path]) -> None:
    _, assets, _ = dirs
    fake(assets, "kube-apiserver", "unknown flag: --version", exit_code=1)
    (found,) = find_installed({"kube-apiserver": K8S})["kube-apiserver"]
    assert not found.usable
    assert found.line().endswith(f"it printed no version, kubeop pins {K8S}")


def test_missing_ones_are_built_and_installed_ones_are_not(
    dirs: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, assets, _ = dirs
    fake(assets, "etcd", f"etcd Version: {ETCD}")
    fake(assets, "kube-apiserver", f"Kubernetes {K8S}")
    fake(assets, "kubectl", f"Client Version: {K8S}")
    built: list[str] = []

    def build(component: bins.Component, root: Path | None = None, **_: object) -> Path:
        built.append(component.name)
        return _fake_build(root or Path("/nonexistent"), component)

    monkeypatch.setattr(bins, "build_component", build)
    said: list[str] = []
    minimal = bins.ensure_binaries(root=root, full=False, progress=said.append)
    assert built == [] and minimal.etcd == assets / "etcd"
    assert f"==> etcd: using {assets / 'etcd'} (KUBEBUILDER_ASSETS, {ETCD})" in said
    # The full control plane also needs the controller-manager, the scheduler and kwok: envtest's
    # directory has none of them, so kubernetes and kwok are built; etcd still is not.
    full = bins.ensure_binaries(root=root, full=True, progress=said.append)
    assert built == ["kubernetes", "kwok"]
    assert full.kube_apiserver == assets / "kube-apiserver"
    assert (
        full.kube_scheduler
        == bins.component_dir(bins.COMPONENTS["kubernetes"], root) / "bin" / "kube-scheduler"
    )


def test_nothing_installed_is_quiet_and_uses_the_cache(dirs: tuple[Path, Path, Path]) -> None:
    root, _, _ = dirs
    for name in ("etcd", "kubernetes", "kwok"):
        _fake_build(root, bins.COMPONENTS[name])
    selection = bins.select_binaries(root=root)
    assert selection.lines() == [] and selection.to_build == []
    assert {ch.source for ch in selection.choices.values()} == {"cache"}


def test_locate_names_the_fix_when_a_needed_one_is_neither_installed_nor_built(
    dirs: tuple[Path, Path, Path],
) -> None:
    root, assets, _ = dirs
    fake(assets, "kube-apiserver", f"Kubernetes {K8S}")
    with pytest.raises(bins.BinaryError, match=r"etcd-v.* is not built yet .*kubeop cluster build"):
        bins.locate_binaries(root=root, full=False)


def test_cache_only_ignores_installed_binaries(dirs: tuple[Path, Path, Path]) -> None:
    root, assets, _ = dirs
    fake(assets, "etcd", f"etcd Version: {ETCD}")
    selection = bins.select_binaries(full=False, root=root, use_installed=False)
    assert selection.choices["etcd"].source == "build"
    assert selection.lines() == []


def test_installed_line_for_a_usable_binary() -> None:
    found = Installed("helm", Path("/usr/bin/helm"), "PATH", "v3.22.0", "v3.22.0")
    assert found.usable and found.line() == "helm: using /usr/bin/helm (PATH, v3.22.0)"


def test_a_binary_printing_bytes_that_are_not_text_is_read_not_a_crash(dirs: tuple[Path, Path, Path]) -> None:
    _, assets, _ = dirs
    path = assets / "kube-apiserver"
    path.write_bytes(b"#!/bin/sh\nprintf '\\377\\376 Kubernetes " + K8S.encode() + b"\\n'\n")
    path.chmod(0o755)
    [found] = find_installed({"kube-apiserver": K8S})["kube-apiserver"]
    assert found.usable


def test_a_binary_that_hangs_on_version_is_given_up(tmp_path: Path) -> None:
    from kubeop.testing.installed import version_of

    path = tmp_path / "etcd"
    # a child that keeps the output pipe open after the binary itself is killed
    path.write_text("#!/bin/sh\nsleep 30 &\nsleep 30\n")
    path.chmod(0o755)
    started = time.monotonic()
    assert version_of(path, ("--version",), timeout=0.5) is None
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("kind", ["file", "nowhere", "not-executable"])
def test_envtest_assets_it_cannot_use_are_one_line(
    dirs: tuple[Path, Path, Path], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, assets, _ = dirs
    if kind == "file":
        target = assets / "a-file"
        target.write_text("x")
        monkeypatch.setenv("KUBEBUILDER_ASSETS", str(target))
        expected = f"KUBEBUILDER_ASSETS={target} is not a directory"
    elif kind == "nowhere":
        monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets / "missing"))
        expected = f"KUBEBUILDER_ASSETS={assets / 'missing'} does not exist"
    else:
        fake(assets, "kube-apiserver", f"Kubernetes {K8S}").chmod(0o644)
        apiserver = assets / "kube-apiserver"
        expected = f"kube-apiserver: not using {apiserver} (KUBEBUILDER_ASSETS): it is not executable"
    lines = bins.select_binaries(full=False, root=root).lines()
    assert [line for line in lines if expected in line], lines
