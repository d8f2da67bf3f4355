"""``kubeop run`` serving the project's aggregated API: which projects have one, the Service and
APIService it registers (on a FakeCluster), the refusal of an APIService it did not make, the
cleanup, and the command line choosing between it and the exec of the operator."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import os
import signal
import ssl
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from typer.testing import CliRunner

from kubeop.cli import app
from kubeop.cli import local_apiserver as local
from kubeop.cli.local_apiserver import (
    MANAGED_BY,
    OURS,
    ForeignObject,
    LocalApiServer,
    local_apiserver_objects,
    register,
    served_kinds,
    serving_accesses,
    unregister,
)
from kubeop.cli.permissions import Access
from kubeop.core import pki
from kubeop.core.resource import ApiResource
from kubeop.scaffold import Project, create_apiserver
from kubeop.testing import FakeCluster

APISERVICES = ApiResource("apiregistration.k8s.io", "v1", "apiservices", kind="APIService", namespaced=False)
SERVICES = ApiResource("", "v1", "services", kind="Service")
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
NAMESPACES = ApiResource("", "v1", "namespaces", kind="Namespace", namespaced=False)
CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
runner = CliRunner()


@pytest.fixture
def with_apiserver(project: Project) -> Project:
    create_apiserver(project, group="metrics", version="v1alpha1", kind="Usage")
    return project


def test_a_project_without_an_aggregated_api_serves_none(project: Project) -> None:
    assert served_kinds(project) is None


def test_the_kinds_of_the_projects_aggregated_api(with_apiserver: Project) -> None:
    served = served_kinds(with_apiserver)
    assert served is not None
    assert [k.__name__ for k in served.kinds] == ["Usage"]
    assert served.service == "guestbook-operator-apiserver"
    assert served.namespace == with_apiserver.namespace
    assert served.hosts == (f"guestbook-operator-apiserver.{with_apiserver.namespace}.svc", "127.0.0.1")


def _served(project: Project) -> LocalApiServer:
    served = served_kinds(project)
    assert served is not None
    return served


def test_the_service_names_this_machine_and_the_apiservice_trusts_our_ca(with_apiserver: Project) -> None:
    served = _served(with_apiserver)
    service, apiservice = local_apiserver_objects(served, port=43210, ca=CA)
    ns = with_apiserver.namespace
    assert service["kind"] == "Service"
    assert service["metadata"] == {
        "name": "guestbook-operator-apiserver",
        "namespace": ns,
        "labels": {MANAGED_BY: OURS},
    }
    assert service["spec"] == {
        "type": "ExternalName",
        "externalName": "127.0.0.1",
        "ports": [{"name": "https", "port": 43210, "protocol": "TCP"}],
    }
    assert apiservice["metadata"] == {"name": "v1alpha1.metrics.example.com", "labels": {MANAGED_BY: OURS}}
    spec = apiservice["spec"]
    assert spec["group"] == "metrics.example.com" and spec["version"] == "v1alpha1"
    assert spec["service"] == {"name": "guestbook-operator-apiserver", "namespace": ns, "port": 43210}
    assert base64.b64decode(spec["caBundle"]) == CA
    assert "insecureSkipTLSVerify" not in spec


async def test_register_creates_the_namespace_and_applies_then_unregister_deletes(
    with_apiserver: Project,
) -> None:
    objs = local_apiserver_objects(_served(with_apiserver), port=43210, ca=CA)
    ns = with_apiserver.namespace
    async with FakeCluster().client() as api:
        assert await api.get_or_none(NAMESPACES, ns) is None
        # what an earlier run left behind (killed before it could clean up) is ours: taken over
        left = local_apiserver_objects(_served(with_apiserver), port=40000, ca=CA)[1]
        await api.create(left, resource=APISERVICES)
        await register(api, objs)
        assert await api.get_or_none(NAMESPACES, ns) is not None
        apiservice = await api.get(APISERVICES, "v1alpha1.metrics.example.com")
        assert apiservice["spec"]["service"]["port"] == 43210
        assert apiservice["metadata"]["labels"] == {MANAGED_BY: OURS}
        service = await api.get(SERVICES, "guestbook-operator-apiserver", namespace=ns)
        assert service["spec"]["externalName"] == "127.0.0.1"
        await unregister(api, objs)
        assert await api.get_or_none(APISERVICES, "v1alpha1.metrics.example.com") is None
        assert await api.get_or_none(SERVICES, "guestbook-operator-apiserver", namespace=ns) is None
        assert await api.get_or_none(NAMESPACES, ns) is not None  # the namespace stays
        await unregister(api, objs)  # nothing left: nothing to do


async def test_an_apiservice_it_did_not_make_is_refused_and_left_alone(with_apiserver: Project) -> None:
    objs = local_apiserver_objects(_served(with_apiserver), port=43210, ca=CA)
    deployed = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": "v1alpha1.metrics.example.com"},
        "spec": {"group": "metrics.example.com", "version": "v1alpha1", "groupPriorityMinimum": 1000},
    }
    async with FakeCluster().client() as api:
        await api.create(deployed, resource=APISERVICES)
        with pytest.raises(ForeignObject) as refused:
            await register(api, objs)
        message = str(refused.value)
        assert "APIService v1alpha1.metrics.example.com" in message and "did not make it" in message
        assert f"{MANAGED_BY}={OURS}" in message and "--no-apiserver" in message
        assert "kubectl delete apiservices v1alpha1.metrics.example.com" in message
        assert await api.get_or_none(SERVICES, "guestbook-operator-apiserver", namespace="default") is None
        await unregister(api, objs)
        kept = await api.get(APISERVICES, "v1alpha1.metrics.example.com")
        assert "service" not in kept["spec"] and "labels" not in kept["metadata"]


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Whether ``kubeop run`` exec'd the operator or served the aggregated API beside it."""
    seen: dict[str, Any] = {}

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        seen.update(execve=argv)

    async def serve(served: LocalApiServer, **kw: Any) -> int:
        seen.update(served=served, **kw)
        return 3

    monkeypatch.setattr(os, "execve", execve)
    monkeypatch.setattr("kubeop.cli.run.serve_with_operator", serve)
    return seen


def _run(project: Project, *args: str) -> tuple[int, str]:
    base = ["run", "--dir", str(project.root), "--no-rbac-check", "--no-webhooks"]
    result = runner.invoke(app, [*base, *args])
    return result.exit_code, result.output


def test_run_serves_the_aggregated_api_beside_the_operator(
    with_apiserver: Project, launched: dict[str, Any], tmp_path: Path
) -> None:
    code, out = _run(with_apiserver, "--apiserver-sqlite", str(tmp_path / "api.db"))
    assert code == 3, out  # the operator's exit code
    assert "execve" not in launched
    assert launched["command"] == [sys.executable, "-m", "guestbook_operator"]
    assert launched["sqlite"] == str(tmp_path / "api.db")
    assert [k.__name__ for k in launched["served"].kinds] == ["Usage"]
    assert str(with_apiserver.package_root) in launched["env"]["PYTHONPATH"]


def test_no_apiserver_execs_the_operator_as_ever(with_apiserver: Project, launched: dict[str, Any]) -> None:
    code, out = _run(with_apiserver, "--no-apiserver")
    assert code == 0, out
    assert "served" not in launched and launched["execve"][1:] == ["-m", "guestbook_operator"]


def test_a_project_without_an_aggregated_api_execs_the_operator(
    project: Project, launched: dict[str, Any]
) -> None:
    code, out = _run(project)
    assert code == 0, out
    assert "served" not in launched and "execve" in launched


async def test_serving_asks_to_register_its_objects_and_to_authenticate_and_authorize(
    with_apiserver: Project,
) -> None:
    ns = with_apiserver.namespace
    service = f"services named guestbook-operator-apiserver in namespace {ns}"
    apiservice = "apiservices.apiregistration.k8s.io named v1alpha1.metrics.example.com (cluster-wide)"
    async with FakeCluster().client() as api:
        wanted = await serving_accesses(api, _served(with_apiserver))
        assert [a.describe() for a in wanted] == [
            *(f"{verb} {service}" for verb in ("get", "create", "patch", "delete")),
            *(f"{verb} {apiservice}" for verb in ("get", "create", "patch", "delete")),
            f"get namespaces named {ns} (cluster-wide)",
            "create namespaces (cluster-wide)",  # register creates it: it is missing
            "create tokenreviews.authentication.k8s.io (cluster-wide)",
            "create subjectaccessreviews.authorization.k8s.io (cluster-wide)",
            "get configmaps named extension-apiserver-authentication in namespace kube-system",
        ]
        await api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        there = await serving_accesses(api, _served(with_apiserver))
        assert Access("create", "", "namespaces") not in there and len(there) == len(wanted) - 1


def _wait_for(path: Path, timeout: float = 20.0) -> None:
    """Until ``path`` exists (the child operator touches it once it runs), at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def _authorizer(monkeypatch: pytest.MonkeyPatch, refused: set[str]) -> list[Access]:
    """``kubeop run``'s check against a FakeCluster (it serves no SelfSubjectAccessReview): the
    authorizer's answers, every access allowed but those of the resources in ``refused``; returns
    the accesses asked."""
    cluster = FakeCluster()
    asked: list[Access] = []

    async def denied(client: Any, wanted: Any) -> list[tuple[Access, str]]:
        items = list(wanted)
        asked.extend(items)
        return [(a, "no RBAC rule") for a in items if a.resource in refused]

    monkeypatch.setattr("kubeop.cli.run.connect", lambda kubeconfig, context: cluster.client())
    monkeypatch.setattr("kubeop.cli.run.denied", denied)
    return asked


def test_the_permission_check_names_what_serving_the_api_needs(
    with_apiserver: Project, launched: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _authorizer(monkeypatch, {"tokenreviews", "apiservices"})
    result = runner.invoke(app, ["run", "--dir", str(with_apiserver.root), "--no-webhooks"])
    out = result.output
    assert result.exit_code == 1, out
    assert "served" not in launched and "execve" not in launched  # refused before anything runs
    assert "and those serving its aggregated API needs (13)" in out
    apiservice = "apiservices.apiregistration.k8s.io named v1alpha1.metrics.example.com (cluster-wide)"
    assert (
        f"may not\n  - get {apiservice}\n  - create {apiservice}\n  - patch {apiservice}\n"
        f"  - delete {apiservice}\n  - create tokenreviews.authentication.k8s.io (cluster-wide)\n"
        "which serving the project's aggregated API from here needs"
    ) in out
    assert "--no-apiserver" in out and out.rstrip().endswith("or skip this check with --no-rbac-check")
    assert "but the operator" not in out  # the operator's own permissions are all granted
    assert Access("create", "authorization.k8s.io", "subjectaccessreviews") in asked


def test_the_permission_check_names_the_operators_and_the_apis_apart(
    with_apiserver: Project, launched: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _authorizer(monkeypatch, {"guestbooks", "configmaps"})
    result = runner.invoke(app, ["run", "--dir", str(with_apiserver.root), "--no-webhooks"])
    out = " ".join(result.output.split())
    assert result.exit_code == 1, out
    assert "may not - create guestbooks.webapp.example.com (cluster-wide)" in out
    assert "- update guestbooks/status.webapp.example.com (cluster-wide) but the operator" in out
    assert "but the operator's code declares it needs to (config/rbac/role.yaml)" in out
    assert (
        "Nor may it - get configmaps named extension-apiserver-authentication in namespace kube-system "
        "which serving the project's aggregated API from here needs"
    ) in out


def test_without_the_api_the_check_asks_only_for_the_operators_permissions(
    with_apiserver: Project, launched: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _authorizer(monkeypatch, {"tokenreviews", "apiservices"})
    result = runner.invoke(app, ["run", "--dir", str(with_apiserver.root), "--no-webhooks", "--no-apiserver"])
    assert result.exit_code == 0, result.output
    assert "execve" in launched and "aggregated API" not in result.output
    assert asked and not {"tokenreviews", "subjectaccessreviews", "apiservices"} & {a.resource for a in asked}


async def test_the_operator_gets_the_signal_and_its_exit_code_is_returned(tmp_path: Path) -> None:
    up = tmp_path / "up"
    script = (
        "import pathlib, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(7))\n"
        f"pathlib.Path({str(up)!r}).touch()\n"
        "time.sleep(30)\n"
    )

    async def signal_when_up() -> None:
        await asyncio.to_thread(_wait_for, up)
        os.kill(os.getpid(), signal.SIGTERM)  # to this process: _operator forwards it

    async with asyncio.timeout(20):
        sender = asyncio.create_task(signal_when_up())
        code = await local._operator([sys.executable, "-c", script], dict(os.environ))
        await sender
    assert code == 7


async def test_served_and_registered_while_the_operator_runs_then_unregistered(
    with_apiserver: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = FakeCluster()
    front_proxy_key = pki.new_key()
    front_proxy = pki.self_signed_ca(front_proxy_key, "front-proxy-ca", dt.timedelta(days=1), path_length=0)
    async with cluster.client() as setup:
        await setup.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
                "data": {
                    "requestheader-client-ca-file": front_proxy.public_bytes(
                        serialization.Encoding.PEM
                    ).decode()
                },
            },
            resource=CONFIGMAPS,
        )
    monkeypatch.setattr(local, "connect", lambda kubeconfig, context: cluster.client())
    up, done = tmp_path / "up", tmp_path / "done"
    operator = (
        "import pathlib, sys, time\n"
        f"pathlib.Path({str(up)!r}).touch()\n"
        "deadline = time.monotonic() + 20\n"
        f"while not pathlib.Path({str(done)!r}).exists() and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "sys.exit(5)\n"
    )
    served = _served(with_apiserver)
    seen: dict[str, Any] = {}

    async def while_it_runs() -> None:
        await asyncio.to_thread(_wait_for, up)
        try:
            async with cluster.client() as api:
                apiservice = await api.get(APISERVICES, "v1alpha1.metrics.example.com")
            port = apiservice["spec"]["service"]["port"]
            trust = ssl.create_default_context(
                cadata=base64.b64decode(apiservice["spec"]["caBundle"]).decode()
            )
            _, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=trust, server_hostname=served.hosts[0]
            )
            seen["tls"] = writer.get_extra_info("peercert")["subjectAltName"]
            writer.close()
        finally:
            done.touch()

    async with asyncio.timeout(60):
        observer = asyncio.create_task(while_it_runs())
        code = await local.serve_with_operator(
            served,
            kubeconfig=None,
            sqlite=None,
            command=[sys.executable, "-c", operator],
            env=dict(os.environ),
        )
        await observer
    assert code == 5  # the operator's
    assert ("DNS", served.hosts[0]) in seen["tls"]  # the caBundle trusts the server, for its Service name
    async with cluster.client() as api:
        assert await api.get_or_none(APISERVICES, "v1alpha1.metrics.example.com") is None
        assert await api.get_or_none(SERVICES, served.service, namespace=served.namespace) is None
