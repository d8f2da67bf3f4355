"""kubeop manifests: CRDs from every model, RBAC from every @rbac_rule, samples, and whose files are whose."""

from __future__ import annotations

import pytest
import yaml

from kubeop.scaffold import (
    GENERATED,
    Project,
    ScaffoldError,
    generated,
    pending,
    plan_manifests,
    stale_manifests,
    write_planned,
)

from .conftest import read


def _write(project: Project) -> dict[str, str]:
    return {
        c.path: c.action for c in write_planned(project.root, plan_manifests(project, generated(project)))
    }


def _role_rules(project: Project) -> dict[tuple[str, str], list[str]]:
    (role,) = yaml.safe_load_all(read(project, "config/rbac/role.yaml"))
    return {
        (g, r): rule["verbs"] for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
    }


def test_a_fresh_project_is_up_to_date(project: Project) -> None:
    assert stale_manifests(project.root) == []
    assert set(_write(project).values()) == {"unchanged"}


def test_a_permission_declared_in_a_controller_reaches_the_cluster_role(project: Project) -> None:
    controller = project.root / "guestbook_operator/controllers/guestbook.py"
    text = controller.read_text().replace(
        "async def reconcile(",
        '@rbac_rule(groups="apps", resources="deployments", verbs="get;list;watch;create;update;patch")\n'
        "async def reconcile(",
    )
    controller.write_text(text)
    assert stale_manifests(project.root) == ["config/rbac/role.yaml"]
    assert _write(project)["config/rbac/role.yaml"] == "updated"
    rules = _role_rules(project)
    assert rules[("apps", "deployments")] == ["create", "get", "list", "patch", "update", "watch"]
    assert rules[("events.k8s.io", "events")] == ["create", "patch"]


def test_controllers_written_by_hand_are_found_too(project: Project) -> None:
    (project.root / "guestbook_operator/controllers/cleanup.py").write_text(
        "from kubeop.crd.rbac import rbac_rule\n\n\n"
        '@rbac_rule(resources="configmaps", verbs="list;delete")\n'
        "async def sweep() -> None: ...\n"
    )
    _write(project)
    assert _role_rules(project)[("", "configmaps")] == ["delete", "list"]


def test_a_kind_written_by_hand_gets_a_crd_a_sample_and_roles(project: Project) -> None:
    (project.root / "guestbook_operator/api/v1/album.py").write_text(
        "from kubeop.crd import CustomResource\n\n\n"
        "class Album(CustomResource, group='webapp.example.com', version='v1', scope='Cluster'):\n"
        "    spec: dict[str, str] = {}\n"
    )
    changes = _write(project)
    assert changes["config/crd/bases/webapp.example.com_albums.yaml"] == "created"
    assert changes["config/rbac/album_editor_role.yaml"] == "created"
    assert yaml.safe_load(read(project, "config/samples/webapp_v1_album.yaml")) == {
        "apiVersion": "webapp.example.com/v1",
        "kind": "Album",
        "metadata": {"name": "album-sample"},
        "spec": {},
    }
    index = yaml.safe_load(read(project, "config/samples/kustomization.yaml"))
    assert index["resources"] == ["webapp_v1_album.yaml", "webapp_v1_guestbook.yaml"]


def test_a_sample_of_a_model_with_required_fields_says_what_to_fill_in(project: Project) -> None:
    (project.root / "guestbook_operator/api/v1/album.py").write_text(
        "from pydantic import BaseModel\n\nfrom kubeop.crd import CustomResource\n\n\n"
        "class AlbumSpec(BaseModel):\n    title: str\n\n\n"
        "class Album(CustomResource, group='webapp.example.com', version='v1'):\n    spec: AlbumSpec\n"
    )
    _write(project)
    assert "spec: {}  # TODO(user): the required fields" in read(
        project, "config/samples/webapp_v1_album.yaml"
    )


def test_generated_files_carry_the_header_and_a_file_without_it_is_kept(project: Project) -> None:
    path = "config/rbac/guestbook_viewer_role.yaml"
    text = read(project, path)
    assert text.startswith(GENERATED + "\n")
    mine = text.removeprefix(GENERATED + "\n").replace("- list\n", "")
    (project.root / path).write_text(mine)
    assert _write(project)[path] == "kept"
    assert read(project, path) == mine
    assert path not in stale_manifests(project.root)


def test_an_edited_generated_file_is_rewritten(project: Project) -> None:
    path = project.root / "config/rbac/role.yaml"
    path.write_text(path.read_text() + "# an edit\n")
    assert stale_manifests(project.root) == ["config/rbac/role.yaml"]
    assert _write(project)["config/rbac/role.yaml"] == "updated"


def test_samples_are_the_users_once_written(project: Project) -> None:
    sample = project.root / "config/samples/webapp_v1_guestbook.yaml"
    sample.write_text(sample.read_text().replace("foo: bar", "foo: mine"))
    _write(project)
    assert "foo: mine" in sample.read_text()


def test_a_model_the_generator_cannot_express_is_a_clear_error(project: Project) -> None:
    (project.root / "guestbook_operator/api/v1/bad.py").write_text(
        "from kubeop.crd import CustomResource\n\n\n"
        "class Bad(CustomResource, group='webapp.example.com', version='v1'):\n"
        "    spec: tuple[int, str] = (1, 'a')\n"
    )
    with pytest.raises(ScaffoldError, match=r"^cannot generate the CRDs: .*Bad\.spec: tuples.*use list\[X\]"):
        plan_manifests(project, generated(project))


def test_the_plan_names_every_file_once(project: Project) -> None:
    plans = plan_manifests(project, generated(project))
    paths = [p.path for p in plans]
    assert len(paths) == len(set(paths))
    assert all(c.action == "unchanged" for c in pending(project.root, plans))
