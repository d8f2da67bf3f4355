"""Discovery of CRDs created later, RBAC (403), token and exec-plugin authentication, bad input."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeop.client import ApiConnectionError, Client, UnknownResource, load_kubeconfig
from kubeop.core import ApiResource, Forbidden, GroupVersionKind, NotFound, Unauthorized

pytestmark = pytest.mark.controlplane

CM = ApiResource("", "v1", "configmaps", kind="ConfigMap")
CRDS = ApiResource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    kind="CustomResourceDefinition",
    namespaced=False,
)


async def test_discovery_finds_a_crd_created_after_start(
    client: Client, namespace: str, eventually: Any
) -> None:
    await client.resource("configmaps")  # discovery loaded before the CRD exists
    group = f"{namespace}.late.kubeop.dev"
    gvk = GroupVersionKind(group, "v1", "Gadget")
    with pytest.raises(UnknownResource, match="is the CRD installed"):
        await client.resource(gvk)
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }
    await client.create(crd)
    try:

        async def established() -> bool:
            obj = await client.get(CRDS, f"gadgets.{group}")
            return any(
                c["type"] == "Established" and c["status"] == "True"
                for c in (obj.get("status") or {}).get("conditions") or []  # null right after creation
            )

        await eventually(established, what="CRD Established")

        async def discovered() -> ApiResource | None:
            # Aggregated discovery is updated shortly after Established; each miss refreshes.
            try:
                return await client.resource(gvk)
            except UnknownResource:
                await asyncio.sleep(0.2)  # stay under the miss-refresh rate limit
                return None

        res = await eventually(discovered, what="the new kind in discovery")
        assert (res.plural, res.namespaced) == ("gadgets", False)
        gadget = {"apiVersion": f"{group}/v1", "kind": "Gadget", "metadata": {"name": "g"}, "x": 1}

        async def created() -> dict[str, Any] | None:
            # The CRD's REST handler can lag discovery by a moment under load (404 until ready).
            try:
                return await client.create(gadget)
            except NotFound:
                return None

        made = await eventually(created, what="the first Gadget to be created")
        assert made["x"] == 1
    finally:
        await client.delete(CRDS, f"gadgets.{group}")


async def test_user_without_rbac_is_forbidden(control_plane: Any, namespace: str) -> None:
    path = control_plane.kubeconfig_for_user(f"nobody-{namespace}")
    async with Client(load_kubeconfig(path, namespace=namespace)) as client:
        with pytest.raises(Forbidden) as info:
            await client.list(CM)
        assert info.value.code == 403 and f"nobody-{namespace}" in str(info.value)
        assert "configmaps" in str(info.value)


async def test_service_account_token_and_rbac(
    control_plane: Any, client: Client, namespace: str, eventually: Any
) -> None:
    await client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "readable"}})
    path = control_plane.kubeconfig_for_service_account(namespace, "reader")
    async with Client(load_kubeconfig(path, namespace=namespace)) as sa:
        with pytest.raises(Forbidden):
            await sa.get(CM, "readable")
        await client.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "read-cm"},
                "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}],
            }
        )
        await client.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "read-cm"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-cm"},
                "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}],
            }
        )

        async def allowed() -> bool:
            try:
                await sa.get(CM, "readable")
            except Forbidden:
                return False
            return True

        await eventually(allowed, what="RBAC to take effect")


def _token_of(path: str) -> str:
    doc = yaml.safe_load(Path(path).read_text())
    return str(doc["users"][0]["user"]["token"])


async def test_exec_plugin_authenticates(control_plane: Any, tmp_path: Path, namespace: str) -> None:
    token = _token_of(control_plane.kubeconfig_for_service_account(namespace, "exec-user"))
    plugin = tmp_path / "plugin.py"
    counter = tmp_path / "runs"
    answer = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": token},
    }
    plugin.write_text(
        "import pathlib\n"
        f"p = pathlib.Path({str(counter)!r})\n"
        "p.write_text(str(int(p.read_text()) + 1 if p.exists() else 1))\n"
        f"print({json.dumps(json.dumps(answer))})\n"
    )
    admin = yaml.safe_load(Path(control_plane.kubeconfig_path).read_text())  # noqa: ASYNC240
    cluster = admin["clusters"][0]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [
            {
                "name": "exec",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": sys.executable,
                        "args": [str(plugin)],
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
        "contexts": [
            {"name": "exec", "context": {"cluster": cluster["name"], "user": "exec", "namespace": namespace}}
        ],
        "current-context": "exec",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    async with Client(load_kubeconfig(str(path))) as client:
        # Authenticated as the service account: the API answers 403 (who it is), not 401.
        with pytest.raises(Forbidden, match=f"system:serviceaccount:{namespace}:exec-user"):
            await client.list(CM)
        with pytest.raises(Forbidden):
            await client.list(CM)
    assert counter.read_text() == "1"  # the credential was cached between requests


async def test_bad_token_is_unauthorized(control_plane: Any, tmp_path: Path) -> None:
    config = load_kubeconfig(control_plane.kubeconfig_path, qps=None)
    bad = config.with_options(
        token="not-a-token",
        client_cert_data=None,
        client_cert_file=None,
        client_key_data=None,
        client_key_file=None,
    )
    async with Client(bad) as client:
        with pytest.raises(Unauthorized, match=r"credentials from kubeconfig"):
            await client.list(CM, namespace="default")


async def test_untrusted_server_is_a_clear_tls_error(control_plane: Any) -> None:
    # Without the cluster's CA, the system trust store does not vouch for the test API server.
    config = load_kubeconfig(control_plane.kubeconfig_path, qps=None, max_retries=0)
    untrusted = config.with_options(ca_data=None, ca_file=None)
    async with Client(untrusted) as client:
        with pytest.raises(ApiConnectionError, match="TLS verification of API server https://"):
            await client.list(CM, namespace="default")
