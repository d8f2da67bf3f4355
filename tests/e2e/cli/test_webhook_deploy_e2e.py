"""A project with webhooks deployed on the real control plane: config/default (webhook
configurations, conversion, Service, the manager's webhook port and cert volume, the certificate
RBAC) is what the real kustomize makes of it and the API server takes all of it; the operator's
certificate rotator, as its service account under only the generated RBAC, creates the Secret and
patches the CA into every configuration and the CRD. The cert-manager flavour passes a
server-side dry run (cert-manager's own kinds aside: no cert-manager in the test cluster)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeop.client import Client, load_kubeconfig
from kubeop.scaffold import build_kustomization
from kubeop.webhook import CertRotator, CertSecret

from .conftest import kubeop, ok, scaffold

pytestmark = pytest.mark.controlplane

NAME = "whdeploy-operator"
NAMESPACE = "whdeploy-ns"
GROUP = "whdeploy.cli-tests.kubeop.dev"
CRD = f"gadgets.{GROUP}"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"


def _hooked(tmp_path: Path, namespace: str = NAMESPACE) -> Path:
    project = scaffold(tmp_path, NAME, "whdeploy", "Gadget")
    api = ["--group", "whdeploy", "--kind", "Gadget"]
    ok(kubeop("create", "api", *api, "--version", "v2", cwd=project))
    ok(
        kubeop(
            "create",
            "webhook",
            *api,
            "--version",
            "v1",
            "--defaulting",
            "--programmatic-validation",
            cwd=project,
        )
    )
    ok(kubeop("create", "webhook", *api, "--version", "v2", "--conversion", cwd=project))
    ok(kubeop("manifests", "--namespace", namespace, cwd=project))
    return project


def _same_as_kustomize(control_plane: Any, project: Path) -> list[dict[str, Any]]:
    objs = build_kustomization(project / "config" / "default")
    built = yaml.safe_load_all(control_plane.kubectl("kustomize", str(project / "config" / "default")).stdout)
    assert sorted(yaml.safe_dump(o) for o in built) == sorted(yaml.safe_dump(o) for o in objs)
    return objs


async def test_deployed_webhooks_get_their_ca_from_the_operator(control_plane: Any, tmp_path: Path) -> None:
    project = _hooked(tmp_path)
    objs = _same_as_kustomize(control_plane, project)
    kubeconfig = control_plane.kubeconfig_path
    try:
        out = ok(kubeop("deploy", cwd=project, kubeconfig=kubeconfig))
        assert f"to namespace {NAMESPACE}:" in out
        deployment = control_plane.api.call(
            "GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{NAME}-controller-manager"
        )
        (manager,) = deployment["spec"]["template"]["spec"]["containers"]
        assert {"containerPort": 9443, "name": "webhook-server", "protocol": "TCP"} in manager["ports"]
        env = {e["name"]: e.get("value") for e in manager["env"]}
        inject = env["WEBHOOK_CA_INJECT"].split(",")
        assert len(inject) == 3 and f"customresourcedefinitions/{CRD}" in inject
        kinds = {o["kind"] for o in objs}
        assert {"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "Role"} <= kinds

        # the operator's rotator, as its service account with only the generated RBAC
        sa = control_plane.kubeconfig_for_service_account(NAMESPACE, f"{NAME}-controller-manager")
        spec = CertSecret.for_service(
            env["WEBHOOK_CERT_SECRET"], env["WEBHOOK_SERVICE"], NAMESPACE, inject=inject
        )
        async with Client(load_kubeconfig(sa, qps=None)) as client:
            rotator = CertRotator(client, spec, cert_dir=tmp_path / "certs")
            bundle = await rotator.ensure()
            assert rotator.pending == [] and rotator.renewals == 1
            again = CertRotator(client, spec, cert_dir=tmp_path / "certs2")
            assert await again.ensure() == bundle and again.renewals == 0
        ca = base64.b64encode(bundle).decode()
        for kind in ("validating", "mutating"):
            config = control_plane.api.call(
                "GET", f"{ADMISSION}/{kind}webhookconfigurations/{NAME}-webhook-{kind}"
            )
            assert {w["clientConfig"]["caBundle"] for w in config["webhooks"]} == {ca}
            assert {w["clientConfig"]["service"]["namespace"] for w in config["webhooks"]} == {NAMESPACE}
        crd = control_plane.api.call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}")
        assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] == ca
        # deploy again: the applied manifests do not take the injected CA away
        ok(kubeop("deploy", cwd=project, kubeconfig=kubeconfig))
        crd = control_plane.api.call("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD}")
        assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"] == ca
    finally:
        ok(kubeop("undeploy", cwd=project, kubeconfig=kubeconfig))


def test_the_cert_manager_flavour_passes_a_server_side_dry_run(control_plane: Any, tmp_path: Path) -> None:
    project = _hooked(tmp_path, "whdeploy-cm")
    ok(kubeop("manifests", "--webhook-certs", "cert-manager", cwd=project))
    objs = _same_as_kustomize(control_plane, project)
    theirs = [o for o in objs if o["apiVersion"].startswith("cert-manager.io/")]
    assert sorted(o["kind"] for o in theirs) == ["Certificate", "Issuer"]
    ours = [o for o in objs if o not in theirs]
    res = control_plane.kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "-f",
        "-",
        input=yaml.safe_dump_all([o for o in ours if o["kind"] == "Namespace"]),
        check=False,
    )
    assert res.returncode == 0, res.stderr
    # the namespace must exist for a dry run of what goes in it: create it for real, briefly
    control_plane.create_namespace("whdeploy-cm")
    try:
        res = control_plane.kubectl(
            "apply",
            "--server-side",
            "--dry-run=server",
            "-f",
            "-",
            input=yaml.safe_dump_all([o for o in ours if o["kind"] != "Namespace"]),
            check=False,
        )
        assert res.returncode == 0 and "Warning" not in res.stderr, res.stderr
        assert res.stdout.count("serverside-applied (server dry run)") == len(ours) - 1, res.stdout
    finally:
        control_plane.delete_namespace("whdeploy-cm")
