"""kubeop create webhook: the handler file, its test, main.py, config/webhook, conversion in the CRD."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kubeop.scaffold import Project, ScaffoldError, create_api, create_webhook, find_project

from .conftest import read


def test_defaulting_and_validation(project: Project) -> None:
    result = create_webhook(
        project, group="webapp", version="v1", kind="Guestbook", defaulting=True, validation=True
    )
    pkg = "guestbook_operator"
    assert result.path == f"{pkg}/webhooks/guestbook_v1.py" and not result.todo
    source = read(project, result.path)
    assert "@defaulting(Guestbook)" in source and "@validating(Guestbook)" in source
    assert "WEBHOOKS = [default_guestbook, validate_guestbook]" in source
    main = read(project, f"{pkg}/main.py")
    assert f"from {pkg}.webhooks import guestbook_v1 as guestbook_v1_webhooks\n" in main
    assert "*guestbook_v1_webhooks.WEBHOOKS,\n" in main
    validating, mutating = yaml.safe_load_all(read(project, "config/webhook/manifests.yaml"))
    hook = validating["webhooks"][0]
    assert hook["name"] == "vguestbook.webapp.example.com"
    assert hook["clientConfig"]["service"] == {
        "name": "guestbook-operator-webhook-service",
        "namespace": "guestbook-operator-system",
        "path": "/validate-webapp-example-com-v1-guestbook",
        "port": 443,
    }
    assert "annotations" not in validating["metadata"]  # self-managed: the operator injects the CA
    assert mutating["kind"] == "MutatingWebhookConfiguration"
    assert (project.root / "config/webhook/service.yaml").is_file()
    again = create_webhook(project, group="webapp", version="v1", kind="Guestbook", defaulting=True)
    assert again.exists


def test_conversion_makes_the_crd_convert_through_the_hub(project: Project) -> None:
    project = create_api(project, group="webapp", version="v2", kind="Guestbook").project
    create_webhook(
        find_project(project.root), group="webapp", version="v2", kind="Guestbook", conversion=True
    )
    source = read(project, "guestbook_operator/webhooks/guestbook_v2.py")
    assert (
        "conversion_guestbook = Conversion.of_models("
        "Guestbook, functions={GuestbookV1: (v1_to_hub, v1_from_hub)})" in source
    )
    (crd,) = yaml.safe_load_all(read(project, "config/crd/bases/webapp.example.com_guestbooks.yaml"))
    assert crd["spec"]["conversion"]["strategy"] == "Webhook"
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["path"] == (
        "/convert/guestbooks.webapp.example.com"
    )


def test_the_generated_tests_pass(project: Project) -> None:
    project = create_api(project, group="webapp", version="v2", kind="Guestbook").project
    project = find_project(project.root)
    create_webhook(project, group="webapp", version="v1", kind="Guestbook", defaulting=True, validation=True)
    create_webhook(project, group="webapp", version="v2", kind="Guestbook", conversion=True)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/test_guestbook_v1_webhook.py",
            "tests/test_guestbook_v2_webhook.py",
        ],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    lint = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "guestbook_operator/webhooks", "tests"],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_refusals(project: Project, tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError, match="nothing to create"):
        create_webhook(project, group="webapp", version="v1", kind="Guestbook")
    with pytest.raises(ScaffoldError, match="kubeop create api --group webapp --version v9"):
        create_webhook(project, group="webapp", version="v9", kind="Guestbook", defaulting=True)
    with pytest.raises(ScaffoldError, match="no other version"):
        create_webhook(project, group="webapp", version="v1", kind="Guestbook", conversion=True)


def test_kubeop_run_registers_the_webhooks_at_a_local_url(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import base64

    from kubeop.cli import run as run_module

    assert run_module.local_webhook_objects(project, []) == []  # no webhooks: nothing to register
    project = create_api(project, group="webapp", version="v2", kind="Guestbook").project
    project = find_project(project.root)
    create_webhook(project, group="webapp", version="v1", kind="Guestbook", validation=True)
    create_webhook(project, group="webapp", version="v2", kind="Guestbook", conversion=True)
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the private cert dir goes under it
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    certs = tmp_path / f"kubeop-{os.geteuid()}" / "webhook-certs"
    crd, validating = run_module.local_webhook_objects(project, ["--webhook-bind-address", "127.0.0.1:9555"])
    ca = base64.b64encode((certs / "ca.crt").read_bytes()).decode()
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"] == {
        "url": "https://127.0.0.1:9555/convert/guestbooks.webapp.example.com",
        "caBundle": ca,
    }
    assert validating["webhooks"][0]["clientConfig"] == {
        "url": "https://127.0.0.1:9555/validate-webapp-example-com-v1-guestbook",
        "caBundle": ca,
    }
    assert (certs / "tls.crt").is_file()
