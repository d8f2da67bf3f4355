"""The shared local control plane behaves like a real cluster (issue 2's acceptance tests)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from kubeop.testing import ControlPlane
from kubeop.testing.binaries import KUBERNETES_VERSION

DATA = Path(__file__).parent / "data"


def _wait(predicate: Any, timeout: float = 60.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }


def _running_pods(cp: ControlPlane, ns: str, app: str) -> list[str]:
    pods = cp.api.call("GET", f"/api/v1/namespaces/{ns}/pods?labelSelector=app%3D{app}")["items"]
    return sorted(
        p["metadata"]["name"]
        for p in pods
        if p["status"].get("phase") == "Running" and "deletionTimestamp" not in p["metadata"]
    )


def test_readyz_and_version(control_plane: ControlPlane) -> None:
    assert control_plane.api.ok("/readyz")
    assert control_plane.api.call("GET", "/version")["gitVersion"] == KUBERNETES_VERSION


@pytest.mark.full
def test_kubectl_lists_kwok_nodes_ready(control_plane: ControlPlane) -> None:
    out = control_plane.kubectl("get", "nodes", "-o", "json").stdout
    nodes = json.loads(out)["items"]
    assert len(nodes) >= 2
    for node in nodes:
        assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
        ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
        assert ready == "True", node["metadata"]["name"]
    table = control_plane.kubectl("get", "nodes").stdout
    assert "kwok-node-0" in table and " Ready " in table


@pytest.mark.full
def test_deployment_pods_run_and_a_deleted_pod_is_replaced(
    control_plane: ControlPlane, namespace: str
) -> None:
    cp = control_plane
    cp.api.call("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", _deployment("web", 3))
    pods = _wait(
        lambda: (p := _running_pods(cp, namespace, "web")) and len(p) == 3 and p, what="3 pods Running"
    )
    victim = pods[0]
    cp.api.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{victim}")
    replaced = _wait(
        lambda: (p := _running_pods(cp, namespace, "web")) and len(p) == 3 and victim not in p and p,
        what="the deleted pod to be replaced",
    )
    assert victim not in replaced


@pytest.mark.full
def test_deleting_a_deployment_garbage_collects_replicaset_and_pods(
    control_plane: ControlPlane, namespace: str
) -> None:
    cp = control_plane
    cp.api.call("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", _deployment("gc", 2))
    _wait(lambda: len(_running_pods(cp, namespace, "gc")) == 2, what="2 pods Running")
    rs_path = f"/apis/apps/v1/namespaces/{namespace}/replicasets"
    assert cp.api.call("GET", rs_path)["items"]
    cp.api.call(
        "DELETE", f"/apis/apps/v1/namespaces/{namespace}/deployments/gc", {"propagationPolicy": "Background"}
    )
    _wait(
        lambda: (
            not cp.api.call("GET", rs_path)["items"]
            and not cp.api.call("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
        ),
        what="garbage collection of the ReplicaSet and its pods",
    )


def test_crontab_crd_validation_and_short_name(control_plane: ControlPlane, namespace: str) -> None:
    cp = control_plane
    assert cp.install_crds([DATA / "crontab-crd.yaml"]) == ["crontabs.stable.example.com"]
    good = {
        "apiVersion": "stable.example.com/v1beta1",
        "kind": "CronTab",
        "metadata": {"name": "my-new-cron-object", "namespace": namespace},
        "spec": {"cronSpec": "* * * * */5", "image": "my-awesome-cron-image", "replicas": 2},
    }
    cp.kubectl("apply", "-f", "-", input=json.dumps(good))
    bad = json.loads(json.dumps(good))
    bad["metadata"]["name"] = "bad"
    bad["spec"]["replicas"] = "x"
    res = cp.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert res.returncode != 0
    assert "spec.replicas" in res.stderr, res.stderr
    assert "integer" in res.stderr, res.stderr
    table = cp.kubectl("get", "ct", "-n", namespace).stdout
    assert "my-new-cron-object" in table and "bad" not in table
    as_yaml = cp.kubectl("get", "ct", "my-new-cron-object", "-n", namespace, "-o", "yaml").stdout
    assert "cronSpec: '* * * * */5'" in as_yaml
    assert "image: my-awesome-cron-image" in as_yaml


def test_user_without_rbac_is_forbidden_until_granted(control_plane: ControlPlane, namespace: str) -> None:
    cp = control_plane
    kubeconfig = cp.kubeconfig_for_user("nobody", groups=["kubeop-test"])
    res = cp.kubectl("get", "configmaps", "-n", namespace, kubeconfig=kubeconfig, check=False)
    assert res.returncode != 0
    assert "Forbidden" in res.stderr and 'User "nobody"' in res.stderr, res.stderr
    cp.api.call(
        "POST",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
        {
            "metadata": {"name": "nobody-view"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "nobody"}],
        },
    )
    _wait(
        lambda: (
            cp.kubectl("get", "configmaps", "-n", namespace, kubeconfig=kubeconfig, check=False).returncode
            == 0
        ),
        timeout=10,
        what="the RoleBinding to take effect",
    )
    denied = cp.kubectl("create", "configmap", "x", "-n", namespace, kubeconfig=kubeconfig, check=False)
    assert denied.returncode != 0 and "is forbidden" in denied.stderr


def test_service_account_kubeconfig_authenticates(control_plane: ControlPlane, namespace: str) -> None:
    kubeconfig = control_plane.kubeconfig_for_service_account(namespace, "robot")
    res = control_plane.kubectl("auth", "whoami", "-o", "json", kubeconfig=kubeconfig)
    assert (
        json.loads(res.stdout)["status"]["userInfo"]["username"] == f"system:serviceaccount:{namespace}:robot"
    )
