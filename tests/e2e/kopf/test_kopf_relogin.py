"""kopf's re-login on the real control plane: the API server stops accepting the token a login
handler returned (a ServiceAccount token bound to a Secret, and the Secret deleted); the next
write gets 401, the login handlers run again, and the write goes through with the new token:
the operator keeps handling objects without a restart."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import kubeop.kopf as kopf
from kubeop.client import Client, ClientConfig
from kubeop.core.errors import Unauthorized
from kubeop.testing import ControlPlane

pytestmark = pytest.mark.controlplane


class Tokens:
    """ServiceAccount tokens, each bound to a Secret of its own: deleting the Secret revokes it."""

    def __init__(self, cp: ControlPlane, namespace: str) -> None:
        self.cp, self.namespace, self.issued = cp, namespace, 0
        sa = f"/api/v1/namespaces/{namespace}/serviceaccounts"
        cp.api.call("POST", sa, {"metadata": {"name": "operator"}})
        self.binding = f"kopf-relogin-{namespace}"
        cp.api.call(
            "POST",
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "metadata": {"name": self.binding},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": namespace}],
            },
        )

    def issue(self) -> str:
        self.issued += 1
        secret = self.cp.api.call(
            "POST",
            f"/api/v1/namespaces/{self.namespace}/secrets",
            {"metadata": {"name": f"binding-{self.issued}"}},
        )
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": 3600,
                "boundObjectRef": {
                    "kind": "Secret",
                    "apiVersion": "v1",
                    "name": secret["metadata"]["name"],
                    "uid": secret["metadata"]["uid"],
                },
            },
        }
        path = f"/api/v1/namespaces/{self.namespace}/serviceaccounts/operator/token"
        return str(self.cp.api.call("POST", path, request)["status"]["token"])

    def revoke(self, number: int) -> None:
        self.cp.api.call("DELETE", f"/api/v1/namespaces/{self.namespace}/secrets/binding-{number}")

    def close(self) -> None:
        self.cp.api.raw("DELETE", f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{self.binding}")


async def rejected(cp: ControlPlane, token: str, timeout: float = 30.0) -> None:
    """Wait until the API server answers 401 to the token (it caches accepted tokens for ~10 s)."""
    deadline = time.monotonic() + timeout
    async with Client(ClientConfig(server=cp.server, ca_file=cp.ca_file, token=token, qps=None)) as c:
        while True:
            try:
                await c.get("namespaces", "default")
            except Unauthorized:
                return
            assert time.monotonic() < deadline, "the revoked token is still accepted"
            await asyncio.sleep(0.2)


async def test_a_rejected_token_runs_the_login_handlers_again_and_the_operator_keeps_working(
    control_plane: ControlPlane, namespace: str
) -> None:
    tokens = Tokens(control_plane, namespace)
    reg = kopf.Registry()
    returned: list[str] = []
    handled: list[str] = []

    @kopf.on.login(registry=reg)
    def login(**_: Any) -> kopf.ConnectionInfo:
        returned.append(tokens.issue())
        return kopf.ConnectionInfo(
            server=control_plane.server, ca_path=control_plane.ca_file, token=returned[-1]
        )

    @kopf.on.create("configmaps", labels={"relogin-test": "yes"}, registry=reg)
    def created(name: str, patch: kopf.Patch, **_: Any) -> None:
        handled.append(name)
        patch.metadata.labels["handled"] = "yes"

    def labelled(name: str) -> bool:
        cm = control_plane.api.call("GET", f"/api/v1/namespaces/{namespace}/configmaps/{name}")
        return (cm["metadata"].get("labels") or {}).get("handled") == "yes"

    async def until(check: Any, what: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.05)

    stop, ready = asyncio.Event(), asyncio.Event()
    running = asyncio.create_task(
        kopf.operator(registry=reg, namespace=namespace, stop_flag=stop, ready_flag=ready)
    )
    try:
        await asyncio.wait_for(ready.wait(), 30)
        cms = f"/api/v1/namespaces/{namespace}/configmaps"
        control_plane.api.call(
            "POST", cms, {"metadata": {"name": "before", "labels": {"relogin-test": "yes"}}}
        )
        await until(lambda: labelled("before"), "the first object to be handled")
        assert len(returned) == 1

        tokens.revoke(1)
        await rejected(control_plane, returned[0])
        control_plane.api.call(
            "POST", cms, {"metadata": {"name": "after", "labels": {"relogin-test": "yes"}}}
        )
        await until(lambda: labelled("after"), "the object created after the token was revoked")
        assert len(returned) == 2, "the login handler ran once more, for the 401"
        assert handled == ["before", "after"]
    finally:
        stop.set()
        await asyncio.wait_for(running, 30)
        tokens.close()
