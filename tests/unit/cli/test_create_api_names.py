"""create api's names: a group given in full, --plural, and a kind that exists in another group."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubeop.scaffold import ApiNames, Project, ScaffoldError, create_api, find_project

from .conftest import new_project, read


@pytest.mark.parametrize("group", ["cache", "cache.example.com"])
def test_a_group_given_in_full_is_not_joined_with_the_domain_again(tmp_path: Path, group: str) -> None:
    project = create_api(new_project(tmp_path), group=group, version="v1alpha1", kind="Memcached").project
    (entry,) = find_project(project.root).resources
    assert (entry.group, entry.names.full_group) == ("cache", "cache.example.com")
    assert (project.root / "config/crd/bases/cache.example.com_memcacheds.yaml").is_file()
    assert (project.root / "config/samples/cache_v1alpha1_memcached.yaml").is_file()
    assert "example.com.example.com" not in read(project, "guestbook_operator/api/v1alpha1/memcached.py")


def test_group_names() -> None:
    assert ApiNames("cache.example.com", "v1", "Memcached", "example.com").full_group == "cache.example.com"
    assert ApiNames("example.com", "v1", "Memcached", "example.com").full_group == "example.com"
    # a suffix that is not the whole domain is part of the group
    assert ApiNames("cache.ample.com", "v1", "Memcached", "example.com").full_group == (
        "cache.ample.com.example.com"
    )


def test_plural(tmp_path: Path) -> None:
    project = create_api(
        new_project(tmp_path), group="crew", version="v1", kind="Person", plural="people"
    ).project
    (entry,) = find_project(project.root).resources
    assert entry.plural == "people" and entry.to_dict()["plural"] == "people"
    assert 'plural="people",' in read(project, "guestbook_operator/api/v1/person.py")
    crd = yaml.safe_load(read(project, "config/crd/bases/crew.example.com_people.yaml"))
    assert crd["spec"]["names"]["plural"] == "people"
    assert 'resources="people"' in read(project, "guestbook_operator/controllers/person.py")
    # a second version shares the CRD, so its plural
    project = create_api(find_project(project.root), group="crew", version="v2", kind="Person").project
    assert 'plural="people",' in read(project, "guestbook_operator/api/v2/person.py")
    with pytest.raises(ScaffoldError, match=r"--plural persons: Person .* is recorded with plural people"):
        create_api(find_project(project.root), group="crew", version="v3", kind="Person", plural="persons")
    with pytest.raises(ScaffoldError, match="--plural: plural 'People' is not a lower-case DNS label"):
        ApiNames("crew", "v1", "Person", "example.com", "People")


def test_a_kind_in_another_group_is_refused_naming_multigroup(project: Project) -> None:
    before = read(project, "PROJECT")
    with pytest.raises(ScaffoldError) as e:
        create_api(project, group="ops", version="v1", kind="Guestbook")
    assert "Guestbook exists in this project in group webapp.example.com (v1)" in str(e.value)
    assert "kubeop edit --multigroup" in str(e.value)
    assert read(project, "PROJECT") == before
    assert not (project.root / "config/samples/ops_v1_guestbook.yaml").exists()


def test_the_command_exits_1_on_the_collision(project: Project) -> None:
    from typer.testing import CliRunner

    from kubeop.cli import app

    args = [
        "create",
        "api",
        "--dir",
        str(project.root),
        "--group",
        "ops",
        "--version",
        "v1",
        "--kind",
        "Guestbook",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert "error: Guestbook exists in this project in group webapp.example.com" in result.output
