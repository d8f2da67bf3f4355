"""The ``kubeop`` command line."""

from __future__ import annotations

import typer

from kubeop.cli import cluster, demo

app = typer.Typer(
    name="kubeop",
    help="kubeop: write Kubernetes operators in Python, and run them against a real local cluster.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(cluster.app, name="cluster")
app.command(name="demo")(demo.demo)


def main() -> None:
    app()
