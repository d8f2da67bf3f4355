"""The PhpDeployment Helm operator on the real control plane (seed 000): a release per resource,
kept alive; and the seed's point, side by side: a plain ``helm install`` walks away."""

from __future__ import annotations

import asyncio
import math
import signal
import sys
import time
from typing import Any

import pytest
from examples.php_deployment.crd import sample
from examples.php_deployment.operator import DEPLOYMENTS, INGRESSES, PHP_DEPLOYMENTS, SERVICES

from kubeop.client import Client
from kubeop.core.resource import ApiResource
from kubeop.helm import FINALIZER
from kubeop.testing import ControlPlane

from ..controller.conftest import client_for, eventually
from .conftest import HelmCli, php_operator

pytestmark = [pytest.mark.controlplane, pytest.mark.full, pytest.mark.usefixtures("php_crd")]

REPLICASETS = ApiResource("apps", "v1", "replicasets", kind="ReplicaSet")
PODS = ApiResource("", "v1", "pods", kind="Pod")
SECRETS = ApiResource("", "v1", "secrets", kind="Secret")
CHILDREN = (DEPLOYMENTS, SERVICES, INGRESSES)


async def get(client: Client, res: ApiResource, name: str, ns: str) -> Any:
    return await client.get_or_none(res, name, namespace=ns)


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


async def deployed(client: Client, name: str, ns: str, reason: str = "InstallSuccessful") -> Any:
    obj = await get(client, PHP_DEPLOYMENTS, name, ns)
    cond = conditions(obj or {}).get("Deployed") or {}
    return obj if cond.get("status") == "True" and cond.get("reason") == reason else None


def image_of(deployment: dict[str, Any]) -> str:
    return str(deployment["spec"]["template"]["spec"]["containers"][0]["image"])


async def test_lifecycle(control_plane: ControlPlane, namespace: str, helm_cli: HelmCli) -> None:
    async with php_operator(control_plane, namespace) as run:
        client = run.client
        await client.create(sample("shop", namespace, image="php:8.3-apache", replicas=2))

        # Creating a PhpDeployment installs all three objects, owned by it, as a Helm release.
        cr = await eventually(lambda: deployed(client, "shop", namespace), 60, "the release to be deployed")
        uid = cr["metadata"]["uid"]
        for res in CHILDREN:
            child = await get(client, res, "shop", namespace)
            assert child is not None, f"{res.kind} missing"
            [ref] = child["metadata"]["ownerReferences"]
            assert (ref["kind"], ref["uid"], ref["controller"]) == ("PhpDeployment", uid, True)
            assert child["metadata"]["annotations"]["meta.helm.sh/release-name"] == "shop"
        deployment = await get(client, DEPLOYMENTS, "shop", namespace)
        assert deployment["spec"]["replicas"] == 2 and image_of(deployment) == "php:8.3-apache"
        assert cr["metadata"]["finalizers"] == [FINALIZER]
        assert conditions(cr)["Initialized"]["status"] == "True"
        assert "shop runs php:8.3-apache" in conditions(cr)["Deployed"]["message"]  # the chart's NOTES
        assert cr["status"]["deployedRelease"]["name"] == "shop"
        assert "kind: Ingress" in cr["status"]["deployedRelease"]["manifest"]
        release = helm_cli.releases(namespace)["shop"]
        assert (release["status"], release["revision"], release["chart"]) == (
            "deployed",
            "1",
            "php-deployment-0.1.0",
        )
        values = helm_cli("get", "values", "shop", "--namespace", namespace, "--output", "json").stdout
        assert '"image":"php:8.3-apache"' in values.replace(" ", "")

        # Deleting the Deployment gets it recreated (a new object), without a new revision.
        await client.delete(DEPLOYMENTS, "shop", namespace=namespace)

        async def recreated() -> bool:
            d = await get(client, DEPLOYMENTS, "shop", namespace)
            return d is not None and d["metadata"]["uid"] != deployment["metadata"]["uid"]

        await eventually(recreated, 30, "the deleted Deployment to be recreated")
        # Editing a child is reverted.
        await client.patch(DEPLOYMENTS, "shop", {"spec": {"replicas": 7}}, namespace=namespace)

        async def reverted() -> bool:
            d = await get(client, DEPLOYMENTS, "shop", namespace)
            return d is not None and d["spec"]["replicas"] == 2

        await eventually(reverted, 30, "the edited Deployment to be reverted")
        await client.delete(SERVICES, "shop", namespace=namespace)
        await eventually(lambda: get(client, SERVICES, "shop", namespace), 30, "the Service to be recreated")
        assert helm_cli.releases(namespace)["shop"]["revision"] == "1"

        # Changing spec.image upgrades the release.
        await client.patch(
            PHP_DEPLOYMENTS, "shop", {"spec": {"image": "php:8.4-apache"}}, namespace=namespace
        )

        async def upgraded() -> bool:
            d = await get(client, DEPLOYMENTS, "shop", namespace)
            return d is not None and image_of(d) == "php:8.4-apache"

        await eventually(upgraded, 60, "the Deployment to run the new image")
        cr = await eventually(
            lambda: deployed(client, "shop", namespace, "UpgradeSuccessful"), 30, "UpgradeSuccessful"
        )
        assert "php:8.4-apache" in cr["status"]["deployedRelease"]["manifest"]
        assert helm_cli.releases(namespace)["shop"]["revision"] == "2"

        # Deleting the PhpDeployment uninstalls the release and leaves nothing behind.
        await client.delete(PHP_DEPLOYMENTS, "shop", namespace=namespace)

        async def nothing_left() -> bool:
            if await get(client, PHP_DEPLOYMENTS, "shop", namespace) is not None:
                return False
            for res in (*CHILDREN, REPLICASETS, PODS):
                if (await client.list(res, namespace=namespace)).items:
                    return False
            return not (await client.list(SECRETS, namespace=namespace, label_selector="owner=helm")).items

        await eventually(nothing_left, 90, "the release, its objects and their pods to be gone")
        assert helm_cli.releases(namespace) == {}


async def test_chart_error_sets_release_failed_and_does_not_hot_loop(
    control_plane: ControlPlane, namespace: str, helm_cli: HelmCli
) -> None:
    async with php_operator(control_plane, namespace) as run:
        client = run.client
        await client.create(sample("broken", namespace, image=""))

        async def failed() -> Any:
            obj = await get(client, PHP_DEPLOYMENTS, "broken", namespace)
            return conditions(obj or {}).get("ReleaseFailed")

        cond = await eventually(failed, 60, "ReleaseFailed")
        assert (cond["status"], cond["reason"]) == ("True", "InstallError")
        assert "spec.image is required" in cond["message"]  # Helm's own message
        assert "execution error at (php-deployment/templates/deployment.yaml" in cond["message"]
        events = (await client.list("events.events.k8s.io", namespace=namespace)).items
        assert any(e.get("reason") == "InstallError" and e.get("type") == "Warning" for e in events)
        assert helm_cli.releases(namespace) == {}
        assert await get(client, DEPLOYMENTS, "broken", namespace) is None

        # No hot loop: over several seconds, no further helm process and no write to the resource.
        calls = run.operator.helm.stats.total
        before = (await get(client, PHP_DEPLOYMENTS, "broken", namespace))["metadata"]["resourceVersion"]
        await asyncio.sleep(6)
        assert run.operator.helm.stats.total == calls
        after = (await get(client, PHP_DEPLOYMENTS, "broken", namespace))["metadata"]["resourceVersion"]
        assert after == before

        # Fixing the spec installs at once and clears the failure.
        await client.patch(
            PHP_DEPLOYMENTS, "broken", {"spec": {"image": "php:8.3-apache"}}, namespace=namespace
        )
        cr = await eventually(
            lambda: deployed(client, "broken", namespace), 60, "the fixed release to deploy"
        )
        assert "ReleaseFailed" not in conditions(cr)
        assert await get(client, DEPLOYMENTS, "broken", namespace) is not None


async def test_failed_upgrade_is_rolled_back(
    control_plane: ControlPlane, namespace: str, helm_cli: HelmCli
) -> None:
    async with php_operator(control_plane, namespace) as run:
        client = run.client
        await client.create(sample("roll", namespace))
        await eventually(lambda: deployed(client, "roll", namespace), 60, "the release to be deployed")
        # The chart renders, but the API server refuses the object: Helm records a failed revision.
        patched = time.monotonic()
        await client.patch(
            PHP_DEPLOYMENTS,
            "roll",
            {"spec": {"image": "php:8.4-apache", "resources": {"limits": {"cpu": "lots"}}}},
            namespace=namespace,
        )

        async def upgrade_failed() -> Any:
            obj = await get(client, PHP_DEPLOYMENTS, "roll", namespace)
            cond = conditions(obj or {}).get("ReleaseFailed") or {}
            return cond if cond.get("reason") == "UpgradeError" else None

        cond = await eventually(upgrade_failed, 60, "ReleaseFailed/UpgradeError")
        assert "UPGRADE FAILED" in cond["message"] and "quantities must match" in cond["message"]

        async def rolled_back() -> Any:
            history = helm_cli("history", "roll", "--namespace", namespace, "--output", "json").stdout
            return "Rollback to 1" in history

        await eventually(rolled_back, 30, "a rollback to revision 1 in the release history")
        deployment = await get(client, DEPLOYMENTS, "roll", namespace)
        assert image_of(deployment) == "php:8.3-apache"  # still the last good release
        assert helm_cli.releases(namespace)["roll"]["status"] == "deployed"
        # Retried with backoff (0.5 s, 1 s, 2 s, ...), not in a loop: in E seconds a doubling
        # backoff from 0.5 s allows about log2(E / 0.5) + 1 attempts (one more for slack); a hot
        # loop would make dozens. E depends on how fast the machine ran the steps above.
        await asyncio.sleep(4)
        elapsed = time.monotonic() - patched
        allowed = int(math.log2(elapsed / 0.5)) + 2
        assert run.operator.helm.stats.calls.get("upgrade", 0) <= allowed, f"{elapsed:.1f} s"


async def test_steady_state_runs_no_helm(control_plane: ControlPlane, namespace: str) -> None:
    async with php_operator(control_plane, namespace) as run:
        client = run.client
        for i in range(3):
            await client.create(sample(f"calm-{i}", namespace))
        for i in range(3):
            await eventually(lambda i=i: deployed(client, f"calm-{i}", namespace), 60, "three releases")  # type: ignore[misc]
        await asyncio.sleep(2)  # let the events of the installs settle

        async def versions() -> list[tuple[str, str, Any]]:
            # PhpDeployments, Services and Ingresses are written by nobody but the operator and
            # Helm; Deployments also by the controller-manager (status), so their generation.
            out = []
            for res in (PHP_DEPLOYMENTS, SERVICES, INGRESSES):
                for o in (await client.list(res, namespace=namespace)).items:
                    out.append((res.kind, o["metadata"]["name"], o["metadata"]["resourceVersion"]))
            for o in (await client.list(DEPLOYMENTS, namespace=namespace)).items:
                out.append(("Deployment", o["metadata"]["name"], o["metadata"]["generation"]))
            return sorted(out)

        calls, before = run.operator.helm.stats.total, await versions()
        await asyncio.sleep(8)
        assert run.operator.helm.stats.total == calls, run.operator.helm.stats
        assert await versions() == before
        assert len(before) == 12


async def test_plain_helm_install_walks_away_the_operator_does_not(
    control_plane: ControlPlane, namespace: str, helm_cli: HelmCli
) -> None:
    """Seed 000: Helm pushes YAML and walks away; the operator keeps the release alive."""
    from examples.php_deployment.operator import CHART

    helm_cli("install", "plain", str(CHART), "--namespace", namespace, "--set", "image=php:8.3-apache")
    async with php_operator(control_plane, namespace) as run:
        client = run.client
        await client.create(sample("managed", namespace))
        await eventually(lambda: deployed(client, "managed", namespace), 60, "the managed release")
        plain = await get(client, DEPLOYMENTS, "plain", namespace)
        managed = await get(client, DEPLOYMENTS, "managed", namespace)
        assert plain is not None and managed is not None
        assert "ownerReferences" not in plain["metadata"]

        await client.delete(DEPLOYMENTS, "plain", namespace=namespace)
        await client.delete(DEPLOYMENTS, "managed", namespace=namespace)

        async def managed_back() -> bool:
            d = await get(client, DEPLOYMENTS, "managed", namespace)
            return d is not None and d["metadata"]["uid"] != managed["metadata"]["uid"]

        await eventually(managed_back, 30, "the operator to recreate its Deployment")
        await asyncio.sleep(5)
        assert await get(client, DEPLOYMENTS, "plain", namespace) is None  # nobody brings it back
        # ... although Helm still believes the plain release is deployed.
        assert helm_cli.releases(namespace)["plain"]["status"] == "deployed"
        assert helm_cli.releases(namespace)["managed"]["status"] == "deployed"
        await client.delete(PHP_DEPLOYMENTS, "managed", namespace=namespace)
        await eventually(
            lambda: _gone(client, "managed", namespace), 60, "the managed release to be uninstalled"
        )
    helm_cli("uninstall", "plain", "--namespace", namespace)


async def _gone(client: Client, name: str, ns: str) -> bool:
    return await get(client, PHP_DEPLOYMENTS, name, ns) is None


async def test_python_m_kubeop_helm_runs_the_operator(control_plane: ControlPlane, namespace: str) -> None:
    """The operator process operator-sdk users know (``helm-operator run``), from watches.yaml."""
    from examples.php_deployment.operator import WATCHES

    env = {**control_plane.env(), "WATCH_NAMESPACE": namespace}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kubeop.helm",
        "--watches-file",
        str(WATCHES),
        "--metrics-bind-address",
        "",
        "--health-probe-bind-address",
        "",
        "--name",
        "php-operator-process",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with client_for(control_plane.kubeconfig_path) as client:
            await client.create(sample("proc", namespace))
            await eventually(lambda: deployed(client, "proc", namespace), 60, "the release to be deployed")
            await client.delete(PHP_DEPLOYMENTS, "proc", namespace=namespace)
            await eventually(lambda: _gone(client, "proc", namespace), 60, "the release to be uninstalled")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(proc.communicate(), 40)
    assert proc.returncode == 0, stderr.decode()[-2000:]
    log = stderr.decode()
    assert "installed release proc" in log and "uninstalled release proc" in log
