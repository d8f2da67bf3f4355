"""kopf's admission handlers served by ``settings.admission.server`` and registered by
``settings.admission.managed``, called by the real kube-apiserver on loopback.

The configurations name only this module's CRD, so the session's control plane is shared safely;
they are emptied when the operator stops (kopf's cleanup), which the test checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

import kubeop.kopf as kopf
from kubeop.client import Client, load_kubeconfig
from kubeop.core.errors import ApiError
from kubeop.kopf.running import run_manager
from kubeop.kopf.serving import MUTATING, VALIDATING
from kubeop.testing import ControlPlane

pytestmark = pytest.mark.controlplane
T = TypeVar("T")

GROUP = "kopf-admission.kubeop.dev"
RESOURCE = f"kopfgates.{GROUP}"
CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": RESOURCE},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "kopfgates", "singular": "kopfgate", "kind": "KopfGate", "shortNames": ["kgate"]},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    }
                },
            }
        ],
    },
}


async def eventually(fn: Callable[[], Awaitable[T]], timeout: float = 20.0, what: str = "it") -> T:
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = await fn()
        except Exception as exc:
            last = exc
        else:
            if last:
                return last  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}")
        await asyncio.sleep(0.1)


def gate(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "KopfGate",
        "metadata": {"name": name, "labels": {"somelabel": "somevalue"}},
        "spec": spec,
    }


async def test_managed_webhooks_are_called_by_the_api_server_and_emptied_on_stop(
    control_plane: ControlPlane, kubeconfig_path: str, namespace: str
) -> None:
    control_plane.install_crds([CRD])
    reg = kopf.Registry()
    seen: list[tuple[str, str, dict[str, Any]]] = []

    @kopf.on.validate("kgate", registry=reg, id="check_field")
    def check(
        spec: kopf.Spec, headers: kopf.Headers, sslpeer: kopf.SSLPeer, warnings: list[str], **_: Any
    ) -> None:
        seen.append(("check", headers.get("User-Agent", ""), dict(sslpeer)))
        warnings.append("looked")
        if spec.get("field") == "wrong":
            raise kopf.AdmissionError("Meh! Change the field.", code=555)

    @kopf.on.mutate(
        "kgate", registry=reg, id="inject", labels={"somelabel": "somevalue"}, operations=["CREATE"]
    )
    def inject(patch: kopf.Patch, **_: Any) -> None:
        patch.spec["injected"] = 123

    @kopf.on.validate(
        "kgate", registry=reg, id="status_check", subresource="status", ignore_failures=True, persistent=True
    )
    def status_check(**_: Any) -> None:
        pass

    managed = f"e2e-{uuid.uuid4().hex[:8]}.kubeop.dev"
    settings = kopf.OperatorSettings()
    settings.admission.server = kopf.WebhookAutoServer(addr="127.0.0.1")
    settings.admission.managed = managed
    async with Client(load_kubeconfig(kubeconfig_path, namespace=namespace, qps=None)) as api:
        manager = kopf.build_manager(registry=reg, namespace=namespace, client=api, settings=settings)
        stop = asyncio.Event()
        task = asyncio.create_task(run_manager(manager, stop))
        try:

            async def validating() -> dict[str, Any] | None:
                assert not task.done() or task.result()
                obj: dict[str, Any] | None = await api.get_or_none(VALIDATING, managed)
                return obj if obj and obj.get("webhooks") else None

            config = await eventually(validating, what="the validating configuration")
            assert config is not None
            hooks = {w["name"]: w for w in config["webhooks"]}
            assert sorted(hooks) == [f"check-field.{managed}", f"status-check.{managed}"]
            check_hook = hooks[f"check-field.{managed}"]
            assert check_hook["rules"][0]["resources"] == ["kopfgates"]
            assert check_hook["rules"][0]["operations"] == ["*"]
            assert check_hook["failurePolicy"] == "Fail" and check_hook["timeoutSeconds"] == 30
            assert check_hook["clientConfig"]["url"].startswith("https://127.0.0.1:")
            assert check_hook["clientConfig"]["url"].endswith("/check_field")
            status_hook = hooks[f"status-check.{managed}"]
            assert status_hook["rules"][0]["resources"] == ["kopfgates/status"]
            assert status_hook["failurePolicy"] == "Ignore"
            mutating = await api.get(MUTATING, managed)
            (inject_hook,) = mutating["webhooks"]
            assert inject_hook["objectSelector"]["matchExpressions"] == [
                {"key": "somelabel", "operator": "In", "values": ["somevalue"]}
            ]

            async def denied() -> ApiError | None:
                try:
                    await api.create(gate("bad", field="wrong"))
                except ApiError as exc:
                    return exc if "Change the field" in str(exc) else None
                await api.delete(RESOURCE, "bad")  # created before the API server saw the webhook
                return None

            error = await eventually(denied, what="the API server to call the validating webhook")
            assert error is not None and error.code == 555, error
            created = await api.create(gate("good", field="value"))
            assert created["spec"] == {"field": "value", "injected": 123}, "mutated by the webhook"
            assert seen and seen[-1][0] == "check"
            assert seen[-1][1].startswith("kube-apiserver"), seen[-1]
            assert seen[-1][2] == {}, "the API server sends no client certificate: sslpeer is empty"
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
        left = await api.get(VALIDATING, managed)
        assert [w["name"] for w in left.get("webhooks") or []] == [f"status-check.{managed}"], (
            "only the persistent webhook stays after the operator stops"
        )
        assert not (await api.get(MUTATING, managed)).get("webhooks")
        await api.create(gate("after", field="wrong"))  # nothing calls the stopped server
        for name in ("good", "after"):
            with contextlib.suppress(ApiError):
                await api.delete(RESOURCE, name)
        for res in (VALIDATING, MUTATING):
            await api.delete(res, managed)
