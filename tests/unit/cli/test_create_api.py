"""kubeop create api: the files, the registration in main.py, idempotence and never clobbering."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubeop.scaffold import Project, ScaffoldError, create_api, find_project

from .conftest import new_project, read


def test_the_files_and_the_project_entry(project: Project) -> None:
    pkg = "guestbook_operator"
    for path in (
        f"{pkg}/api/v1/__init__.py",
        f"{pkg}/api/v1/guestbook.py",
        f"{pkg}/controllers/guestbook.py",
        "config/samples/webapp_v1_guestbook.yaml",
        "config/crd/bases/webapp.example.com_guestbooks.yaml",
        "config/rbac/guestbook_editor_role.yaml",
        "config/rbac/guestbook_viewer_role.yaml",
        "tests/test_guestbook_v1.py",
        "tests/test_guestbook_controller.py",
    ):
        assert (project.root / path).is_file(), path
    (entry,) = find_project(project.root).resources
    assert entry.to_dict() == {
        "api": {"crdVersion": "v1", "namespaced": True},
        "controller": True,
        "domain": "example.com",
        "group": "webapp",
        "kind": "Guestbook",
        "path": f"{pkg}.api.v1.guestbook",
        "version": "v1",
    }


def test_the_controller_is_registered_in_main_once(project: Project) -> None:
    main = read(project, "guestbook_operator/main.py")
    assert main.count("from guestbook_operator.controllers import guestbook as guestbook_controller\n") == 1
    assert main.count("guestbook_controller.controller(),\n") == 1


def test_the_controller_declares_its_rbac_next_to_it(project: Project) -> None:
    text = read(project, "guestbook_operator/controllers/guestbook.py")
    assert 'resources="guestbooks/status",' in text and "@rbac_rule(" in text
    (role,) = yaml.safe_load_all(read(project, "config/rbac/role.yaml"))
    rules = {(r["apiGroups"][0], r["resources"][0]): r["verbs"] for r in role["rules"]}
    assert rules[("webapp.example.com", "guestbooks")] == [
        "create",
        "delete",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ]
    assert rules[("webapp.example.com", "guestbooks/status")] == ["get", "patch", "update"]
    assert rules[("webapp.example.com", "guestbooks/finalizers")] == ["update"]


def test_a_second_run_changes_nothing_and_says_it_exists(project: Project) -> None:
    before = {p: p.read_bytes() for p in project.root.rglob("*") if p.is_file()}
    again = create_api(project, group="webapp", version="v1", kind="Guestbook")
    assert again.exists and again.changes == []
    assert {p: p.read_bytes() for p in project.root.rglob("*") if p.is_file()} == before


def test_user_code_is_never_overwritten(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    model = project.root / "guestbook_operator/api/v1/guestbook.py"
    model.parent.mkdir(parents=True)
    (model.parent / "__init__.py").write_text("")
    model.write_text(
        "from kubeop.crd import CustomResource\n\n"
        "class Guestbook(CustomResource, group='webapp.example.com', version='v1'):\n"
        "    spec: dict[str, str] = {}\n"
    )
    result = create_api(project, group="webapp", version="v1", kind="Guestbook")
    actions = {c.path: c.action for c in result.changes}
    assert actions["guestbook_operator/api/v1/guestbook.py"] == "kept"
    assert "spec: dict[str, str] = {}" in model.read_text()


def test_a_controller_can_be_added_later(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    first = create_api(project, group="webapp", version="v1", kind="Guestbook", controller=False)
    assert not (project.root / "guestbook_operator/controllers/guestbook.py").exists()
    assert "guestbook_controller" not in read(project, "guestbook_operator/main.py")
    second = create_api(first.project, group="webapp", version="v1", kind="Guestbook", resource=False)
    assert not second.exists
    assert (project.root / "guestbook_operator/controllers/guestbook.py").is_file()
    assert second.project.resources[0].api and second.project.resources[0].controller


def test_a_controller_without_a_model_is_refused(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    with pytest.raises(ScaffoldError, match=r"has no Guestbook model.*drop --no-resource"):
        create_api(project, group="webapp", version="v1", kind="Guestbook", resource=False)


def test_cluster_scoped_kinds(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    result = create_api(project, group="ops", version="v1", kind="Policy", namespaced=False)
    (crd,) = yaml.safe_load_all(read(result.project, "config/crd/bases/ops.example.com_policies.yaml"))
    assert crd["spec"]["scope"] == "Cluster"
    assert not result.project.resources[0].namespaced


def test_a_second_version_becomes_the_storage_version(project: Project) -> None:
    result = create_api(project, group="webapp", version="v2", kind="Guestbook")
    (crd,) = yaml.safe_load_all(read(project, "config/crd/bases/webapp.example.com_guestbooks.yaml"))
    assert [(v["name"], v["storage"]) for v in crd["spec"]["versions"]] == [("v2", True), ("v1", False)]
    assert crd["spec"]["conversion"] == {"strategy": "None"}
    actions = {c.path: c.action for c in result.changes}
    assert actions["guestbook_operator/controllers/guestbook.py"] == "kept"  # the kind's, from v1
    assert "api.v1.guestbook import" in read(project, "guestbook_operator/controllers/guestbook.py")
    third = create_api(result.project, group="webapp", version="v3", kind="Guestbook")
    assert "storage=True" not in read(third.project, "guestbook_operator/api/v3/guestbook.py")


def test_a_main_without_markers_gets_a_todo(project: Project) -> None:
    main = project.root / "guestbook_operator/main.py"
    main.write_text(main.read_text().replace("# +kubeop:scaffold:controllers", ""))
    result = create_api(project, group="webapp", version="v1", kind="Album")
    assert result.todo == [
        "guestbook_operator/main.py has no '# +kubeop:scaffold:controllers' line: "
        "add 'album_controller.controller(),' there by hand"
    ]
    assert "from guestbook_operator.controllers import album as album_controller" in main.read_text()


def test_a_kind_named_like_a_keyword(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    result = create_api(project, group="webapp", version="v1", kind="Class")
    assert (project.root / "guestbook_operator/controllers/class_.py").is_file()
    assert "import class_ as class__controller" in read(result.project, "guestbook_operator/main.py")


def test_versions_of_a_kind_share_its_scope(tmp_path: Path) -> None:
    project = create_api(
        new_project(tmp_path), group="ops", version="v1", kind="Policy", namespaced=False
    ).project
    with pytest.raises(ScaffoldError, match=r"Policy v1 is cluster-scoped.*pass --cluster"):
        create_api(project, group="ops", version="v2", kind="Policy")
    assert (
        create_api(project, group="ops", version="v2", kind="Policy", namespaced=False).resource.version
        == "v2"
    )
