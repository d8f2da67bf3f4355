"""Generated RBAC on a server with RBAC authorization: the roles are accepted, and a user bound
to them can do exactly what was declared (and nothing it was not)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from kubeop.client import Client, load_kubeconfig
from kubeop.core import Forbidden
from kubeop.crd import CamelModel, CustomResource, crd_manifest, render_yaml
from kubeop.crd.rbac import (
    Permissions,
    cluster_role,
    cluster_role_binding,
    editor_role,
    leader_election_role,
    metrics_auth_role,
    metrics_reader_role,
    rbac_rule,
    role_binding,
    viewer_role,
)
from kubeop.testing.pytest_plugin import namespace_name

from .conftest import installed

pytestmark = pytest.mark.controlplane

GROUP = "rbac.crd-tests.kubeop.dev"
PREFIX = "kubeop-crd-tests"
OPERATOR = f"{PREFIX}-operator"
USER = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": OPERATOR}


class ReportStatus(CamelModel):
    pages: int = 0


class Report(CustomResource, group=GROUP, version="v1", subresources=("status",)):
    spec: dict[str, str] = {}
    status: ReportStatus | None = None


@rbac_rule(resources="secrets", verbs="get", resource_names="report-signing-key")
async def reconcile(req: object) -> None:  # where the permission is needed, it is declared
    return None


def manager_rules() -> Permissions:
    return (
        Permissions()
        .watches(Report)
        .status(Report)
        .finalizers(Report)
        .owns("configmaps")
        .events()
        .declared(reconcile)
    )


@pytest.fixture(scope="module")
def operator_ns(control_plane: Any) -> Iterator[str]:
    """A namespace for the whole module: the operator's own (leader election lives there)."""
    name = namespace_name(f"{PREFIX}-rbac")
    control_plane.create_namespace(name)
    yield name
    control_plane.delete_namespace(name)


@pytest.fixture(scope="module")
def applied(control_plane: Any, operator_ns: str) -> Iterator[str]:
    """The CRD and every generated role applied, the operator user bound as a deployment would be;
    yields that user's kubeconfig."""
    objs = [
        cluster_role(f"{PREFIX}-manager-role", manager_rules().rules()),
        cluster_role_binding(f"{PREFIX}-manager-rolebinding", f"{PREFIX}-manager-role", [USER]),
        leader_election_role(f"{PREFIX}-leader-election-role", namespace=operator_ns),
        role_binding(
            f"{PREFIX}-leader-election-rolebinding",
            f"{PREFIX}-leader-election-role",
            [USER],
            namespace=operator_ns,
        ),
        metrics_reader_role(f"{PREFIX}-metrics-reader"),
        metrics_auth_role(f"{PREFIX}-metrics-auth-role"),
        editor_role(Report, name=f"{PREFIX}-report-editor-role", aggregate=True),
        viewer_role(Report, name=f"{PREFIX}-report-viewer-role", aggregate=True),
    ]
    for _ in installed(control_plane, [crd_manifest(Report)]):
        res = control_plane.kubectl("apply", "--server-side", "-f", "-", input=render_yaml(objs), check=False)
        assert res.returncode == 0 and "Warning" not in res.stderr, res.stderr
        yield control_plane.kubeconfig_for_user(OPERATOR)
        for obj in objs:
            if obj["kind"].startswith("Cluster"):
                control_plane.kubectl(
                    "delete", obj["kind"].lower(), obj["metadata"]["name"], "--ignore-not-found"
                )


def can_i(control_plane: Any, kubeconfig: str, *args: str) -> bool:
    res = control_plane.kubectl("auth", "can-i", *args, kubeconfig=kubeconfig, check=False)
    return res.stdout.strip() == "yes"


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        (["list", f"reports.{GROUP}", "--all-namespaces"], True),
        (["watch", f"reports.{GROUP}"], True),
        (["patch", f"reports.{GROUP}", "--subresource=status"], True),
        (["update", f"reports.{GROUP}", "--subresource=finalizers"], True),
        (["delete", f"reports.{GROUP}"], False),
        (["create", f"reports.{GROUP}"], False),
        (["create", "configmaps"], True),
        (["delete", "configmaps"], True),
        (["create", "events"], True),
        (["create", "events.events.k8s.io"], True),
        (["get", "secrets/report-signing-key"], True),
        (["get", "secrets/other"], False),
        (["list", "secrets"], False),
        (["create", "leases.coordination.k8s.io"], True),
        (["create", "leases.coordination.k8s.io", "-n", "default"], False),
        (["create", "deployments.apps"], False),
    ],
)
def test_the_operator_can_do_exactly_what_was_declared(
    control_plane: Any, applied: str, operator_ns: str, args: list[str], allowed: bool
) -> None:
    ns = [] if "-n" in args or "--all-namespaces" in args else ["-n", operator_ns]
    assert can_i(control_plane, applied, *args, *ns) is allowed


async def test_typed_client_under_the_generated_role(
    control_plane: Any, applied: str, namespace: str
) -> None:
    control_plane.kubectl(
        "create",
        "-n",
        namespace,
        "-f",
        "-",
        input=json.dumps(
            {"apiVersion": f"{GROUP}/v1", "kind": "Report", "metadata": {"name": "r"}, "spec": {}}
        ),
    )
    async with Client(load_kubeconfig(applied, namespace=namespace, qps=None)) as client:
        (report,) = (await client.list(Report)).items
        report.status = ReportStatus(pages=3)
        updated = await client.update_status(report)
        assert updated.status == ReportStatus(pages=3)
        with pytest.raises(Forbidden, match="cannot delete resource"):
            await client.delete(Report, "r")
