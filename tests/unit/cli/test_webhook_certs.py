"""The certificate wiring of a project's webhooks for kubeop deploy: self-managed (the default) or
cert-manager, the manager Deployment's port, volume and settings, RBAC, config/default."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from kubeop.cli import app
from kubeop.scaffold import Project, build_kustomization, create_api, create_webhook, find_project
from kubeop.scaffold.manifests import CERT_DIR

from .conftest import read

runner = CliRunner()
NS = "guestbook-operator-system"
CRD = "guestbooks.webapp.example.com"


@pytest.fixture
def hooked(project: Project) -> Project:
    """The project with a validating and a defaulting webhook on v1 and a conversion to v2."""
    project = find_project(create_api(project, group="webapp", version="v2", kind="Guestbook").project.root)
    create_webhook(project, group="webapp", version="v1", kind="Guestbook", defaulting=True, validation=True)
    create_webhook(project, group="webapp", version="v2", kind="Guestbook", conversion=True)
    return find_project(project.root)


def _built(project: Project) -> dict[tuple[str, str], dict[str, Any]]:
    objs = build_kustomization(project.root / "config" / "default")
    return {(o["kind"], o["metadata"]["name"]): o for o in objs}


def _manager(objs: dict[tuple[str, str], dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    pod = objs[("Deployment", "guestbook-operator-controller-manager")]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def test_a_project_without_webhooks_deploys_no_webhook_parts(project: Project) -> None:
    kustomization = yaml.safe_load(read(project, "config/default/kustomization.yaml"))
    assert "../webhook" not in kustomization["resources"] and "patches" not in kustomization
    _, container = _manager(_built(project))
    assert [p["containerPort"] for p in container["ports"]] == [8443, 8081]
    assert "volumeMounts" not in container


def test_self_managed_wires_the_port_an_empty_cert_dir_and_the_secret(hooked: Project) -> None:
    kustomization = yaml.safe_load(read(hooked, "config/default/kustomization.yaml"))
    assert kustomization["resources"][-2:] == ["../webhook", "metrics_service.yaml"]
    assert "../certmanager" not in kustomization["resources"]
    objs = _built(hooked)
    pod, container = _manager(objs)
    assert [p["containerPort"] for p in container["ports"]] == [9443, 8443, 8081]  # kustomize's order
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert container["env"][-1]["name"] == "POD_NAMESPACE"  # the scaffolded entries stay
    assert env["WEBHOOK_BIND_ADDRESS"] == "0.0.0.0:9443" and env["WEBHOOK_CERT_DIR"] == CERT_DIR
    assert env["WEBHOOK_CERT_SECRET"] == "guestbook-operator-webhook-server-cert"
    assert env["WEBHOOK_SERVICE"] == "guestbook-operator-webhook-service"
    assert env["WEBHOOK_CA_INJECT"].split(",") == [
        "validatingwebhookconfigurations/guestbook-operator-webhook-validating",
        "mutatingwebhookconfigurations/guestbook-operator-webhook-mutating",
        f"customresourcedefinitions/{CRD}",
    ]
    assert container["volumeMounts"] == [{"mountPath": CERT_DIR, "name": "webhook-certs"}]
    assert pod["volumes"] == [{"name": "webhook-certs", "emptyDir": {}}]
    assert "--leader-elect" in container["args"]  # the scaffolded args are untouched
    service = objs[("Service", "guestbook-operator-webhook-service")]
    assert service["spec"]["ports"][0]["targetPort"] == 9443
    # no cert-manager annotations, no caBundle: the operator patches it in at start
    for key in (
        ("ValidatingWebhookConfiguration", "guestbook-operator-webhook-validating"),
        ("MutatingWebhookConfiguration", "guestbook-operator-webhook-mutating"),
        ("CustomResourceDefinition", CRD),
    ):
        assert "annotations" not in objs[key]["metadata"] and "caBundle" not in yaml.safe_dump(objs[key])


def test_self_managed_rbac_is_the_secret_and_the_named_objects_only(hooked: Project) -> None:
    objs = _built(hooked)
    role = objs[("Role", "guestbook-operator-webhook-cert-role")]
    assert role["metadata"]["namespace"] == NS
    assert {(tuple(r["verbs"]), tuple(r.get("resourceNames", ()))) for r in role["rules"]} == {
        (("create",), ()),
        (("get", "update"), ("guestbook-operator-webhook-server-cert",)),
    }
    injection = objs[("ClusterRole", "guestbook-operator-webhook-ca-injection-role")]
    rules = {r["resources"][0]: (r["verbs"], r["resourceNames"]) for r in injection["rules"]}
    assert rules == {
        "customresourcedefinitions": (["get", "patch"], [CRD]),
        "mutatingwebhookconfigurations": (["get", "patch"], ["guestbook-operator-webhook-mutating"]),
        "validatingwebhookconfigurations": (["get", "patch"], ["guestbook-operator-webhook-validating"]),
    }
    subject = {"kind": "ServiceAccount", "name": "guestbook-operator-controller-manager", "namespace": NS}
    assert objs[("RoleBinding", "guestbook-operator-webhook-cert-rolebinding")]["subjects"] == [subject]
    binding = objs[("ClusterRoleBinding", "guestbook-operator-webhook-ca-injection-rolebinding")]
    assert binding["subjects"] == [subject]


def test_cert_manager_is_a_choice_recorded_in_project(hooked: Project) -> None:
    res = runner.invoke(app, ["manifests", "--dir", str(hooked.root), "--webhook-certs", "cert-manager"])
    assert res.exit_code == 0, res.output
    assert "self-managed -> cert-manager" in res.output
    project = find_project(hooked.root)
    assert project.webhook_certs == "cert-manager" and "webhookCerts: cert-manager" in read(
        project, "PROJECT"
    )
    kustomization = yaml.safe_load(read(project, "config/default/kustomization.yaml"))
    assert "../certmanager" in kustomization["resources"]
    objs = _built(project)
    issuer = objs[("Issuer", "guestbook-operator-selfsigned-issuer")]
    certificate = objs[("Certificate", "guestbook-operator-serving-cert")]
    assert issuer["metadata"]["namespace"] == certificate["metadata"]["namespace"] == NS
    assert certificate["spec"]["secretName"] == "guestbook-operator-webhook-server-cert"
    assert certificate["spec"]["dnsNames"] == [
        f"guestbook-operator-webhook-service.{NS}.svc",
        f"guestbook-operator-webhook-service.{NS}.svc.cluster.local",
    ]
    inject = {"cert-manager.io/inject-ca-from": f"{NS}/guestbook-operator-serving-cert"}
    assert (
        objs[("ValidatingWebhookConfiguration", "guestbook-operator-webhook-validating")]["metadata"][
            "annotations"
        ]
        == inject
    )
    assert objs[("CustomResourceDefinition", CRD)]["metadata"]["annotations"] == inject
    pod, container = _manager(objs)
    assert pod["volumes"] == [
        {"name": "webhook-certs", "secret": {"secretName": "guestbook-operator-webhook-server-cert"}}
    ]
    assert container["volumeMounts"] == [{"mountPath": CERT_DIR, "name": "webhook-certs", "readOnly": True}]
    assert not any(e["name"] == "WEBHOOK_CERT_SECRET" for e in container["env"])
    assert ("Role", "guestbook-operator-webhook-cert-role") not in objs
    # back to self-managed
    res = runner.invoke(app, ["manifests", "--dir", str(hooked.root), "--webhook-certs", "self-managed"])
    assert res.exit_code == 0, res.output
    assert ("Role", "guestbook-operator-webhook-cert-role") in _built(find_project(hooked.root))


def test_create_webhook_takes_the_choice_too(project: Project) -> None:
    api = ["--group", "webapp", "--version", "v1", "--kind", "Guestbook", "--programmatic-validation"]
    args = ["create", "webhook", *api, "--webhook-certs", "cert-manager", "--dir", str(project.root)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert (project.root / "config/certmanager/certificate.yaml").is_file()


def test_a_certificate_source_it_does_not_know_is_one_clear_line(hooked: Project) -> None:
    res = runner.invoke(app, ["manifests", "--dir", str(hooked.root), "--webhook-certs", "vault"])
    assert res.exit_code == 1
    (line,) = [x for x in res.output.splitlines() if x.strip()]
    assert "--webhook-certs 'vault' is not a certificate source" in line and "cert-manager" in line


def test_the_namespace_reaches_the_certificate_names(hooked: Project) -> None:
    res = runner.invoke(
        app,
        ["manifests", "--dir", str(hooked.root), "--namespace", "team-w", "--webhook-certs", "cert-manager"],
    )
    assert res.exit_code == 0, res.output
    objs = _built(find_project(hooked.root))
    certificate = objs[("Certificate", "guestbook-operator-serving-cert")]
    assert certificate["spec"]["dnsNames"][0] == "guestbook-operator-webhook-service.team-w.svc"
    hook = objs[("ValidatingWebhookConfiguration", "guestbook-operator-webhook-validating")]
    assert hook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].startswith("team-w/")
    assert hook["webhooks"][0]["clientConfig"]["service"]["namespace"] == "team-w"


def test_the_generated_main_reads_the_self_managed_settings(hooked: Project) -> None:
    code = (
        "from guestbook_operator.main import cert_secret, parse_args\n"
        "spec = cert_secret(parse_args([]))\n"
        "print(spec.name, spec.namespace, spec.hosts[0], ','.join(spec.inject))\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(hooked.root), os.environ.get("PYTHONPATH", "")]),
        "POD_NAMESPACE": "ops",
        "WEBHOOK_CERT_SECRET": "s",
        "WEBHOOK_SERVICE": "svc",
        "WEBHOOK_CA_INJECT": "validatingwebhookconfigurations/v,customresourcedefinitions/c",
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=hooked.root, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "s",
        "ops",
        "svc.ops.svc",
        "validatingwebhookconfigurations/v,customresourcedefinitions/c",
    ]
