"""The ``kubeop`` command line.

The commands load on first use: ``kubeop --help``, ``--version`` and ``completion`` import typer and
this module only, and ``kubeop create api`` imports the scaffold but not the local control plane.
Each command is named here with the module that holds it and the one-line summary the root help
lists (a unit test keeps the summaries equal to the commands' own help).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import import_module
from typing import Annotated, Any

import typer
import typer.main
from typer.core import TyperGroup

import kubeop


@dataclass(frozen=True)
class _Lazy:
    """A command loaded on first use: ``module:attribute`` is a command function or a Typer group."""

    target: str
    summary: str
    context_settings: dict[str, Any] | None = None


# In the order `kubeop --help` lists them (the kubebuilder workflow first).
_COMMANDS: dict[str, _Lazy] = {
    "init": _Lazy(
        "kubeop.cli.init:init",
        "Create a kubebuilder-style operator project: PROJECT, package, config/, Dockerfile, "
        "Makefile, tests.",
    ),
    "edit": _Lazy(
        "kubeop.cli.edit:edit",
        "Change the project's layout: --multigroup puts new APIs under api/<group>/<version>/.",
    ),
    "create": _Lazy(
        "kubeop.cli.create:app", "Add to the project: create api, create webhook, create apiserver."
    ),
    "manifests": _Lazy(
        "kubeop.cli.manifests:manifests",
        "Write the CRDs, RBAC and samples index under config/ from the models and @rbac_rule declarations.",
    ),
    "generate": _Lazy(
        "kubeop.cli.manifests:generate",
        "Write everything derived from the code: the same as manifests (models need no generated code).",
    ),
    "install": _Lazy(
        "kubeop.cli.install:install",
        "Install the project's CRDs (config/crd) and wait until they are served.",
    ),
    "uninstall": _Lazy(
        "kubeop.cli.install:uninstall",
        "Delete the project's CRDs, and with them every object of their kinds.",
    ),
    "run": _Lazy(
        "kubeop.cli.run:run",
        "Run the operator here against the cluster; arguments after -- go to the operator.",
        {"allow_extra_args": True, "ignore_unknown_options": True},
    ),
    "docker-build": _Lazy(
        "kubeop.cli.image:docker_build",
        "Write the image build context and build the image with docker or podman.",
    ),
    "deploy": _Lazy(
        "kubeop.cli.deploy:deploy",
        "Apply config/default: namespace, CRDs, service account, RBAC, manager Deployment, metrics Service.",
    ),
    "undeploy": _Lazy(
        "kubeop.cli.deploy:undeploy",
        "Delete what deploy applied, CRDs included (and so every object of the project's kinds).",
    ),
    "cluster": _Lazy(
        "kubeop.cli.cluster:app",
        "Run a local Kubernetes control plane (etcd, kube-apiserver, controllers, KWOK nodes).",
    ),
    "demo": _Lazy(
        "kubeop.cli.demo:demo",
        "Start a local control plane, run a Deployment on fake nodes, show self-healing, clean up.",
    ),
    "version": _Lazy(
        "kubeop.cli.version:version",
        "Show kubeop's version, Python's, the control-plane versions kubeop pins and which binaries it uses.",
    ),
    "completion": _Lazy(
        "kubeop.cli.completion:completion", "Print the shell completion script for bash, zsh or fish."
    ),
}


def _summary(help_text: str | None) -> str:
    """The first paragraph of a command's help, on one line (what the root help lists)."""
    return " ".join((help_text or "").strip().split("\n\n")[0].split())


def _load(name: str, lazy: _Lazy) -> Any:
    """The click command of one entry, built from its module on first use."""
    module, _, attribute = lazy.target.partition(":")
    target = getattr(import_module(module), attribute)
    if isinstance(target, typer.Typer):
        command = typer.main.get_command(target)
        for sub in getattr(command, "commands", {}).values():
            sub.short_help = sub.short_help or _summary(sub.help)  # listed whole, not cut at 45 characters
    else:
        single = typer.Typer(rich_markup_mode=None, pretty_exceptions_enable=False, add_completion=False)
        single.command(name=name, context_settings=lazy.context_settings)(target)
        command = typer.main.get_command(single)
    command.name = name
    return command


class _LazyGroup(TyperGroup):
    """The root group: commands resolved by name when run, listed from their summaries in the help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loaded: dict[str, Any] = {}

    def list_commands(self, ctx: Any) -> list[str]:
        return [*_COMMANDS, *(n for n in super().list_commands(ctx) if n not in _COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        lazy = _COMMANDS.get(cmd_name)
        if lazy is None:
            return super().get_command(ctx, cmd_name)
        if cmd_name not in self._loaded:
            self._loaded[cmd_name] = _load(cmd_name, lazy)
        return self._loaded[cmd_name]

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(name, lazy.summary) for name, lazy in _COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"kubeop {kubeop.__version__}")
        raise typer.Exit()


app = typer.Typer(
    name="kubeop",
    cls=_LazyGroup,
    help="kubeop: write Kubernetes operators in Python, and run them against a real local cluster.",
    no_args_is_help=True,
    add_completion=False,
    # Plain help, as wide as the terminal: rich's panels cost an import of rich on every
    # `--help` and print a type label (`<bool>`) on every flag.
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"max_content_width": 1_000_000},
)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_show_version, help="Print kubeop's version and exit."
        ),
    ] = False,
) -> None:
    """kubeop: write Kubernetes operators in Python, and run them against a real local cluster."""


COMPLETE_VAR = "_KUBEOP_COMPLETE"


def main() -> None:
    """The ``kubeop`` script (and ``python -m kubeop``)."""
    if COMPLETE_VAR in os.environ:  # a shell asks for completions (kubeop completion's script)
        from typer._completion_classes import completion_init

        completion_init()
    app(prog_name="kubeop")
