"""One deploy namespace on the real control plane: set with `kubeop manifests --namespace`, then
`deploy --dry-run` applies nothing and `deploy` puts everything there and says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeop.scaffold import build_kustomization

from .conftest import kubeop, ok, scaffold

pytestmark = pytest.mark.controlplane

NAME = "nsdeploy-operator"
NAMESPACE = "team-nsdeploy"


def _status(control_plane: Any, path: str) -> int:
    status, _ = control_plane.api.raw("GET", path)
    return int(status)


def test_deploy_to_the_namespace_set_by_the_command(control_plane: Any, tmp_path: Path) -> None:
    project = scaffold(tmp_path, NAME, "nsdeploy", "Widget")
    kubeconfig = control_plane.kubeconfig_path
    out = ok(kubeop("manifests", "--namespace", NAMESPACE, cwd=project))
    assert f"{NAME}-system -> {NAMESPACE}" in out
    # what the real kustomize makes of config/default is what deploy applies
    objs = build_kustomization(project / "config" / "default")
    built = yaml.safe_load_all(control_plane.kubectl("kustomize", str(project / "config" / "default")).stdout)
    assert sorted(yaml.safe_dump(o) for o in built) == sorted(yaml.safe_dump(o) for o in objs)

    dry = kubeop("deploy", "--dry-run", cwd=project, kubeconfig=kubeconfig)
    assert f"to namespace {NAMESPACE}; nothing applied" in ok(dry)
    assert len([d for d in yaml.safe_load_all(dry.stdout) if d]) == len(objs)
    assert _status(control_plane, f"/api/v1/namespaces/{NAMESPACE}") == 404

    try:
        out = ok(kubeop("deploy", cwd=project, kubeconfig=kubeconfig))
        assert f"to namespace {NAMESPACE}:" in out and f"{NAME}-system" not in out
        assert _status(control_plane, f"/api/v1/namespaces/{NAME}-system") == 404
        dep = control_plane.api.call(
            "GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{NAME}-controller-manager"
        )
        assert dep["spec"]["template"]["spec"]["serviceAccountName"] == f"{NAME}-controller-manager"
        for path in (
            f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{NAME}-controller-manager",
            f"/api/v1/namespaces/{NAMESPACE}/services/{NAME}-metrics-service",
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/roles/{NAME}-leader-election-role",
        ):
            assert _status(control_plane, path) == 200, path
        binding = control_plane.api.call(
            "GET", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{NAME}-manager-rolebinding"
        )
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": f"{NAME}-controller-manager", "namespace": NAMESPACE}
        ]
    finally:
        ok(kubeop("undeploy", cwd=project, kubeconfig=kubeconfig))
