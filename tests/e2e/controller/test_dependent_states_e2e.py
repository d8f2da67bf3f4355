"""Dependents on the real API server, the states the ordering test does not reach: a read-only
dependent whose readiness follows an object someone else makes and changes (and which the
workflow never writes), and a dependent the API server refuses (Degraded, retried with backoff)
that recovers once the primary's spec is fixed.

Neither needs the controller-manager: both run on the minimal control plane.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from pydantic import ConfigDict, Field

from kubeop.controller import Controller, Dependent, GenerationChanged, Request
from kubeop.core.resource import ApiResource
from kubeop.crd import CamelModel, CustomResource, crd_manifest
from kubeop.manager import Manager, Serving
from kubeop.queue import ItemExponentialFailureRateLimiter
from kubeop.testing import ControlPlane

from .conftest import client_for, eventually, running

pytestmark = [pytest.mark.controlplane]

CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
SECRETS = ApiResource("", "v1", "secrets", kind="Secret")
SERVICES = ApiResource("", "v1", "services", kind="Service")


class PortalSpec(CamelModel):
    credentials: str = "portal-credentials"
    port: int = 80


class PortalStatus(CamelModel):
    model_config = ConfigDict(extra="allow")

    conditions: list[dict[str, Any]] = Field(default_factory=list)


class Portal(CustomResource, group="states.e2e.kubeop.dev", version="v1", subresources=["status"]):
    spec: PortalSpec = Field(default_factory=PortalSpec)
    status: PortalStatus | None = None


PORTALS = ApiResource("states.e2e.kubeop.dev", "v1", "portals", kind="Portal")


def _conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c["status"], c["reason"], c.get("message", ""))
        for c in (obj.get("status") or {}).get("conditions", [])
    }


def _manager(client: Any, controller: Controller) -> Manager:
    manager = Manager(client, name="portals", serving=Serving(metrics_address=None, health_address=None))
    manager.add(controller)
    return manager


async def test_an_external_dependent_gates_readiness_and_is_never_written(
    control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.install_crds([crd_manifest(Portal)])

    def config(portal: Portal, ctx: Any) -> dict[str, Any]:
        return {
            "metadata": {"name": f"{portal.metadata.name}-config"},
            "data": {"port": str(portal.spec.port)},
        }

    def has_password(secret: dict[str, Any]) -> bool:
        return "password" in (secret.get("data") or {})

    def portals_using(secret: Any) -> list[Request]:  # the Secret's events: the Portal naming it
        if secret["metadata"]["name"] != "portal-credentials":
            return []
        return [Request(secret["metadata"]["namespace"], "portal")]

    controller = (
        Controller.for_(Portal, namespace=namespace)
        .dependents(
            Dependent.external(
                SECRETS, name=lambda p: p.spec.credentials, ready=has_password, dependent_name="credentials"
            ),
            Dependent(CONFIGMAPS, desired=config, name="config", depends_on="credentials"),
        )
        .watches(SECRETS, portals_using)
    )
    async with (
        client_for(control_plane.kubeconfig_path) as api,
        client_for(control_plane.kubeconfig_path) as c,
        running(_manager(c, controller)),
    ):
        await api.create(
            {
                "apiVersion": Portal.api_version,
                "kind": "Portal",
                "metadata": {"name": "portal", "namespace": namespace},
            }
        )

        async def conditions() -> dict[str, tuple[str, str, str]]:
            return _conditions(await api.get(PORTALS, "portal", namespace=namespace))

        async def having(**want: tuple[str, str]) -> dict[str, tuple[str, str, str]]:
            now = await conditions()
            return now if all(now.get(t, ("", "", ""))[:2] == v for t, v in want.items()) else {}

        # 1. the Secret does not exist: the external dependent waits, the ConfigMap after it
        seen = await eventually(
            lambda: having(CredentialsReady=("False", "NotReady"), ConfigReady=("False", "Waiting")),
            30,
            "the external Secret reported missing",
        )
        assert "waiting for Secret portal-credentials to exist" in seen["CredentialsReady"][2]
        assert seen["Ready"][:2] == ("False", "DependentsNotReady")
        assert seen["Degraded"][:2] == ("False", "AsExpected")
        assert await api.get_or_none(CONFIGMAPS, "portal-config", namespace=namespace) is None

        # 2. someone makes it, not ready yet (no password): still not ready, now for that reason
        made = await api.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "portal-credentials", "namespace": namespace},
                "data": {"user": "YWRtaW4="},
            }
        )
        await eventually(
            lambda: _message_is(
                conditions, "CredentialsReady", "waiting for Secret portal-credentials to be ready"
            ),
            30,
            "the external Secret seen, not ready",
        )
        assert (await conditions())["ConfigReady"][:2] == ("False", "Waiting")
        await _unwritten_since(api, namespace, made)

        # 3. it becomes ready (a password added): the ConfigMap follows, the Portal is Ready
        changed = await api.patch(
            SECRETS, "portal-credentials", {"data": {"password": "czNjcjN0"}}, namespace=namespace
        )
        seen = await eventually(
            lambda: having(Ready=("True", "DependentsReady"), CredentialsReady=("True", "Ready")),
            30,
            "Ready once the Secret has a password",
        )
        assert seen["ConfigReady"][:2] == ("True", "Ready")
        assert await api.get_or_none(CONFIGMAPS, "portal-config", namespace=namespace) is not None
        await _unwritten_since(api, namespace, changed)

        # 4. it stops being ready (the password removed): the Portal follows it back
        unready = await api.patch(
            SECRETS, "portal-credentials", {"data": {"password": None}}, namespace=namespace
        )
        seen = await eventually(
            lambda: having(Ready=("False", "DependentsNotReady"), CredentialsReady=("False", "NotReady")),
            30,
            "not Ready once the Secret lost its password",
        )
        assert seen["ConfigReady"][:2] == ("False", "Waiting")
        now = await _unwritten_since(api, namespace, unready)
        assert now["data"] == {"user": "YWRtaW4="}

        # the primary goes; the Secret it only observed stays
        await api.delete(PORTALS, "portal", namespace=namespace)
        await eventually(
            lambda: _gone(api, PORTALS, "portal", namespace),
            30,
            "the Portal deleted (no finalizer of ours)",
        )
        await _unwritten_since(api, namespace, unready)


async def _message_is(conditions: Any, type_: str, text: str) -> bool:
    return bool(text in (await conditions()).get(type_, ("", "", ""))[2])


async def _unwritten_since(api: Any, namespace: str, written: dict[str, Any]) -> dict[str, Any]:
    """The external Secret as the test last wrote it: the workflow reconciled since (the test
    waited for the status that shows it) and wrote nothing, nor marked it as its own."""
    now: dict[str, Any] = await api.get(SECRETS, "portal-credentials", namespace=namespace)
    md = now["metadata"]
    assert md["resourceVersion"] == written["metadata"]["resourceVersion"]
    assert "ownerReferences" not in md
    assert not md.get("finalizers")
    assert not any(
        k.startswith("kubeop.io/") for k in {**(md.get("labels") or {}), **(md.get("annotations") or {})}
    )
    return now


async def _gone(api: Any, res: ApiResource, name: str, namespace: str) -> bool:
    return await api.get_or_none(res, name, namespace=namespace) is None


BACKOFF_BASE = 0.2  # the test's rate limiter: 0.2 s doubling, so the retries are few and measurable


async def test_a_refused_dependent_degrades_retries_with_backoff_and_recovers(
    control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.install_crds([crd_manifest(Portal)])
    attempts: list[float] = []  # when a reconcile asked for the refused Service

    def service(portal: Portal, ctx: Any) -> dict[str, Any]:
        if not 0 < portal.spec.port < 65536:
            attempts.append(time.monotonic())
        return {
            "metadata": {"name": portal.metadata.name},
            "spec": {"selector": {"app": "portal"}, "ports": [{"port": portal.spec.port}]},
        }

    controller = (
        Controller.for_(Portal, GenerationChanged, namespace=namespace)
        .dependents(Dependent(SERVICES, desired=service))
        .with_rate_limiter(lambda: ItemExponentialFailureRateLimiter(BACKOFF_BASE, 30.0))
    )
    async with (
        client_for(control_plane.kubeconfig_path) as api,
        client_for(control_plane.kubeconfig_path) as c,
        running(_manager(c, controller)),
    ):
        # a port the API server refuses (spec.ports[0].port must be 1-65535)
        await api.create(
            {
                "apiVersion": Portal.api_version,
                "kind": "Portal",
                "metadata": {"name": "portal", "namespace": namespace},
                "spec": {"port": 70000},
            }
        )

        async def conditions() -> dict[str, tuple[str, str, str]]:
            return _conditions(await api.get(PORTALS, "portal", namespace=namespace))

        async def degraded() -> dict[str, tuple[str, str, str]]:
            now = await conditions()
            return now if now.get("Degraded", ("",))[0] == "True" else {}

        seen = await eventually(degraded, 30, "Degraded for the refused Service")
        _, reason, message = seen["Degraded"]
        assert reason == "DependentFailed"
        assert message.startswith("service: Invalid")  # the dependent, then the server's refusal
        assert "70000" in message
        assert seen["ServiceReady"][:2] == ("False", "Failed")
        assert "70000" in seen["ServiceReady"][2]
        assert seen["Ready"][:2] == ("False", "DependentFailed")
        assert seen["Progressing"][:2] == ("False", "Failed")
        assert await api.get_or_none(SERVICES, "portal", namespace=namespace) is None

        # retried with no event (status writes do not enqueue: GenerationChanged), each time
        # later: the waits are the rate limiter's steps, base x 1, 2, 4, 8
        await eventually(lambda: _at_least(attempts, 5), 30, "five attempts at the refused Service")
        gaps = [b - a for a, b in itertools.pairwise(attempts)]
        for step, gap in enumerate(gaps[:4]):
            assert gap >= 0.9 * BACKOFF_BASE * 2**step, gaps

        # the spec is fixed: the next reconcile (the spec change's event) makes the Service
        await api.patch(PORTALS, "portal", {"spec": {"port": 8080}}, namespace=namespace)

        async def ready() -> dict[str, tuple[str, str, str]]:
            now = await conditions()
            return now if now.get("Ready", ("", ""))[:2] == ("True", "DependentsReady") else {}

        seen = await eventually(ready, 30, "Ready once the port is fixed")
        assert seen["Degraded"][:2] == ("False", "AsExpected")
        assert seen["Progressing"][:2] == ("False", "Complete")
        assert seen["ServiceReady"][:2] == ("True", "Ready")
        made = await api.get(SERVICES, "portal", namespace=namespace)
        assert [p["port"] for p in made["spec"]["ports"]] == [8080]
        (ref,) = made["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["name"], ref["controller"]) == ("Portal", "portal", True)


async def _at_least(attempts: list[float], n: int) -> bool:
    return len(attempts) >= n
