"""PROJECT's importRoot: a project whose package is imported from an ancestor directory (the
examples in this repository), its validation, and the commands that follow it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import kubeop
from kubeop.scaffold import (
    ScaffoldError,
    create_api,
    create_webhook,
    find_project,
    generated,
    load_project,
    stale_manifests,
)
from kubeop.scaffold.image import write_build_context
from kubeop.scaffold.project import check_import_root

from .conftest import new_project

REPO_ROOT = Path(__file__).resolve().parents[3]


def _nested(tmp_path: Path) -> Path:
    """A project at <tmp>/top/proj whose package is top.proj, imported from <tmp>: a kubeop init
    project with its package folded into the root (as examples/mysql sits in the examples package)."""
    project = create_api(
        new_project(tmp_path / "top", "proj"), group="webapp", version="v1", kind="Guestbook"
    )
    root = project.project.root
    (tmp_path / "top" / "__init__.py").write_text("")
    for path in sorted((root / "proj").rglob("*.py")):
        dest = root / path.relative_to(root / "proj")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(path.read_text().replace("from proj.", "from top.proj."))
    for path in sorted((root / "proj").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    (root / "proj").rmdir()
    data = yaml.safe_load((root / "PROJECT").read_text())
    data.update(package="top.proj", importRoot="../..")
    (root / "PROJECT").write_text(yaml.safe_dump(data))
    return root


def test_the_package_is_imported_from_the_declared_ancestor(tmp_path: Path) -> None:
    root = _nested(tmp_path)
    project = find_project(root / "config")
    assert (project.import_root, project.package_root, project.package_dir) == ("../..", tmp_path, root)
    assert yaml.safe_load(project.to_yaml())["importRoot"] == "../.."
    assert load_project(root) == project
    # the models and controllers are read from top.proj, and config/ is what they were before
    found = generated(project)
    assert [m.__module__ for m in found.models] == ["top.proj.api.v1.guestbook"]
    assert any("guestbooks" in r.resources for r in found.rules)
    assert stale_manifests(root) == []


def test_a_project_without_import_root_is_unchanged(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    assert (project.import_root, project.package_root) == (".", project.root)
    assert project.package_dir == project.root / project.package
    assert "importRoot" not in yaml.safe_load(project.to_yaml())


def test_commands_that_write_into_the_package_refuse_clearly(tmp_path: Path) -> None:
    project = find_project(_nested(tmp_path))
    with pytest.raises(ScaffoldError, match=r"create api works on <root>/top.proj/.*importRoot in PROJECT"):
        create_api(project, group="webapp", version="v1", kind="Other")
    with pytest.raises(ScaffoldError, match=r"create webhook works on .*importRoot in PROJECT"):
        create_webhook(project, group="webapp", version="v1", kind="Guestbook", defaulting=True)
    with pytest.raises(ScaffoldError, match=r"docker-build works on .*: write a Dockerfile"):
        write_build_context(project, tmp_path / "context")
    assert not (tmp_path / "context").exists()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("/abs/path", "is absolute"),
        ("C:/work", "is absolute"),
        ("..\n..", "line break"),
        ("..\r", "line break"),
        ("..\0", "NUL"),
        ("..\\..", "backslash"),
        (2, "must be a string"),
        (["..", ".."], "must be a string"),
        (None, "must be a string"),
        ("sub", "made of '..' only"),
        ("../other", "made of '..' only"),
        ("../../..", "outside the project"),  # more ups than the package has names
        ("", None),
        ("./", None),
    ],
)
def test_bad_import_roots_name_the_field_and_the_fix(tmp_path: Path, value: Any, message: str | None) -> None:
    root = tmp_path / "top" / "proj"
    if message is None:
        assert check_import_root(value, root=root, package="top.proj") == "."
        return
    with pytest.raises(ScaffoldError, match=f"importRoot.*{message}"):
        check_import_root(value, root=root, package="top.proj")


def test_an_import_root_whose_package_is_not_the_root_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "top" / "proj"
    with pytest.raises(ScaffoldError, match=r"outside the project.*must be 'other/proj'"):
        check_import_root("../..", root=root, package="other.proj")
    with pytest.raises(ScaffoldError, match=r"outside the project.*'top'"):
        check_import_root("..", root=root, package="top.proj")  # would be <tmp>/top/top/proj
    # the package may go deeper than the root: <tmp>/top/proj/pkg as top.proj.pkg
    assert check_import_root("../..", root=root, package="top.proj.pkg") == "../.."
    assert check_import_root("../.././", root=root, package="top.proj") == "../.."


def test_the_loader_reports_a_bad_import_root_in_project(tmp_path: Path) -> None:
    root = _nested(tmp_path)
    text = (root / "PROJECT").read_text().replace("importRoot: ../..", "importRoot: /etc")
    (root / "PROJECT").write_text(text)
    with pytest.raises(ScaffoldError, match=r"PROJECT: importRoot '/etc' is absolute"):
        find_project(root)


@pytest.mark.parametrize("package", ["top-proj", "top..proj", "1top", "top.class", "../outside"])
def test_a_package_that_is_not_a_python_name_is_refused(tmp_path: Path, package: str) -> None:
    root = new_project(tmp_path).root
    data = yaml.safe_load((root / "PROJECT").read_text())
    (root / "PROJECT").write_text(yaml.safe_dump({**data, "package": package}))
    with pytest.raises(ScaffoldError, match=r"PROJECT: package .* is not a Python package name"):
        find_project(root)


@pytest.mark.parametrize("example", ["mysql", "dbcluster", "crontab"])
def test_the_examples_config_is_what_kubeop_manifests_writes(example: str) -> None:
    """examples/mysql, examples/dbcluster and examples/crontab (two versions, a conversion and
    admission webhooks) are kubeop projects: `kubeop manifests --check` passes there (in a process
    of its own: the generator re-imports the examples package)."""
    src = str(Path(kubeop.__file__).parents[1])  # the kubeop under test
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run(
        [sys.executable, "-m", "kubeop", "manifests", "--check"],
        cwd=REPO_ROOT / "examples" / example,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_dotted_package_needs_an_import_root(tmp_path: Path) -> None:
    root = _nested(tmp_path)
    data = yaml.safe_load((root / "PROJECT").read_text())
    del data["importRoot"]
    (root / "PROJECT").write_text(yaml.safe_dump(data))
    with pytest.raises(ScaffoldError, match=r"package 'top.proj' has dots.*importRoot: \.\./\.\."):
        find_project(root)
