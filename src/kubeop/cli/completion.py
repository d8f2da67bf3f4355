"""``kubeop completion bash|zsh|fish``: the shell completion script, to source or install.

::

    source <(kubeop completion bash)                          # this shell
    kubeop completion bash > ~/.local/share/bash-completion/completions/kubeop
    kubeop completion zsh > "${fpath[1]}/_kubeop"
    kubeop completion fish > ~/.config/fish/completions/kubeop.fish

The script asks ``kubeop`` itself for the completions (click's protocol, through the
``_KUBEOP_COMPLETE`` environment variable), so it completes commands, options and choices of the
installed version.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer
from typer._completion_shared import get_completion_script  # typer.completion re-exports it untyped

from kubeop.cli import COMPLETE_VAR

__all__ = ["completion"]


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def completion(shell: Annotated[Shell, typer.Argument(help="the shell: bash, zsh or fish")]) -> None:
    """Print the shell completion script for bash, zsh or fish."""
    typer.echo(get_completion_script(prog_name="kubeop", complete_var=COMPLETE_VAR, shell=shell.value))
