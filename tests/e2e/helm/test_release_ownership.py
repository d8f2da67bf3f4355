"""The Helm operator on the real control plane with the real helm binary: it acts only on the
releases it made for a resource, and what it publishes never holds the chart's Secret values."""

from __future__ import annotations

import base64
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from examples.php_deployment.crd import sample
from examples.php_deployment.operator import CHART, DEPLOYMENTS, PHP_DEPLOYMENTS

from kubeop.core.resource import ApiResource
from kubeop.helm import Watch
from kubeop.testing import ControlPlane

from ..controller.conftest import eventually
from .conftest import HelmCli, php_operator

pytestmark = [pytest.mark.controlplane, pytest.mark.full, pytest.mark.usefixtures("php_crd")]

CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
SECRETS = ApiResource("", "v1", "secrets", kind="Secret")
MARKER = "kubeop-marker-3c1f5e0a9b"


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


async def events_about(client: Any, namespace: str, name: str) -> list[dict[str, Any]]:
    found = (await client.list("events.events.k8s.io", namespace=namespace)).items
    return [e for e in found if (e.get("regarding") or {}).get("name") == name]


def other_chart(tmp_path: Path) -> Path:
    """A chart that is not the operator's, as a person would install it."""
    chart = tmp_path / "other"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: other\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text(
        'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  mine: "yes"\n'
    )
    return chart


async def test_a_persons_release_of_the_same_name_is_left_alone(
    control_plane: ControlPlane, namespace: str, helm_cli: HelmCli, tmp_path: Path
) -> None:
    helm_cli("install", "web", str(other_chart(tmp_path)), "--namespace", namespace)
    async with php_operator(control_plane, namespace) as run:
        client = run.client
        await client.create(sample("web", namespace))

        async def refused() -> Any:
            obj = await client.get_or_none(PHP_DEPLOYMENTS, "web", namespace=namespace)
            cond = conditions(obj or {}).get("ReleaseFailed") or {}
            return obj if cond.get("reason") == "ReleaseNotOwned" else None

        cr = await eventually(refused, 60, "ReleaseFailed/ReleaseNotOwned")
        message = conditions(cr)["ReleaseFailed"]["message"]
        assert f"Helm release web in namespace {namespace} is not this PhpDeployment's" in message
        assert (
            "chart other-0.1.0" in message and "helm.kubeop.dev/owner-uid=" + cr["metadata"]["uid"] in message
        )
        assert conditions(cr)["Deployed"]["status"] == "False"
        assert not cr["metadata"].get("finalizers")
        warnings = [
            e
            for e in await events_about(client, namespace, "web")
            if e["reason"] == "ReleaseNotOwned" and e["type"] == "Warning"
        ]
        assert warnings and "Helm release web" in warnings[0]["note"]
        # The release is as the person left it: their chart, their revision, and no php objects.
        release = helm_cli.releases(namespace)["web"]
        assert (release["chart"], release["revision"], release["status"]) == ("other-0.1.0", "1", "deployed")
        assert await client.get_or_none(DEPLOYMENTS, "web", namespace=namespace) is None
        assert not {"install", "upgrade", "dry-run", "rollback", "uninstall"} & set(
            run.operator.helm.stats.calls
        )

        # Deleting the PhpDeployment does not uninstall it.
        await client.delete(PHP_DEPLOYMENTS, "web", namespace=namespace)

        async def gone() -> bool:
            return await client.get_or_none(PHP_DEPLOYMENTS, "web", namespace=namespace) is None

        await eventually(gone, 30, "the PhpDeployment to be deleted")
        release = helm_cli.releases(namespace)["web"]
        assert (release["chart"], release["revision"], release["status"]) == ("other-0.1.0", "1", "deployed")
        assert await client.get_or_none(CONFIGMAPS, "web-cm", namespace=namespace) is not None
        assert "uninstall" not in run.operator.helm.stats.calls
    helm_cli("uninstall", "web", "--namespace", namespace)


def chart_with_a_secret(tmp_path: Path) -> Path:
    """The PhpDeployment chart plus a Secret whose values come from the chart itself (as a
    generated password or a ``lookup`` would), never from the resource's spec; ``spec.badToken``
    makes its ``data`` invalid base64 that quotes the value, for a failing upgrade."""
    chart = tmp_path / "php-with-secret"
    shutil.copytree(CHART, chart)
    token = base64.b64encode(MARKER.encode()).decode()
    (chart / "templates" / "secret.yaml").write_text(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {{ .Release.Name }}-creds\n"
        f'stringData:\n  password: "{MARKER}"\n'
        "data:\n"
        f'  token: {{{{ if .Values.badToken }}}}"{MARKER}!!"{{{{ else }}}}"{token}"{{{{ end }}}}\n'
    )
    schema = json.loads((chart / "values.schema.json").read_text())
    schema.setdefault("properties", {})["badToken"] = {"type": "boolean"}
    (chart / "values.schema.json").write_text(json.dumps(schema))
    return chart


async def test_secret_values_stay_out_of_the_resource_its_events_and_the_logs(
    control_plane: ControlPlane, namespace: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    watch = Watch("web.example.com", "v1", "PhpDeployment", chart_with_a_secret(tmp_path))
    encoded = base64.b64encode(MARKER.encode()).decode()

    def leaks(text: str) -> bool:
        return MARKER in text or encoded in text

    async with php_operator(control_plane, namespace, [watch]) as run:
        client = run.client
        await client.create(sample("vault", namespace))

        async def deployed() -> Any:
            obj = await client.get_or_none(PHP_DEPLOYMENTS, "vault", namespace=namespace)
            return obj if conditions(obj or {}).get("Deployed", {}).get("status") == "True" else None

        cr = await eventually(deployed, 60, "the release to be deployed")
        secret = await client.get(SECRETS, "vault-creds", namespace=namespace)
        assert base64.b64decode(secret["data"]["password"]).decode() == MARKER  # the chart did render it
        manifest = cr["status"]["deployedRelease"]["manifest"]
        assert (
            "kind: Secret" in manifest
            and "password: <redacted>" in manifest
            and "kind: Deployment" in manifest
        )

        # An upgrade that fails on the Secret (its data is not base64), with Helm's error.
        await client.patch(PHP_DEPLOYMENTS, "vault", {"spec": {"badToken": True}}, namespace=namespace)

        async def failed() -> Any:
            obj = await client.get_or_none(PHP_DEPLOYMENTS, "vault", namespace=namespace)
            cond = conditions(obj or {}).get("ReleaseFailed") or {}
            return obj if cond.get("reason") == "UpgradeError" else None

        cr = await eventually(failed, 60, "ReleaseFailed/UpgradeError")
        # Helm's error quotes the whole live Secret (its values base64-encoded): redacted.
        assert "<redacted>" in conditions(cr)["ReleaseFailed"]["message"]
        assert not leaks(json.dumps(cr)), json.dumps(cr.get("status"))[:2000]
        events = await events_about(client, namespace, "vault")
        assert events and not leaks(json.dumps(events)), [e["note"] for e in events]
    lines = "\n".join(f"{r.getMessage()} {r.exc_text or ''} {r.__dict__}" for r in caplog.records)
    assert caplog.records and not leaks(lines), [
        r.getMessage() for r in caplog.records if leaks(r.getMessage())
    ]
