"""The generated operator under exactly the generated RBAC, on a server that enforces RBAC.

The operator runs as its service account (a token kubeconfig), bound only to config/rbac; it
reconciles a sample. With one rule taken out of its ClusterRole it must fail fast and name the
missing permission, not hang.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeop.testing.controlplane import free_port

from .conftest import DOMAIN, kubeop, ok, scaffold

pytestmark = pytest.mark.controlplane

NAME = "ledger-operator"
NAMESPACE = f"{NAME}-system"
GROUP = f"accounts.{DOMAIN}"
PLURAL = "ledgers"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return scaffold(tmp_path_factory.mktemp("rbac"), NAME, "accounts", "Ledger")


@pytest.fixture(scope="module")
def service_account(control_plane: Any, project: Path) -> Iterator[str]:
    """CRDs installed, the operator's namespace, config/rbac applied; the service account's kubeconfig."""
    ok(kubeop("install", cwd=project, kubeconfig=control_plane.kubeconfig_path))
    control_plane.create_namespace(NAMESPACE)
    control_plane.kubectl("apply", "--server-side", "-k", str(project / "config" / "rbac"))
    try:
        yield control_plane.kubeconfig_for_service_account(NAMESPACE, f"{NAME}-controller-manager")
    finally:
        control_plane.kubectl(
            "delete", "-k", str(project / "config" / "rbac"), "--ignore-not-found", check=False
        )
        control_plane.delete_namespace(NAMESPACE)
        kubeop("uninstall", "--no-wait", cwd=project, kubeconfig=control_plane.kubeconfig_path)


@contextlib.contextmanager
def without_rule(control_plane: Any, project: Path, resource: str) -> Iterator[None]:
    """The operator's ClusterRole without the rule for ``resource`` while the block runs."""
    path = project / "config" / "rbac" / "role.yaml"
    (role,) = yaml.safe_load_all(path.read_text())
    kept = [r for r in role["rules"] if r.get("resources") != [resource]]
    assert len(kept) == len(role["rules"]) - 1, role["rules"]
    trimmed = {**role, "rules": kept}
    control_plane.kubectl(
        "apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump(trimmed)
    )
    try:
        yield
    finally:
        control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))


class Operator:
    """``kubeop run`` in the background, its output in a file."""

    def __init__(self, project: Path, kubeconfig: str, log: Path, *args: str) -> None:
        self.log = log
        self.health_port = free_port()
        with log.open("w") as out:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "kubeop",
                    "run",
                    *args,
                    "--",
                    "--metrics-bind-address=0",
                    f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
                ],
                cwd=project,
                env={**os.environ, "KUBECONFIG": kubeconfig},
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def output(self) -> str:
        return self.log.read_text()

    def readyz(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return 0

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout: float = 40) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)


def eventually(check: Callable[[], Any], what: str, operator: Operator, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if operator.proc.poll() is not None:
            raise AssertionError(
                f"the operator exited ({operator.proc.returncode}) before {what}:\n{operator.output()}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; operator output:\n{operator.output()}")
        time.sleep(0.2)


def test_the_operator_reconciles_a_sample_under_the_generated_rbac(
    control_plane: Any, project: Path, service_account: str, namespace: str, tmp_path: Path
) -> None:
    operator = Operator(
        project,
        service_account,
        tmp_path / "operator.log",
        "--leader-elect",
        f"--leader-election-namespace={NAMESPACE}",
    )
    try:
        sample = (project / "config/samples/accounts_v1_ledger.yaml").read_text()
        control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=sample)
        path = f"/apis/{GROUP}/v1/namespaces/{namespace}/{PLURAL}/ledger-sample"

        def ready_at(generation: int) -> bool:
            obj = control_plane.api.call("GET", path)
            status = obj.get("status") or {}
            conditions = {c["type"]: c for c in status.get("conditions") or ()}
            return (
                status.get("observedGeneration") == generation
                and conditions.get("Ready", {}).get("status") == "True"
                and conditions["Ready"].get("observedGeneration") == generation
            )

        eventually(lambda: ready_at(1), "the sample to be Ready", operator)
        assert "checking the operator's permissions" in operator.output()
        assert eventually(lambda: operator.readyz() == 200, "/readyz to answer 200", operator)
        lease = control_plane.api.call(
            "GET", f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{NAME}-leader"
        )
        assert lease["spec"]["holderIdentity"]

        control_plane.kubectl(
            "patch",
            PLURAL + "." + GROUP,
            "ledger-sample",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"spec": {"foo": "baz"}}',
        )
        eventually(lambda: ready_at(2), "the changed sample to be reconciled", operator)
        assert operator.stop() == 0, operator.output()
        assert "Forbidden" not in operator.output() and "Traceback" not in operator.output()
    finally:
        operator.kill()


def test_a_missing_permission_fails_fast_and_names_it(
    control_plane: Any, project: Path, service_account: str
) -> None:
    with without_rule(control_plane, project, PLURAL):
        started = time.monotonic()
        res = kubeop(
            "run", "--", "--metrics-bind-address=0", cwd=project, kubeconfig=service_account, timeout=60
        )
        took = time.monotonic() - started
    assert res.returncode == 1, res.stderr
    assert took < 15, f"took {took:.1f} s"
    assert "Traceback" not in res.stderr
    assert (
        f"error: Forbidden: system:serviceaccount:{NAMESPACE}:{NAME}-controller-manager may not" in res.stderr
    )
    for verb in ("get", "list", "watch", "create", "update", "patch", "delete"):
        assert f"  - {verb} {PLURAL}.{GROUP} (cluster-wide)" in res.stderr
    assert f"{PLURAL}/status" not in res.stderr  # granted: only what is missing is listed


def test_a_missing_status_permission_is_named_too(
    control_plane: Any, project: Path, service_account: str
) -> None:
    with without_rule(control_plane, project, f"{PLURAL}/status"):
        res = kubeop("run", cwd=project, kubeconfig=service_account, timeout=60)
    assert res.returncode == 1
    assert f"  - patch {PLURAL}/status.{GROUP} (cluster-wide)" in res.stderr
    assert f"  - list {PLURAL}.{GROUP}" not in res.stderr


def test_without_the_check_the_forbidden_watch_shows_and_the_operator_is_not_ready(
    control_plane: Any, project: Path, service_account: str, tmp_path: Path
) -> None:
    with without_rule(control_plane, project, PLURAL):
        operator = Operator(project, service_account, tmp_path / "operator.log", "--no-rbac-check")
        try:
            # The API server's message names the resource and the group (a watch or a list).
            message = f'resource "{PLURAL}" in API group "{GROUP}" at the cluster scope'
            log = eventually(
                lambda: operator.output() if message in operator.output() else "",
                "the Forbidden watch in the log",
                operator,
                timeout=20,
            )
            assert "is forbidden" in log
            status = eventually(operator.readyz, "/readyz to answer", operator)
            assert status != 200  # caches never sync: a Deployment of it never becomes available
        finally:
            operator.kill()
