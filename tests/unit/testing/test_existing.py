"""ExistingCluster keeps ControlPlane's interface the scaffolded fixtures use (install_crds), through
kubectl; the cluster itself is exercised by tests/e2e/cli/test_tutorial_e2e.py."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
import yaml

from kubeop.testing import ExistingCluster

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "memcacheds.cache.example.com"},
}


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ExistingCluster:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\n")
    kubectl = tmp_path / "kubectl"
    kubectl.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/calls\ncat >> {tmp_path}/stdin\n')
    kubectl.chmod(kubectl.stat().st_mode | stat.S_IEXEC)
    found = ExistingCluster(str(kubeconfig))
    monkeypatch.setattr(found, "_kubectl_path", lambda: str(kubectl))
    return found


def test_install_crds_applies_them_and_waits_until_established(
    cluster: ExistingCluster, tmp_path: Path
) -> None:
    file = tmp_path / "crd.yaml"
    file.write_text(yaml.safe_dump(CRD))
    assert cluster.install_crds([file], timeout=7) == ["memcacheds.cache.example.com"]
    apply, wait = (tmp_path / "calls").read_text().splitlines()
    assert apply.split()[1:] == [
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=kubeop-test",
        "-f",
        "-",
    ]
    assert wait.split()[1:] == [
        "wait",
        "--for=condition=Established",
        "--timeout=7s",
        "customresourcedefinition/memcacheds.cache.example.com",
    ]
    assert list(yaml.safe_load_all((tmp_path / "stdin").read_text())) == [CRD]


def test_install_crds_refuses_what_is_not_a_crd(cluster: ExistingCluster, tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="install_crds got a 'ConfigMap', not a CustomResourceDefinition"):
        cluster.install_crds([{"kind": "ConfigMap", "metadata": {"name": "x"}}])
    assert cluster.install_crds([]) == []
    assert not (tmp_path / "calls").exists()


def test_a_missing_kubeconfig_is_named(tmp_path: Path) -> None:
    with pytest.raises(
        FileNotFoundError, match=r"KUBEOP_TEST_KUBECONFIG points at .*/nope, which is not a file"
    ):
        ExistingCluster(str(tmp_path / "nope"))
