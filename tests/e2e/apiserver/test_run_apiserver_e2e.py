"""kubeop init + kubeop create apiserver + kubeop run: the project's aggregated API served from
the ``kubeop run`` process, behind the real kube-apiserver (an APIService and an ExternalName
Service it registers), reached with kubectl; on SIGINT the APIService is deleted again. A module
of its own control plane: APIServices are cluster-wide."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kubeop.testing import ControlPlane
from tests.e2e.cli.conftest import DOMAIN, KUBEOP_SOURCE, kubeop, ok

pytestmark = pytest.mark.controlplane

APISERVICE = f"v1alpha1.metrics.{DOMAIN}"


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    with ControlPlane(full=False) as plane:
        yield plane


def _project(parent: Path) -> Path:
    root = parent / "usage-operator"
    root.mkdir()
    init = ("init", "--domain", DOMAIN, "--repo", "github.com/example/usage-operator")
    ok(kubeop(*init, cwd=root, env={"KUBEOP_SOURCE": str(KUBEOP_SOURCE)}))
    create = ("create", "apiserver", "--group", "metrics", "--version", "v1alpha1", "--kind", "Usage")
    ok(kubeop(*create, cwd=root))
    return root


def _until(
    what: str, check: Callable[[], bool], log: Path, proc: subprocess.Popen[str], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert proc.poll() is None, f"kubeop run exited ({proc.returncode}) before {what}:\n{log.read_text()}"
        assert time.monotonic() < deadline, (
            f"{what} did not happen within {timeout:.0f} s:\n{log.read_text()}"
        )
        time.sleep(0.5)


def test_kubeop_run_serves_the_projects_aggregated_api(cp: ControlPlane, tmp_path: Path) -> None:
    root = _project(tmp_path)
    log = tmp_path / "run.log"
    env = {**os.environ, "KUBECONFIG": cp.kubeconfig_path}
    operator = ("--metrics-bind-address", "0", "--health-probe-bind-address", "0")
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubeop", "run", "--", *operator],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    usage = {
        "apiVersion": f"metrics.{DOMAIN}/v1alpha1",
        "kind": "Usage",
        "metadata": {"name": "u1", "namespace": "default"},
        "spec": {"foo": "bar"},
    }
    try:

        def available() -> bool:
            res = cp.kubectl("get", "apiservice", APISERVICE, "-o", "json", check=False)
            if res.returncode != 0:
                return False
            conditions = json.loads(res.stdout).get("status", {}).get("conditions", [])
            return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)

        _until(f"APIService {APISERVICE} Available", available, log, proc, 90)
        # kube-apiserver's merged discovery (and kubectl's cache) learn the group a moment later
        _until(
            "kubectl create of a Usage",
            lambda: cp.kubectl("create", "-f", "-", input=json.dumps(usage), check=False).returncode == 0,
            log,
            proc,
            90,
        )
        table = cp.kubectl("get", "usages", "-n", "default").stdout
        assert "NAME" in table and "FOO" in table and "u1" in table and "bar" in table
        service = json.loads(
            cp.kubectl(
                "get", "service", "usage-operator-apiserver", "-n", "usage-operator-system", "-o", "json"
            ).stdout
        )
        assert service["spec"]["externalName"] == "127.0.0.1"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert "and those serving its aggregated API needs (" in text, text  # asked, and granted
    assert f"applied APIService {APISERVICE}" in text, text
    assert f"deleted APIService {APISERVICE}" in text, text
    gone = cp.kubectl("get", "apiservice", APISERVICE, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr, gone.stdout
    left = cp.kubectl(
        "get", "service", "usage-operator-apiserver", "-n", "usage-operator-system", check=False
    )
    assert left.returncode != 0 and "NotFound" in left.stderr


def test_the_permission_check_names_what_serving_the_api_needs(cp: ControlPlane, tmp_path: Path) -> None:
    """Under an identity the cluster grants nothing, kube-apiserver's own authorizer answers the
    check: what the operator needs is listed, and apart from it what serving the API needs (with
    --no-apiserver, that part is not asked)."""
    root = _project(tmp_path)
    nobody = cp.kubeconfig_for_service_account("default", "kubeop-run-nobody")
    env = {**os.environ, "KUBECONFIG": nobody}
    ns = "usage-operator-system"
    served = subprocess.run(
        [sys.executable, "-m", "kubeop", "run", "--no-webhooks"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert served.returncode == 1, served.stdout + served.stderr
    said = served.stderr
    assert "error: Forbidden: system:serviceaccount:default:kubeop-run-nobody may not" in said, said
    apiservice = f"apiservices.apiregistration.k8s.io named {APISERVICE} (cluster-wide)"
    service = f"services named usage-operator-apiserver in namespace {ns}"
    for verb in ("get", "create", "patch", "delete"):
        assert f"  - {verb} {apiservice}\n" in said and f"  - {verb} {service}\n" in said, said
    for line in (
        f"  - get namespaces named {ns} (cluster-wide)",
        "  - create tokenreviews.authentication.k8s.io (cluster-wide)",
        "  - create subjectaccessreviews.authorization.k8s.io (cluster-wide)",
        "  - get configmaps named extension-apiserver-authentication in namespace kube-system",
        "which serving the project's aggregated API from here needs",
        "leave the API out with --no-apiserver",
    ):
        assert line in said, said
    without = subprocess.run(
        [sys.executable, "-m", "kubeop", "run", "--no-webhooks", "--no-apiserver"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert without.returncode == 1 and "may not" in without.stderr, without.stdout + without.stderr
    assert "aggregated API" not in without.stdout + without.stderr and "tokenreviews" not in without.stderr
