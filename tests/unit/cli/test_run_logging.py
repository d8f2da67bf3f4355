"""``kubeop run --log-format/--log-level`` (or KUBEOP_LOG_FORMAT/KUBEOP_LOG_LEVEL) reach the operator."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kubeop.cli import app

from .conftest import new_project

runner = CliRunner()


@pytest.fixture
def started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What ``kubeop run`` would exec: the operator's command and environment."""
    seen: dict[str, Any] = {}

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        seen.update(argv=argv, env=env)

    monkeypatch.setattr(os, "execve", execve)
    for name in ("KUBEOP_LOG_FORMAT", "KUBEOP_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    seen["root"] = new_project(tmp_path).root
    return seen


def _run(started: dict[str, Any], *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    base = ["run", "--dir", str(started["root"]), "--no-rbac-check", "--no-webhooks"]
    result = runner.invoke(app, [*base, *args], env=env)
    return result.exit_code, result.output


def test_log_flags_reach_the_operator_as_environment(started: dict[str, Any]) -> None:
    code, out = _run(started, "--log-format", "JSON", "--log-level", "debug")
    assert code == 0, out
    assert started["env"]["KUBEOP_LOG_FORMAT"] == "json"
    assert started["env"]["KUBEOP_LOG_LEVEL"] == "debug"


def test_log_format_from_the_environment(started: dict[str, Any]) -> None:
    code, out = _run(started, env={"KUBEOP_LOG_FORMAT": "json"})
    assert code == 0, out
    assert started["env"]["KUBEOP_LOG_FORMAT"] == "json"
    assert "KUBEOP_LOG_LEVEL" not in started["env"]


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--log-format", "xml"], None, "--log-format (or KUBEOP_LOG_FORMAT) must be one of text, json"),
        ([], {"KUBEOP_LOG_LEVEL": "loud"}, "--log-level (or KUBEOP_LOG_LEVEL) must be one of debug, info"),
    ],
)
def test_a_bad_log_setting_is_one_line_naming_the_flag(
    started: dict[str, Any], args: list[str], env: dict[str, str] | None, said: str
) -> None:
    code, out = _run(started, *args, env=env)
    assert code == 1 and said in out and "Traceback" not in out
    assert "argv" not in started
