"""examples/mysql and examples/dbcluster as kubeop projects (minimal control plane, a few seconds each).

In each example directory: ``kubeop install`` serves the CRD, ``kubeop deploy --dry-run`` prints
the operator's objects, and the operator (``kubeop run``, its startup RBAC check included) runs
as its service account bound to exactly the generated config/rbac: one sample is reconciled to
its children (owned by it) and a status, with nothing forbidden on the way. Pods need not run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.cli.conftest import kubeop, ok

pytestmark = pytest.mark.controlplane

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


class Example:
    def __init__(self, name: str, operator: str, plural: str, sample: str, children: dict[str, str]) -> None:
        self.root = EXAMPLES / name
        self.operator = operator
        self.namespace = f"{operator}-system"
        self.plural = plural
        self.sample = self.root / "config" / "samples" / sample
        self.children = children
        """The children one reconcile makes: API path segment (under /namespaces/<ns>/) -> kind."""


MYSQL = Example(
    "mysql",
    "mysql-operator",
    "mysqls",
    "db_v1alpha1_mysql.yaml",
    {
        "apis/apps/v1/{ns}/statefulsets": "StatefulSet",
        "api/v1/{ns}/services": "Service",
        "api/v1/{ns}/secrets": "Secret",
    },
)
DBCLUSTER = Example(
    "dbcluster",
    "dbcluster-operator",
    "databaseclusters",
    "db_v1alpha1_databasecluster.yaml",
    {
        "apis/apps/v1/{ns}/statefulsets": "StatefulSet",
        "api/v1/{ns}/services": "Service",
        "api/v1/{ns}/configmaps": "ConfigMap",
    },
)


def _path(template: str, namespace: str) -> str:
    prefix, _, rest = template.partition("/{ns}/")
    return f"/{prefix}/namespaces/{namespace}/{rest}"


def _eventually(check: Callable[[], Any], what: str, proc: subprocess.Popen[bytes], log: Path) -> Any:
    deadline = time.monotonic() + 30
    while True:
        value = check()
        if value:
            return value
        if proc.poll() is not None:
            raise AssertionError(f"the operator exited ({proc.returncode}) before {what}:\n{log.read_text()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; operator output:\n{log.read_text()}")
        time.sleep(0.2)


@pytest.fixture(scope="module", params=[MYSQL, DBCLUSTER], ids=lambda e: e.root.name)
def example(request: pytest.FixtureRequest, control_plane: Any) -> Iterator[Example]:
    """The example's CRD installed with ``kubeop install``, its namespace and config/rbac applied."""
    ex: Example = request.param
    ok(kubeop("install", cwd=ex.root, kubeconfig=control_plane.kubeconfig_path))
    control_plane.create_namespace(ex.namespace)
    control_plane.kubectl("apply", "--server-side", "-k", str(ex.root / "config" / "rbac"))
    try:
        yield ex
    finally:
        control_plane.kubectl(
            "delete", "-k", str(ex.root / "config" / "rbac"), "--ignore-not-found", check=False
        )
        control_plane.delete_namespace(ex.namespace)


@pytest.mark.parametrize("example", [MYSQL, DBCLUSTER], ids=lambda e: e.root.name)
def test_deploy_dry_run_prints_the_operator_of_the_example(example: Example) -> None:
    res = kubeop("deploy", "--dry-run", cwd=example.root)
    ok(res)
    objs = [o for o in yaml.safe_load_all(res.stdout) if o]
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objs}
    assert ("Namespace", example.namespace) in kinds
    assert ("Deployment", f"{example.operator}-controller-manager") in kinds
    assert ("ClusterRole", f"{example.operator}-manager-role") in kinds
    assert ("CustomResourceDefinition", f"{example.plural}.db.example.com") in kinds
    deployment = next(o for o in objs if o["kind"] == "Deployment")
    assert deployment["metadata"]["namespace"] == example.namespace
    assert "nothing applied" in res.stderr


def test_the_example_reconciles_a_sample_under_exactly_the_generated_rbac(
    example: Example, control_plane: Any, namespace: str, tmp_path: Path
) -> None:
    account = control_plane.kubeconfig_for_service_account(
        example.namespace, f"{example.operator}-controller-manager"
    )
    log = tmp_path / "operator.log"
    env = {**os.environ, "KUBECONFIG": account, "METRICS_BIND_ADDRESS": "", "HEALTH_PROBE_BIND_ADDRESS": ""}
    env.pop("SMTP_HOST", None)
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubeop", "run"],
            cwd=example.root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    sample = yaml.safe_load(example.sample.read_text())
    name = sample["metadata"]["name"]
    path = f"/apis/db.example.com/v1alpha1/namespaces/{namespace}/{example.plural}/{name}"
    try:
        control_plane.kubectl("apply", "-n", namespace, "-f", str(example.sample))
        uid = control_plane.api.call("GET", path)["metadata"]["uid"]

        def owned(template: str) -> list[str]:
            items = control_plane.api.call("GET", _path(template, namespace))["items"]
            return [
                i["metadata"]["name"]
                for i in items
                if any(r.get("uid") == uid for r in i["metadata"].get("ownerReferences") or ())
            ]

        for template, kind in example.children.items():
            _eventually(lambda: owned(template), f"a {kind} owned by the sample", proc, log)  # noqa: B023
        _eventually(
            lambda: (control_plane.api.call("GET", path).get("status") or {}).get("conditions"),
            "the sample's status conditions",
            proc,
            log,
        )
        output = log.read_text()
        assert "checking the operator's permissions" in output, output
        denied = [line for line in output.splitlines() if "forbidden" in line.lower() or " 403" in line]
        assert not denied, output
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(40)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        # the operator is gone: let the sample (and its namespace) go without its finalizer
        control_plane.kubectl(
            "patch",
            f"{example.plural}.db.example.com",
            name,
            "-n",
            namespace,
            "--type=merge",
            "-p",
            '{"metadata": {"finalizers": null}}',
            check=False,
        )
