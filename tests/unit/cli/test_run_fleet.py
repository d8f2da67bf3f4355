"""``kubeop run --kubeconfig a --kubeconfig b`` / ``--cluster-secret-selector``: the operator
runs as a fleet (``python -m kubeop.fleet <package>``, the clusters in its environment); one
--kubeconfig runs as ever; bad input is one line naming the flag and the fix."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kubeop.cli import app
from kubeop.fleet import Kubeconfigs, KubeconfigSecrets
from kubeop.fleet.environment import (
    KUBECONFIGS_ENV,
    SECRET_NAMESPACE_ENV,
    SECRET_SELECTOR_ENV,
    fleet_for,
)
from kubeop.manager import LeaderElection, Manager

from .conftest import new_project

runner = CliRunner()
FLEET_VARS = (KUBECONFIGS_ENV, SECRET_SELECTOR_ENV, SECRET_NAMESPACE_ENV)


@pytest.fixture
def started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What ``kubeop run`` would exec: the operator's command and environment."""
    seen: dict[str, Any] = {}

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        seen.update(argv=argv, env=env)

    monkeypatch.setattr(os, "execve", execve)
    for name in (*FLEET_VARS, "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    seen["root"] = new_project(tmp_path).root
    for name in ("east", "west"):
        (tmp_path / f"{name}.yaml").write_text("apiVersion: v1\nkind: Config\n")
    seen["dir"] = tmp_path
    return seen


def _run(started: dict[str, Any], *args: str) -> tuple[int, str]:
    base = ["run", "--dir", str(started["root"]), "--no-rbac-check", "--no-webhooks"]
    result = runner.invoke(app, [*base, *args])
    return result.exit_code, result.output


def test_two_kubeconfigs_run_the_operator_as_a_fleet(started: dict[str, Any]) -> None:
    east, west = started["dir"] / "east.yaml", started["dir"] / "west.yaml"
    code, out = _run(started, "--kubeconfig", str(east), "--kubeconfig", f"far-west={west}")
    assert code == 0, out
    assert started["argv"][1:] == ["-m", "kubeop.fleet", "guestbook_operator"]
    entries = started["env"][KUBECONFIGS_ENV].split(os.pathsep)
    assert entries == [f"east={east.resolve()}", f"far-west={west.resolve()}"]
    assert "KUBECONFIG" not in started["env"]  # the hub stays $KUBECONFIG's cluster
    assert SECRET_SELECTOR_ENV not in started["env"]


def test_one_kubeconfig_runs_as_ever(started: dict[str, Any]) -> None:
    east = started["dir"] / "east.yaml"
    code, out = _run(started, "--kubeconfig", str(east))
    assert code == 0, out
    assert started["argv"][1:] == ["-m", "guestbook_operator"]
    assert started["env"]["KUBECONFIG"] == str(east)
    assert not set(FLEET_VARS) & set(started["env"])


def test_a_secret_selector_reads_the_hubs_kubeconfig_secrets(started: dict[str, Any]) -> None:
    code, out = _run(
        started, "--cluster-secret-selector", "cluster.x-k8s.io/cluster-name,env in (prod)",
        "--cluster-secret-namespace", "fleet-system",
    )  # fmt: skip
    assert code == 0, out
    assert started["argv"][1:] == ["-m", "kubeop.fleet", "guestbook_operator"]
    assert started["env"][SECRET_SELECTOR_ENV] == "cluster.x-k8s.io/cluster-name,env in (prod)"
    assert started["env"][SECRET_NAMESPACE_ENV] == "fleet-system"
    assert KUBECONFIGS_ENV not in started["env"]


def test_a_secret_selector_alone_still_checks_the_permissions_on_the_hub(
    started: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import kubeop.cli.run as run_command

    checked: list[Path | None] = []

    async def check(project: Any, args: Any, kubeconfig: Path | None, *_: Any) -> None:
        checked.append(kubeconfig)

    monkeypatch.setattr(run_command, "_check", check)
    base = ["run", "--dir", str(started["root"]), "--no-webhooks"]
    result = runner.invoke(app, [*base, "--cluster-secret-selector", "cluster.x-k8s.io/cluster-name"])
    assert result.exit_code == 0, result.output
    assert checked == [None]  # $KUBECONFIG's cluster, the hub: never no check at all


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--kubeconfig", "{dir}/missing.yaml"], "--kubeconfig {dir}/missing.yaml: no such file"),
        (
            ["--kubeconfig", "{dir}/east.yaml", "--kubeconfig", "{dir}/missing.yaml"],
            "--kubeconfig '{dir}/missing.yaml': no such kubeconfig file",
        ),
        (
            ["--kubeconfig", "{dir}/east.yaml", "--kubeconfig", "east={dir}/west.yaml"],
            "two kubeconfigs name cluster 'east'",
        ),
        (
            ["--kubeconfig", "{dir}/east.yaml", "--kubeconfig", "East_1={dir}/west.yaml"],
            "not a DNS-1123 name",
        ),
        (
            ["--cluster-secret-selector", "a in (b"],
            "--cluster-secret-selector 'a in (b' is not a label selector",
        ),
        (["--cluster-secret-selector", " "], "--cluster-secret-selector is empty"),
        (
            ["--kubeconfig", "{dir}/east.yaml", "--kubeconfig", "{dir}/west.yaml", "--dashboard"],
            "a fleet run has none yet: drop --dashboard",
        ),
    ],
)
def test_bad_fleet_input_is_one_line_naming_the_flag(
    started: dict[str, Any], args: list[str], said: str
) -> None:
    d = str(started["dir"])
    code, out = _run(started, *(a.format(dir=d) for a in args))
    assert code == 1 and said.format(dir=d) in out and "Traceback" not in out, out
    assert "argv" not in started


def test_the_help_documents_the_fleet_flags() -> None:
    result = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for flag in ("--kubeconfig", "--cluster-secret-selector", "--cluster-secret-namespace"):
        assert flag in result.output
    assert "repeat it to run on several clusters" in " ".join(result.output.split())


@pytest.fixture
def generated_main(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    project = new_project(tmp_path)
    monkeypatch.syspath_prepend(str(project.root))
    module = importlib.import_module(f"{project.package}.main")
    try:
        yield module
    finally:
        for name in [m for m in sys.modules if m == project.package or m.startswith(project.package + ".")]:
            del sys.modules[name]


def test_the_scaffolded_manager_becomes_a_fleet_of_the_named_clusters(
    generated_main: Any, tmp_path: Path
) -> None:
    (tmp_path / "a.yaml").write_text("")
    (tmp_path / "b.yaml").write_text("")
    manager = generated_main.build_manager(generated_main.parse_args([]))
    environ = {
        KUBECONFIGS_ENV: os.pathsep.join([f"a={tmp_path / 'a.yaml'}", f"b={tmp_path / 'b.yaml'}"]),
        SECRET_SELECTOR_ENV: "cluster.x-k8s.io/cluster-name",
        SECRET_NAMESPACE_ENV: "hub",
    }
    fleet = fleet_for(manager, environ)
    assert fleet is not None
    assert fleet.name == manager.name and fleet.controllers == manager.controllers
    kubeconfigs, secrets = fleet.providers
    assert isinstance(kubeconfigs, Kubeconfigs) and repr(kubeconfigs) == "Kubeconfigs(['a', 'b'])"
    assert isinstance(secrets, KubeconfigSecrets) and secrets.namespace == "hub"
    assert fleet_for(manager, {}) is None  # nothing named: the Manager runs its one cluster


def test_what_a_fleet_cannot_run_yet_is_refused_by_name(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("")
    environ = {KUBECONFIGS_ENV: f"a={tmp_path / 'a.yaml'}"}
    with pytest.raises(ValueError, match="this operator has leader election, which a fleet run"):
        fleet_for(Manager(leader_election=LeaderElection(id="x", namespace="default")), environ)
    with pytest.raises(ValueError, match="this operator has a dashboard, which a fleet run"):
        fleet_for(Manager(dashboard=True), environ)  # KUBEOP_DASHBOARD too: never dropped silently


def test_python_m_kubeop_fleet_says_what_is_missing(
    generated_main: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from kubeop.fleet.__main__ import main

    for name in FLEET_VARS:
        monkeypatch.delenv(name, raising=False)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        with pytest.raises(SystemExit, match="the operator's package first"):
            main([])
        with pytest.raises(SystemExit, match=r"cannot import no_such_operator\.main"):
            main(["no_such_operator"])
        package = generated_main.__name__.rsplit(".", 1)[0]
        with pytest.raises(SystemExit, match="no clusters: set KUBEOP_FLEET_KUBECONFIGS"):
            main([package])
        monkeypatch.setenv(KUBECONFIGS_ENV, f"a={tmp_path / 'missing.yaml'}")
        with pytest.raises(SystemExit, match="no such kubeconfig file"):
            main([package])
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
