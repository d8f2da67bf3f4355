"""``kubeop run --log-format/--log-level`` (or KUBEOP_LOG_FORMAT/KUBEOP_LOG_LEVEL) reach the operator."""

from __future__ import annotations

import importlib
import json
import logging
import os
import sys
from collections.abc import Iterator
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


@pytest.fixture
def generated_main(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The scaffolded project's main module, imported; the root logger restored afterwards."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    project = new_project(tmp_path)
    monkeypatch.syspath_prepend(str(project.root))
    for name in ("LOG_LEVEL", "LOG_FORMAT", "KUBEOP_LOG_FORMAT", "KUBEOP_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    module = importlib.import_module(f"{project.package}.main")
    try:
        yield module
    finally:
        for name in [m for m in sys.modules if m == project.package or m.startswith(project.package + ".")]:
            del sys.modules[name]
        root.handlers[:] = handlers
        root.setLevel(level)


class _Ran:
    def run(self) -> None:
        logging.getLogger("kubeop.controller").info(
            "created ConfigMap default/web", extra={"controller": "web"}
        )


def test_the_generated_main_logs_json_when_told(
    generated_main: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(generated_main, "build_manager", lambda args: _Ran())
    generated_main.main(["--log-format", "json"])
    line = json.loads(capsys.readouterr().err)
    assert line["msg"] == "created ConfigMap default/web" and line["controller"] == "web"
    monkeypatch.setenv("KUBEOP_LOG_FORMAT", "json")  # what kubeop run --log-format json sets
    generated_main.main([])
    assert json.loads(capsys.readouterr().err)["level"] == "info"
    monkeypatch.setenv("LOG_LEVEL", "warning")
    generated_main.main([])
    assert capsys.readouterr().err == ""


def test_the_generated_main_refuses_a_bad_log_level_in_one_line(
    generated_main: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LOG_LEVEL", "loud")
    with pytest.raises(SystemExit, match="guestbook-operator: log level must be one of debug, info"):
        generated_main.main([])


def test_the_helm_operator_takes_the_same_log_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from kubeop.helm.__main__ import main
    from kubeop.manager.logs import JsonFormatter

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    for name in ("LOG_LEVEL", "LOG_FORMAT", "KUBEOP_LOG_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KUBEOP_LOG_FORMAT", "json")  # what kubeop run --log-format json sets
    try:
        assert main(["--watches-file", str(tmp_path / "missing.yaml"), "--log-level", "DEBUG"]) == 2
        (ours,) = [h for h in root.handlers if h.get_name() == "kubeop"]
        assert isinstance(ours.formatter, JsonFormatter) and root.level == logging.DEBUG
        monkeypatch.setenv("LOG_LEVEL", "loud")
        with pytest.raises(SystemExit):
            main(["--watches-file", str(tmp_path / "missing.yaml")])
        assert "log level must be one of debug, info" in capsys.readouterr().err
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
