"""kubeop edit --multigroup: a package per API group, so a kind may exist in several groups."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubeop.cli import app
from kubeop.scaffold import Project, ScaffoldError, create_api, create_webhook, find_project

from .conftest import read


def _edit(project: Project, *flags: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["edit", *flags, "--dir", str(project.root)])
    return result.exit_code, result.output


def test_edit_multigroup_records_it_and_keeps_the_old_apis(project: Project) -> None:
    assert _edit(project, "--multigroup") == (
        0,
        "updated PROJECT (multigroup: true)\nExisting APIs stay where they are (PROJECT records their "
        "modules); new ones go to guestbook_operator/api/<group>/<version>/ and "
        "guestbook_operator/controllers/<group>/. To move an existing API, move its files and update "
        "its path in PROJECT.\n",
    )
    assert yaml.safe_load(read(project, "PROJECT"))["multigroup"] is True
    assert find_project(project.root).multigroup
    assert _edit(project, "--multigroup")[1] == "the project is already multigroup: nothing to do\n"
    (entry,) = find_project(project.root).resources
    assert entry.path == "guestbook_operator.api.v1.guestbook"


def test_a_kind_in_two_groups_once_multigroup(project: Project) -> None:
    with pytest.raises(ScaffoldError, match="kubeop edit --multigroup"):
        create_api(project, group="ops", version="v1", kind="Guestbook")
    assert _edit(project, "--multigroup")[0] == 0
    project = create_api(find_project(project.root), group="ops", version="v1", kind="Guestbook").project
    pkg = "guestbook_operator"
    for path in (
        f"{pkg}/api/ops/__init__.py",
        f"{pkg}/api/ops/v1/__init__.py",
        f"{pkg}/api/ops/v1/guestbook.py",
        f"{pkg}/controllers/ops/__init__.py",
        f"{pkg}/controllers/ops/guestbook.py",
        "tests/test_ops_guestbook_v1.py",
        "tests/test_ops_guestbook_controller.py",
        "config/samples/ops_v1_guestbook.yaml",
        "config/crd/bases/ops.example.com_guestbooks.yaml",
        # the first group's files are untouched
        f"{pkg}/api/v1/guestbook.py",
        f"{pkg}/controllers/guestbook.py",
        "config/crd/bases/webapp.example.com_guestbooks.yaml",
    ):
        assert (project.root / path).is_file(), path
    assert "from guestbook_operator.api.ops.v1.guestbook import Guestbook" in read(
        project, f"{pkg}/controllers/ops/guestbook.py"
    )
    main = read(project, f"{pkg}/main.py")
    assert "from guestbook_operator.controllers.ops import guestbook as ops_guestbook_controller" in main
    assert "ops_guestbook_controller.controller()," in main and "guestbook_controller.controller()," in main
    entries = {r.full_group: r.path for r in find_project(project.root).resources}
    assert entries == {
        "webapp.example.com": f"{pkg}.api.v1.guestbook",
        "ops.example.com": f"{pkg}.api.ops.v1.guestbook",
    }
    # a webhook imports the model from where PROJECT says it is
    project = find_project(project.root)
    (project.root / f"{pkg}/webhooks").mkdir()
    created = create_webhook(project, group="ops", version="v1", kind="Guestbook", defaulting=True)
    assert "from guestbook_operator.api.ops.v1.guestbook import Guestbook" in read(project, created.path)


def test_no_multigroup_with_several_groups_is_refused(project: Project) -> None:
    assert _edit(project, "--multigroup")[0] == 0
    create_api(find_project(project.root), group="ops", version="v1", kind="Policy")
    code, out = _edit(project, "--no-multigroup")
    assert code == 1 and "several groups" in out
    assert _edit(project)[1] == "error: nothing to change: pass --multigroup or --no-multigroup\n"


def test_a_built_in_kinds_controller_in_a_multigroup_project(tmp_path: Path, project: Project) -> None:
    assert _edit(project, "--multigroup")[0] == 0
    create_api(find_project(project.root), group="apps", version="v1", kind="Deployment", resource=False)
    assert "from kubeop.kinds import Deployment" in read(
        project, "guestbook_operator/controllers/apps/deployment.py"
    )
