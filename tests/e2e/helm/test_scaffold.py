"""kubeop init --plugin helm + kubeop create api --helm-chart: the scaffolded operator runs, under
exactly the ClusterRole it was given, and manages its sample."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from examples.php_deployment.operator import CHART, DEPLOYMENTS, INGRESSES, PHP_DEPLOYMENTS, SERVICES
from typer.testing import CliRunner

from kubeop.cli import app
from kubeop.testing import ControlPlane

from ..controller.conftest import client_for, eventually

pytestmark = [pytest.mark.controlplane, pytest.mark.full]

SERVICE_ACCOUNT = "php-operator-controller-manager"  # what the generated bindings name


def kubeop(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


async def test_scaffolded_helm_operator_runs_under_its_rbac(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    root = tmp_path / "php-operator"
    kubeop(
        "init",
        "--plugin",
        "helm",
        "--domain",
        "example.com",
        "--repo",
        "github.com/x/php-operator",
        "--dir",
        str(root),
    )
    kubeop(
        "create", "api", "--group", "web", "--version", "v1", "--kind", "PhpDeployment",
        "--helm-chart", str(CHART), "--dir", str(root),
    )  # fmt: skip
    control_plane.install_crds([root / "config/crd/bases/web.example.com_phpdeployments.yaml"])

    # The generated ClusterRole, bound to a service account: the operator gets nothing more.
    role: dict[str, Any] = yaml.safe_load((root / "config/rbac/role.yaml").read_text())
    role["metadata"]["name"] = f"{namespace}-manager-role"
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{namespace}-manager"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role["metadata"]["name"],
        },
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": namespace}],
    }
    control_plane.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": [role, binding]})
    )
    kubeconfig = control_plane.kubeconfig_for_service_account(namespace, SERVICE_ACCOUNT)

    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "kubeop.helm", "--watches-file", str(root / "watches.yaml"),
        "--metrics-bind-address", "", "--health-probe-bind-address", "", "--name", "scaffolded",
        env={**control_plane.env(), "KUBECONFIG": kubeconfig, "WATCH_NAMESPACE": namespace},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, cwd=root,
    )  # fmt: skip
    try:
        sample = yaml.safe_load((root / "config/samples/web_v1_phpdeployment.yaml").read_text())
        sample["metadata"]["namespace"] = namespace
        async with client_for(control_plane.kubeconfig_path) as client:
            await client.create(sample)
            name = sample["metadata"]["name"]

            async def deployed() -> bool:
                obj = await client.get_or_none(PHP_DEPLOYMENTS, name, namespace=namespace)
                conds = {c["type"]: c for c in (obj or {}).get("status", {}).get("conditions", [])}
                return conds.get("Deployed", {}).get("status") == "True"

            await eventually(deployed, 60, "the sample's release to be deployed")
            for res in (DEPLOYMENTS, SERVICES, INGRESSES):
                assert await client.get_or_none(res, name, namespace=namespace) is not None
            await client.delete(DEPLOYMENTS, name, namespace=namespace)
            await eventually(
                lambda: client.get_or_none(DEPLOYMENTS, name, namespace=namespace), 30, "recreation"
            )
            await client.delete(PHP_DEPLOYMENTS, name, namespace=namespace)

            async def gone() -> bool:
                return await client.get_or_none(PHP_DEPLOYMENTS, name, namespace=namespace) is None

            await eventually(gone, 60, "the sample to be uninstalled")
    finally:
        proc.terminate()
        _, stderr = await asyncio.wait_for(proc.communicate(), 40)
        control_plane.kubectl("delete", "clusterrolebinding", f"{namespace}-manager", check=False)
        control_plane.kubectl("delete", "clusterrole", f"{namespace}-manager-role", check=False)
    log = stderr.decode()
    assert "forbidden" not in log.lower(), log[-3000:]
    assert proc.returncode == 0, log[-3000:]
