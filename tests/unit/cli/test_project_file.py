"""The PROJECT file: round trips, unknown keys kept, found from below, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubeop.scaffold import Project, Resource, ScaffoldError, find_project, load_project
from kubeop.scaffold.project import LAYOUT


def test_round_trip_keeps_resources_and_unknown_keys(tmp_path: Path) -> None:
    project = Project(
        tmp_path,
        "example.com",
        "github.com/example/op",
        "op",
        "op",
        resources=(Resource("webapp", "v1", "Guestbook", "example.com", path="op.api.v1.guestbook"),),
        extra={"plugins": {"custom": True}},
    )
    project.save()
    data = yaml.safe_load((tmp_path / "PROJECT").read_text())
    assert data["layout"] == [LAYOUT]
    assert data["resources"] == [
        {
            "api": {"crdVersion": "v1", "namespaced": True},
            "controller": True,
            "domain": "example.com",
            "group": "webapp",
            "kind": "Guestbook",
            "path": "op.api.v1.guestbook",
            "version": "v1",
        }
    ]
    assert load_project(tmp_path) == project


def test_a_resource_without_a_model_or_controller(tmp_path: Path) -> None:
    res = Resource("webapp", "v1", "Guestbook", "example.com", api=False, controller=False, namespaced=True)
    assert "api" not in res.to_dict() and "controller" not in res.to_dict()
    assert Resource.from_dict(res.to_dict()) == res


def test_with_resource_replaces_the_entry_of_the_same_api(tmp_path: Path) -> None:
    a = Resource("webapp", "v1", "Guestbook", "example.com", controller=False)
    b = Resource("webapp", "v1", "Album", "example.com")
    project = Project(tmp_path, "example.com", "r", "op", "op", resources=(a, b))
    updated = project.with_resource(Resource("webapp", "v1", "Guestbook", "example.com"))
    assert [r.kind for r in updated.resources] == ["Guestbook", "Album"]
    assert updated.resources[0].controller


def test_find_project_walks_up(tmp_path: Path) -> None:
    Project(tmp_path, "example.com", "r", "op", "op").save()
    deep = tmp_path / "op" / "api" / "v1"
    deep.mkdir(parents=True)
    assert find_project(deep).root == tmp_path


def test_outside_a_project_the_error_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError, match=r"not inside a kubeop project.*kubeop init"):
        find_project(tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("domain: [", "not valid YAML"),
        ("- a list", "does not describe a project"),
        ("layout: [go.kubebuilder.io/v4]\nprojectName: x\n", "go.kubebuilder.io/v4, not python.kubeop"),
        (f"layout: [{LAYOUT}]\n", "no projectName"),
        (f"layout: [{LAYOUT}]\nprojectName: op\nresources: [{{kind: A}}]\n", "has no 'version'"),
    ],
)
def test_a_broken_project_file_is_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "PROJECT").write_text(text)
    with pytest.raises(ScaffoldError, match=message) as caught:
        load_project(tmp_path)
    assert "\n" not in str(caught.value)


_HEAD = f"layout: [{LAYOUT}]\nprojectName: op\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_HEAD + "package: ../outside\n", r"package '../outside' is not a Python package name"),
        (_HEAD + "package: [op]\n", "package must be a string"),
        (_HEAD + 'package: "op\\r\\nx"\n', r"package 'op\\r\\nx' is not a Python package name"),
        (_HEAD + "resources: abc\n", "resources must be a list of entries"),
        (_HEAD + "resources: [abc]\n", "resources must be a list of entries"),
        (_HEAD + "resources: [{kind: A, version: v1, api: yes}]\n", "api must be a mapping"),
        (_HEAD + "layout: go.kubebuilder.io/v4\n", "layout must be a list"),
        (_HEAD + "namespace: [a, b]\n", "namespace must be a string"),
        (_HEAD + "webhookCerts: {a: b}\n", "webhookCerts must be a string"),
        (_HEAD + 'repo: "x\\ny"\n', r"repo 'x\\ny' must be the project's repository"),
        (_HEAD + "domain: ../x\n", "domain '../x' is not a DNS subdomain"),
    ],
)
def test_a_project_file_field_of_the_wrong_kind_is_one_line_naming_it(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / "PROJECT").write_text(text)
    with pytest.raises(ScaffoldError, match=message) as caught:
        load_project(tmp_path)
    assert "\n" not in str(caught.value) and "PROJECT" in str(caught.value)
