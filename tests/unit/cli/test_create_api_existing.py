"""create api --no-resource for kinds the project does not define: built-in and other operators'."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubeop.scaffold import Project, ScaffoldError, create_api, find_project

from .conftest import new_project, read


def _rules(project: Project) -> dict[tuple[str, str], list[str]]:
    (role,) = yaml.safe_load_all(read(project, "config/rbac/role.yaml"))
    return {(r["apiGroups"][0], res): r["verbs"] for r in role["rules"] for res in r["resources"]}


def test_a_controller_for_a_built_in_kind(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    result = create_api(project, group="apps", version="v1", kind="Deployment", resource=False)
    project = find_project(project.root)
    text = read(project, "guestbook_operator/controllers/deployment.py")
    assert "from kubeop.kinds import Deployment" in text
    assert "Controller.for_(Deployment)" in text
    assert "guestbook_operator.controllers import deployment as deployment_controller" in read(
        project, "guestbook_operator/main.py"
    )
    (entry,) = project.resources
    assert entry.to_dict() == {
        "controller": True,
        "domain": "",
        "external": True,
        "group": "apps",
        "kind": "Deployment",
        "path": "kubeop.kinds",
        "version": "v1",
    }
    # the controller imports (kubeop manifests read its @rbac_rule), and no CRD or sample is made
    assert _rules(project)[("apps", "deployments")] == ["get", "list", "patch", "update", "watch"]
    assert not list((project.root / "config/crd/bases").glob("*.yaml"))
    assert not list((project.root / "config/samples").glob("apps_*"))
    assert not (project.root / "guestbook_operator/api/v1").exists()
    # a second run changes nothing
    assert create_api(project, group="apps", version="v1", kind="Deployment", resource=False).exists
    assert result.changes


def test_a_controller_for_a_core_kind(tmp_path: Path) -> None:
    project = create_api(
        new_project(tmp_path), group="core", version="v1", kind="ConfigMap", resource=False
    ).project
    assert "from kubeop.kinds import ConfigMap" in read(
        project, "guestbook_operator/controllers/configmap.py"
    )
    assert _rules(project)[("", "configmaps")] == ["get", "list", "patch", "update", "watch"]


def test_a_built_in_kind_in_the_wrong_group_names_the_right_one(tmp_path: Path) -> None:
    with pytest.raises(
        ScaffoldError, match=r"Deployment is a built-in kind of apps/v1.*--group apps --version v1"
    ):
        create_api(new_project(tmp_path), group="extensions", version="v1", kind="Deployment", resource=False)


def test_a_controller_for_another_operators_kind(tmp_path: Path) -> None:
    project = create_api(
        new_project(tmp_path),
        group="cert-manager",
        version="v1",
        kind="Certificate",
        resource=False,
        external_api_domain="io",
    ).project
    text = read(project, "guestbook_operator/controllers/certificate.py")
    assert 'CERTIFICATES = ApiResource("cert-manager.io", "v1", "certificates", kind="Certificate")' in text
    assert _rules(project)[("cert-manager.io", "certificates")] == ["get", "list", "patch", "update", "watch"]
    (entry,) = find_project(project.root).resources
    assert (entry.group, entry.external, entry.api) == ("cert-manager.io", True, False)


def test_the_flags_say_what_is_missing(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    with pytest.raises(ScaffoldError, match=r"--external-api-domain is for a controller .* --no-resource"):
        create_api(project, group="cert-manager", version="v1", kind="Certificate", external_api_domain="io")
    with pytest.raises(ScaffoldError, match=r"no built-in kind of that name.*--external-api-domain"):
        create_api(project, group="cert-manager", version="v1", kind="Certificate", resource=False)


def test_the_command(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kubeop.cli import app

    project = new_project(tmp_path)
    args = ["create", "api", "--dir", str(project.root), "--group", "apps", "--version", "v1"]
    result = CliRunner().invoke(app, [*args, "--kind", "StatefulSet", "--no-resource"])
    assert result.exit_code == 0, result.output
    assert "A controller for StatefulSet (apps/v1) is in guestbook_operator/controllers/statefulset.py" in (
        result.output
    )
