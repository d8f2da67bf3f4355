"""HTTPS metrics with authentication and authorization on the real control plane: the API server
reviews the scrapers' ServiceAccount tokens (TokenReview) and RBAC decides (SubjectAccessReview),
so the generated metrics-reader ClusterRole is what lets a scraper in.

The manager runs as a ServiceAccount bound to the generated metrics-auth-role only (create
tokenreviews and subjectaccessreviews), as the scaffolded Deployment does; a scraper
ServiceAccount bound to the generated metrics-reader gets 200, one without it 403, no token or a
garbage token 401, and a manager that may not review fails closed (500).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubeop.client import Client
from kubeop.core.request import RequestBuilder
from kubeop.core.resource import ApiResource
from kubeop.crd.rbac import cluster_role_binding, metrics_auth_role, metrics_reader_role, service_account
from kubeop.manager import Manager, Serving
from kubeop.manager.delegated_auth import DelegatedAuth
from kubeop.testing import ControlPlane

from .conftest import client_for, running

pytestmark = pytest.mark.controlplane

SERVICE_ACCOUNTS = ApiResource("", "v1", "serviceaccounts", kind="ServiceAccount")
CLUSTER_ROLES = ApiResource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", kind="ClusterRole", namespaced=False
)
CLUSTER_ROLE_BINDINGS = ApiResource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", kind="ClusterRoleBinding", namespaced=False
)


async def _token(admin: Client, namespace: str, name: str) -> str:
    """A fresh token of ServiceAccount namespace/name (created if missing), from the TokenRequest API."""
    with contextlib.suppress(Exception):
        await admin.create({"metadata": {"name": name}}, namespace=namespace, resource=SERVICE_ACCOUNTS)
    request = RequestBuilder(SERVICE_ACCOUNTS, namespace).create(
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
        subresource_of=name,
        subresource="token",
    )
    answer: dict[str, Any] = await admin.request(request)
    return str(answer["status"]["token"])


@contextlib.asynccontextmanager
async def _cluster_objects(admin: Client, objs: list[dict[str, Any]]) -> AsyncIterator[None]:
    for obj in objs:
        resource = CLUSTER_ROLES if obj["kind"] == "ClusterRole" else CLUSTER_ROLE_BINDINGS
        await admin.create(obj, resource=resource)
    try:
        yield
    finally:
        for obj in reversed(objs):
            resource = CLUSTER_ROLES if obj["kind"] == "ClusterRole" else CLUSTER_ROLE_BINDINGS
            with contextlib.suppress(Exception):
                await admin.delete(resource, obj["metadata"]["name"])


@contextlib.asynccontextmanager
async def _setup(control_plane: ControlPlane, namespace: str) -> AsyncIterator[dict[str, str]]:
    """The generated roles, bound as a deployment binds them: metrics-auth-role to the operator's
    ServiceAccount, metrics-reader to the scraper's (that binding is the user's in a real one).
    Yields the kubeconfig of the operator's ServiceAccount and the callers' tokens."""
    reader, auth = f"{namespace}-metrics-reader", f"{namespace}-metrics-auth-role"
    objs = [
        metrics_reader_role(reader),
        metrics_auth_role(auth),
        cluster_role_binding(f"{namespace}-metrics-auth", auth, [service_account("operator", namespace)]),
        cluster_role_binding(f"{namespace}-metrics-reader", reader, [service_account("scraper", namespace)]),
    ]
    async with client_for(control_plane.kubeconfig_path) as admin, _cluster_objects(admin, objs):
        operator = control_plane.kubeconfig_for_service_account(namespace, "operator")
        yield {
            "operator": operator,
            "scraper": await _token(admin, namespace, "scraper"),
            "stranger": await _token(admin, namespace, "stranger"),
            "unprivileged": control_plane.kubeconfig_for_service_account(namespace, "unprivileged"),
        }


async def test_the_api_server_decides_who_may_read_metrics(
    control_plane: ControlPlane, namespace: str
) -> None:
    async with _setup(control_plane, namespace) as who:
        async with client_for(who["operator"]) as operator:
            auth = DelegatedAuth(operator)
            assert await auth.check(f"Bearer {who['scraper']}") is None
            refusal = await auth.check(f"Bearer {who['stranger']}")
            assert refusal is not None and refusal[0] == 403
            assert f"system:serviceaccount:{namespace}:stranger" in refusal[1]
            for header in (None, "Bearer garbage", f"Bearer {who['scraper']}x", "Basic c2NyYXBlcg=="):
                refusal = await auth.check(header)
                assert refusal is not None and refusal[0] == 401, header
            # authorized for /metrics, not for another path
            refusal = await auth.check(f"Bearer {who['scraper']}", path="/debug/pprof")
            assert refusal is not None and refusal[0] == 403
        # a manager whose identity may not create the reviews fails closed
        async with client_for(who["unprivileged"]) as unprivileged:
            refusal = await DelegatedAuth(unprivileged).check(f"Bearer {who['scraper']}")
            assert refusal is not None and refusal[0] == 500


async def _get(port: int, path: str, token: str | None, ca_pem: bytes | None) -> tuple[int, bytes]:
    """One HTTPS GET (verifying the server with ``ca_pem``; None: plain HTTP)."""
    ctx = ssl.create_default_context(cadata=ca_pem.decode()) if ca_pem is not None else None
    async with asyncio.timeout(15):
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1" if ctx else None
        )
        auth = f"Authorization: Bearer {token}\r\n" if token is not None else ""
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n".encode())
        await writer.drain()
        data = await reader.read()
        writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), body


@pytest.mark.parametrize("certificate", ["self-signed", "cert-dir"])
async def test_a_manager_serves_metrics_over_https_to_the_metrics_reader_only(
    control_plane: ControlPlane, namespace: str, certificate: str, tmp_path: Path
) -> None:
    cert_dir, ca_pem = None, b""
    if certificate == "cert-dir":
        from kubeop.webhook.certs import local_certificates

        certs = local_certificates(tmp_path / "certs", hosts=("127.0.0.1",))
        cert_dir, ca_pem = str(certs.directory), certs.ca_pem
    async with _setup(control_plane, namespace) as who, client_for(who["operator"]) as operator:
        manager = Manager(
            operator,
            name="secure-metrics",
            serving=Serving(
                metrics_address="127.0.0.1:0",
                metrics_secure=True,
                metrics_cert_dir=cert_dir,
                health_address="127.0.0.1:0",
            ),
        )
        async with running(manager):
            if manager.metrics_tls is not None:
                ca_pem = manager.metrics_tls.ca_pem
            health, metrics = manager.servers
            status, body = await _get(metrics.port, "/metrics", who["scraper"], ca_pem)
            assert status == 200 and b"rest_client_requests_total" in body
            assert (await _get(metrics.port, "/metrics", who["stranger"], ca_pem))[0] == 403
            assert (await _get(metrics.port, "/metrics", None, ca_pem))[0] == 401
            assert (await _get(metrics.port, "/metrics", "garbage", ca_pem))[0] == 401
            with pytest.raises((OSError, ValueError, IndexError)):
                await _get(metrics.port, "/metrics", who["scraper"], None)  # no plain HTTP
            # the probes stay plain HTTP for the kubelet, and have no metrics
            assert await _get(health.port, "/readyz", None, None) == (200, b"ok")
            assert (await _get(health.port, "/metrics", None, None))[0] == 404
