"""The operator-sdk / kubebuilder workflow on the real control plane: init, create api, manifests,
the project's own tests, install / uninstall, deploy / undeploy."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeop.scaffold import build_kustomization

from .conftest import DOMAIN, kubeop, ok, scaffold

pytestmark = pytest.mark.controlplane

NAME = "workflow-operator"
GROUP = f"workflow.{DOMAIN}"
CRD = f"memos.{GROUP}"
NAMESPACE = f"{NAME}-system"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scaffold(tmp_path_factory.mktemp("workflow"), NAME, "workflow", "Memo")


def _status(control_plane: Any, path: str) -> int:
    status, _ = control_plane.api.raw("GET", path)
    return int(status)


def test_the_project_is_complete_and_its_manifests_are_current(project: Path) -> None:
    for path in (
        "PROJECT",
        "Makefile",
        "Dockerfile",
        "workflow_operator/main.py",
        "workflow_operator/api/v1/memo.py",
        "workflow_operator/controllers/memo.py",
        f"config/crd/bases/{GROUP}_memos.yaml",
        "config/rbac/role.yaml",
        "config/samples/workflow_v1_memo.yaml",
        "tests/test_memo_controller.py",
    ):
        assert (project / path).is_file(), path
    assert "config/ is up to date (1 kind)" in ok(kubeop("manifests", "--check", cwd=project))


def test_the_projects_own_tests_pass(project: Path) -> None:
    # The project's tests start their own etcd + kube-apiserver (its pyproject asks for the minimal
    # control plane), exactly as `make test` does for a user; the project is importable through
    # PYTHONPATH, as `pip install -e .` would make it.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBEOP_TEST_", "PYTEST_"))}
    env["PYTHONPATH"] = str(project)
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "3 passed" in res.stdout, res.stdout[-2000:]


def test_install_then_uninstall(control_plane: Any, project: Path) -> None:
    out = ok(kubeop("install", cwd=project, kubeconfig=control_plane.kubeconfig_path))
    assert f"{CRD} is Established" in out
    assert _status(control_plane, f"/apis/{GROUP}/v1/memos") == 200
    again = ok(kubeop("install", cwd=project, kubeconfig=control_plane.kubeconfig_path))  # idempotent
    assert "installed 1 CRD" in again
    out = ok(kubeop("uninstall", cwd=project, kubeconfig=control_plane.kubeconfig_path))
    assert "uninstalled 1 CRD" in out
    assert _status(control_plane, f"{CRDS}/{CRD}") == 404
    out = ok(kubeop("uninstall", cwd=project, kubeconfig=control_plane.kubeconfig_path))
    assert "no CRD of this project was installed" in out


@pytest.fixture(scope="module")
def deployed(control_plane: Any, project: Path) -> Iterator[str]:
    """The operator deployed (CRDs, RBAC, Deployment, Service) for the rest of the module."""
    out = ok(
        kubeop(
            "deploy",
            "--image",
            "registry.example.com/workflow:v1",
            "--wait",
            cwd=project,
            kubeconfig=control_plane.kubeconfig_path,
        )
    )
    yield out
    kubeop("undeploy", "--wait", cwd=project, kubeconfig=control_plane.kubeconfig_path)


@pytest.mark.full
def test_deploy_runs_the_manager_with_probes_and_leader_election(control_plane: Any, deployed: str) -> None:
    assert "available" in deployed and f"to namespace {NAMESPACE}" in deployed
    path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{NAME}-controller-manager"
    dep = control_plane.api.call("GET", path)
    assert dep["status"]["availableReplicas"] == 1
    pod = dep["spec"]["template"]["spec"]
    (manager,) = pod["containers"]
    assert manager["image"] == "registry.example.com/workflow:v1"
    assert manager["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert manager["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert "--leader-elect" in manager["args"]
    assert pod["serviceAccountName"] == f"{NAME}-controller-manager"
    svc = control_plane.api.call("GET", f"/api/v1/namespaces/{NAMESPACE}/services/{NAME}-metrics-service")
    assert svc["spec"]["ports"][0]["port"] == 8443
    binding = control_plane.api.call(
        "GET", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{NAME}-manager-rolebinding"
    )
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": f"{NAME}-controller-manager", "namespace": NAMESPACE}
    ]
    assert _status(control_plane, f"/apis/{GROUP}/v1/memos") == 200


@pytest.mark.full
def test_every_manifest_passes_a_server_side_dry_run_without_warnings(
    control_plane: Any, project: Path, deployed: str
) -> None:
    objs = build_kustomization(project / "config" / "default")
    assert sorted({o["kind"] for o in objs}) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "Deployment",
        "Namespace",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
    ]
    # The same objects as the real kustomize makes of config/ (kubectl apply -k works too).
    built = yaml.safe_load_all(control_plane.kubectl("kustomize", str(project / "config" / "default")).stdout)
    assert sorted(yaml.safe_dump(o) for o in built) == sorted(yaml.safe_dump(o) for o in objs)
    sample = yaml.safe_load((project / "config/samples/workflow_v1_memo.yaml").read_text())
    sample["metadata"]["namespace"] = NAMESPACE
    res = control_plane.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--dry-run=server",
        "-f",
        "-",
        input=yaml.safe_dump_all([*objs, sample]),
        check=False,
    )
    assert res.returncode == 0 and "Warning" not in res.stderr, res.stderr
    assert res.stdout.count("serverside-applied (server dry run)") == len(objs) + 1, res.stdout


@pytest.mark.full
def test_undeploy_removes_everything(control_plane: Any, project: Path, deployed: str) -> None:
    out = ok(kubeop("undeploy", "--wait", cwd=project, kubeconfig=control_plane.kubeconfig_path))
    assert "14 objects deleted" in out
    assert _status(control_plane, f"/api/v1/namespaces/{NAMESPACE}") == 404
    assert _status(control_plane, f"{CRDS}/{CRD}") == 404
    role = f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{NAME}-manager-role"
    assert _status(control_plane, role) == 404
