"""Every project command on a Helm project (kubeop init --plugin helm + create api --helm-chart), as a
user runs them: install, run (the operator releases a sample's chart), manifests --check,
docker-build's context, deploy and undeploy (to the minimal control plane: pods need not run)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from examples.php_deployment.operator import CHART

from ..cli.conftest import kubeop, ok

pytestmark = pytest.mark.controlplane

DOMAIN = "helm-e2e.kubeop.dev"
GROUP = f"web.{DOMAIN}"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("helm-project") / "php-operator"
    name = f"php-{secrets.token_hex(3)}"  # names the deploy namespace: unique on a shared cluster
    init = (
        "init",
        "--plugin",
        "helm",
        "--domain",
        DOMAIN,
        "--repo",
        "github.com/x/php",
        "--project-name",
        name,
    )
    root.mkdir()
    ok(kubeop(*init, cwd=root))
    api = ("create", "api", "--group", "web", "--version", "v1", "--kind", "PhpDeployment", "--helm-chart")
    ok(kubeop(*api, str(CHART), cwd=root))
    return root


def _get(control_plane: Any, *args: str) -> dict[str, Any] | None:
    res = control_plane.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(res.stdout) if res.returncode == 0 else None


def _wait(what: str, fn: Any, timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def test_install_run_and_a_release(
    control_plane: Any, project: Path, namespace: str, helm_binary: Path
) -> None:
    assert "config/ is up to date (PhpDeployment)" in ok(kubeop("manifests", "--check", cwd=project))
    out = ok(kubeop("install", cwd=project, kubeconfig=control_plane.kubeconfig_path))
    assert "installed 1 CRD" in out, out

    env = {**os.environ, "KUBECONFIG": control_plane.kubeconfig_path, "KUBEOP_HELM": str(helm_binary)}
    args = ["--metrics-bind-address=", "--health-probe-bind-address=", f"--watch-namespace={namespace}"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubeop", "run", "--", *args],
        cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        sample: dict[str, Any] = yaml.safe_load(
            (project / "config/samples/web_v1_phpdeployment.yaml").read_text()
        )
        sample["metadata"]["namespace"] = namespace
        control_plane.kubectl("apply", "-f", "-", input=json.dumps(sample))
        name = sample["metadata"]["name"]
        # The chart's objects, made by Helm through the operator `kubeop run` started.
        deployment = _wait(
            "the release's Deployment", lambda: _get(control_plane, "deployment", name, "-n", namespace)
        )
        assert deployment["metadata"]["ownerReferences"][0]["kind"] == "PhpDeployment"
        assert _get(control_plane, "service", name, "-n", namespace) is not None
        # Deleting the resource uninstalls its release while the operator runs (its finalizer).
        control_plane.kubectl("delete", f"phpdeployments.{GROUP}", name, "-n", namespace, "--wait=false")
        _wait(
            "the resource to be gone",
            lambda: _get(control_plane, f"phpdeployments.{GROUP}", name, "-n", namespace) is None,
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, stderr = proc.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, stderr = proc.communicate()
    assert "starting" in stderr and "python -m kubeop.helm --watches-file" in stderr, stderr[-3000:]
    assert "checking the operator's permissions" in stderr, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]


def test_docker_build_context(project: Path) -> None:
    out = ok(kubeop("docker-build", "--context-only", cwd=project))
    entries = "Dockerfile, helm-charts, kubeop-requirements.txt, watches.yaml, wheels"
    assert f"wrote the build context to build/image ({entries})" in out, out
    assert list((project / "build/image/wheels").glob("kubeop-*-py3-none-any.whl"))


def test_deploy_and_undeploy(control_plane: Any, project: Path) -> None:
    names = yaml.safe_load((project / "PROJECT").read_text())["projectName"]
    ns = f"{names}-system"
    out = ok(
        kubeop(
            "deploy",
            "--image",
            "registry.example/php:e2e",
            cwd=project,
            kubeconfig=control_plane.kubeconfig_path,
        )
    )
    assert f"to namespace {ns}" in out and "registry.example/php:e2e" in out, out
    assert _get(control_plane, "namespace", ns) is not None
    deployment = _get(control_plane, "deployment", f"{names}-controller-manager", "-n", ns)
    assert deployment is not None
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example/php:e2e"
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == f"{names}-controller-manager"
    role = _get(control_plane, "clusterrole", f"{names}-manager-role")
    assert role is not None and any("phpdeployments" in r.get("resources", []) for r in role["rules"])
    assert _get(control_plane, "crd", f"phpdeployments.{GROUP}") is not None
    out = ok(kubeop("undeploy", cwd=project, kubeconfig=control_plane.kubeconfig_path))
    assert "undeployed" in out, out
    assert _get(control_plane, "clusterrole", f"{names}-manager-role") is None


@pytest.mark.parametrize("mode", ["minimal", "full", "existing"])
def test_the_projects_own_tests_pass(project: Path, helm_binary: Path, control_plane: Any, mode: str) -> None:
    # The project's own `make test` (manifests, then its tests), as a user runs it: on its own
    # etcd + kube-apiserver (pytest.ini's default), on its own full control plane, or against an
    # existing cluster (KUBEOP_TEST_KUBECONFIG); the operator runs on the sample each time.
    assert shutil.which("make"), "make is not installed: apt-get install make"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBEOP_TEST_", "PYTEST_"))}
    env["KUBEOP_HELM"] = str(helm_binary)
    if mode == "existing":
        env["KUBEOP_TEST_KUBECONFIG"] = control_plane.kubeconfig_path
    args = "-q -p no:cacheprovider" + (" --kubeop-control-plane=full" if mode == "full" else "")
    cmd = [
        "make",
        "test",
        f"PYTHON={sys.executable}",
        f"KUBEOP={sys.executable} -m kubeop",
        f"PYTEST_ARGS={args}",
    ]
    res = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "1 passed" in res.stdout, res.stdout[-2000:]
