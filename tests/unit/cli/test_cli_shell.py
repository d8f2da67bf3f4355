"""The command line as a shell sees it: a fast root help as wide as the terminal, --version,
completion, lazy commands, and a clear message when the ``cli`` extra is not installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

import kubeop
from kubeop.cli import _COMMANDS, _summary, app

SRC = str(Path(kubeop.__file__).parent.parent)
# What a command may import but `kubeop --help` must not: each costs tens to hundreds of ms.
HEAVY = (
    "kubeop.testing",
    "kubeop.testing.fake",
    "kubeop.testing.controlplane",
    "kubeop.helm",
    "kubeop.scaffold",
    "kubeop.crd",
    "kubeop.client",
    "kubeop.manager",
    "kubeop.webhook",
    "pydantic",
    "rich",
    "yaml",
    "cryptography",
)


def _python(code: str, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": SRC, **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=60, check=False
    )


@pytest.mark.parametrize("argv", [[], ["--help"], ["--version"]])
def test_the_root_commands_import_no_heavy_module(argv: list[str]) -> None:
    code = (
        "import sys\n"
        f"sys.argv = ['kubeop', *{argv!r}]\n"
        "from kubeop.__main__ import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('LOADED', sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = _python(code)
    assert done.stdout.splitlines()[-1] == "LOADED []", done.stderr


def test_importing_the_cli_imports_no_heavy_module() -> None:
    done = _python(f"import sys, kubeop.cli; print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    assert done.stdout.strip() == "[]", done.stderr


def test_a_command_loads_its_module_only_when_run() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from kubeop.cli import app\n"
        "CliRunner().invoke(app, ['create', 'api', '--help'])\n"
        "print('scaffold' if 'kubeop.scaffold' in sys.modules else '-',"
        " 'testing' if 'kubeop.testing' in sys.modules else '-')\n"
    )
    assert _python(code).stdout.split() == ["scaffold", "-"]


@pytest.mark.parametrize("name", list(_COMMANDS))
def test_the_root_help_lists_each_command_with_its_own_summary(name: str) -> None:
    command = app.registered_groups  # the root registers nothing eagerly
    assert command == []
    group = typer.main.get_command(app)
    loaded = group.get_command(typer.Context(group), name)  # type: ignore[attr-defined]
    assert loaded is not None and loaded.name == name
    assert _COMMANDS[name].summary == _summary(loaded.help)


def test_help_is_as_wide_as_the_terminal_and_has_no_type_labels_on_flags() -> None:
    code = "from kubeop.__main__ import main\nmain()\n"
    wide = _python(
        code.replace("main()", "import sys; sys.argv[1:] = ['create', 'api', '--help']; main()"),
        env={"COLUMNS": "200"},
    )
    assert wide.returncode == 0, wide.stderr
    assert max(len(line) for line in wide.stdout.splitlines()) > 100
    assert "<bool>" not in wide.stdout and "╭" not in wide.stdout
    assert "--resource / --no-resource" in wide.stdout
    root = _python(
        code.replace("main()", "import sys; sys.argv[1:] = ['--help']; main()"), env={"COLUMNS": "200"}
    )
    # summaries listed whole, on one line each
    assert f"  init          {_COMMANDS['init'].summary}\n" in root.stdout


def test_version_flag() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert (result.exit_code, result.output) == (0, f"kubeop {kubeop.__version__}\n")


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell: str) -> None:
    result = CliRunner().invoke(app, ["completion", shell])
    assert result.exit_code == 0, result.output
    assert "_KUBEOP_COMPLETE" in result.output and "kubeop" in result.output


def test_completion_completes_commands_and_options() -> None:
    code = "from kubeop.__main__ import main\nmain()\n"
    commands = _python(
        code, env={"_KUBEOP_COMPLETE": "complete_bash", "COMP_WORDS": "kubeop cre", "COMP_CWORD": "1"}
    )
    assert commands.stdout.split() == ["create"], commands.stderr
    options = _python(
        code,
        env={"_KUBEOP_COMPLETE": "complete_bash", "COMP_WORDS": "kubeop create api --plu", "COMP_CWORD": "3"},
    )
    assert options.stdout.split() == ["--plural"], options.stderr


def test_without_the_cli_extra_the_script_names_it() -> None:
    code = (
        "import sys\n"
        "class Hide:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'typer':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Hide())\n"
        "from kubeop.__main__ import main\n"
        "main()\n"
    )
    done = _python(code)
    assert done.returncode == 1
    assert "pip install 'kubeop[cli]'" in done.stderr and "Traceback" not in done.stderr
    # the operator runtime does not need it
    assert (
        _python(
            code.replace("from kubeop.__main__ import main\nmain()\n", "import kubeop.manager")
        ).returncode
        == 0
    )
