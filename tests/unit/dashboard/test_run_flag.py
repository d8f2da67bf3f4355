"""``kubeop run --dashboard`` reaches the operator as KUBEOP_DASHBOARD, which any Manager reads
when not given ``dashboard=`` (so kopf's and the Helm operator's get it too)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kubeop.cli import app
from kubeop.manager import Dashboard, Manager
from tests.unit.cli.conftest import new_project


@pytest.fixture
def started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(os, "execve", lambda path, argv, env: seen.update(argv=argv, env=env))
    monkeypatch.delenv("KUBEOP_DASHBOARD", raising=False)
    seen["root"] = new_project(tmp_path).root
    return seen


def _run(started: dict[str, Any], *args: str, env: dict[str, str] | None = None) -> None:
    base = ["run", "--dir", str(started["root"]), "--no-rbac-check", "--no-webhooks"]
    result = CliRunner().invoke(app, [*base, *args], env=env)
    assert result.exit_code == 0, result.output


def test_the_flag_turns_the_dashboard_on(started: dict[str, Any]) -> None:
    _run(started, "--dashboard")
    assert started["env"]["KUBEOP_DASHBOARD"] == "1"


def test_off_without_the_flag_and_an_address_from_the_environment_is_kept(started: dict[str, Any]) -> None:
    _run(started)
    assert "KUBEOP_DASHBOARD" not in started["env"]
    _run(started, "--dashboard", env={"KUBEOP_DASHBOARD": "127.0.0.1:9999"})
    assert started["env"]["KUBEOP_DASHBOARD"] == "127.0.0.1:9999"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("0", None),
        ("false", None),
        ("1", Dashboard()),
        ("true", Dashboard()),
        ("127.0.0.1:9000", Dashboard(address="127.0.0.1:9000")),
    ],
)
def test_the_manager_reads_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str | None, expected: Dashboard | None
) -> None:
    if value is None:
        monkeypatch.delenv("KUBEOP_DASHBOARD", raising=False)
    else:
        monkeypatch.setenv("KUBEOP_DASHBOARD", value)
    assert Manager().dashboard == expected
    assert Manager(dashboard=False).dashboard is None  # an explicit choice wins


def test_a_bad_environment_value_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBEOP_DASHBOARD", "maybe")
    with pytest.raises(ValueError, match=r"KUBEOP_DASHBOARD='maybe'.*host:port"):
        Manager()
