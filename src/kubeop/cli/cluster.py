"""``kubeop cluster``: a persistent local control plane for development (kubectl, your operator)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from kubeop.testing import binaries as bins
from kubeop.testing.controlplane import ControlPlane, ControlPlaneError

app = typer.Typer(
    help="Run a local Kubernetes control plane (etcd, kube-apiserver, controllers, KWOK nodes).",
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
)

DataDir = Annotated[
    Path | None,
    typer.Option(
        "--data-dir", envvar="KUBEOP_CLUSTER_DIR", help="where the cluster keeps its data and state"
    ),
]


def default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "kubeop" / "cluster"


def _say(msg: str) -> None:
    typer.echo(msg, err=True)


def _fail(msg: str) -> None:
    typer.secho(f"error: {msg}", err=True, fg=typer.colors.RED)
    raise typer.Exit(1)


@app.command()
def build(
    force: Annotated[bool, typer.Option(help="rebuild even when the cache looks intact")] = False,
    helm: Annotated[bool, typer.Option(help="also build helm")] = False,
    verify: Annotated[bool, typer.Option(help="check every cached binary's SHA-256")] = False,
) -> None:
    """Build (or check) the control-plane binaries from pinned Go modules into the cache."""
    names = ["etcd", "kwok", "kubernetes"] + (["helm"] if helm else [])
    if verify:
        for name in names:
            problem = bins.check_component(bins.COMPONENTS[name], deep=True)
            _say(f"{bins.COMPONENTS[name].key}: {problem or 'ok'}")
    try:
        bins.ensure_binaries(with_helm=helm, progress=_say, force=force, use_installed=False)
    except bins.BinaryError as exc:
        _fail(str(exc))
    _say(f"binaries ready in {bins.cache_dir() / 'bin'}")


@app.command()
def up(
    data_dir: DataDir = None,
    minimal: Annotated[bool, typer.Option(help="only etcd + kube-apiserver")] = False,
    nodes: Annotated[int, typer.Option(help="number of KWOK fake nodes")] = 2,
    port: Annotated[int, typer.Option(help="kube-apiserver port (0: a free one)")] = 0,
) -> None:
    """Start the local cluster (idempotent: a running cluster is left as it is)."""
    directory = data_dir or default_data_dir()
    existing = ControlPlane.attach(directory)
    if existing is not None:
        if existing.healthy():
            _say(f"cluster already running at {existing.server}")
            typer.echo(existing.kubeconfig_path)
            return
        _say("found a cluster that is no longer (fully) running; restarting it with its data")
        existing.kill_leftovers()
    started = time.monotonic()
    cp = ControlPlane(
        directory, full=not minimal, nodes=nodes, persistent=True, apiserver_port=port or None, progress=_say
    )
    if existing is not None:
        cp.ports = dict(existing.ports)
    try:
        cp.start()
    except (ControlPlaneError, bins.BinaryError) as exc:
        _fail(str(exc))
    _say(f"cluster up in {time.monotonic() - started:.1f} s at {cp.server}")
    _say(f"use it with: export KUBECONFIG={cp.kubeconfig_path}")
    typer.echo(cp.kubeconfig_path)


@app.command()
def down(data_dir: DataDir = None) -> None:
    """Stop the local cluster and delete its data."""
    import shutil

    directory = data_dir or default_data_dir()
    cp = ControlPlane.attach(directory)
    if cp is not None:
        cp.kill_leftovers()
    if directory.exists():
        shutil.rmtree(directory)
        _say(f"cluster stopped and {directory} removed")
    else:
        _say("no cluster to stop")


@app.command()
def status(data_dir: DataDir = None) -> None:
    """Show whether the local cluster runs, component by component."""
    directory = data_dir or default_data_dir()
    cp = ControlPlane.attach(directory)
    if cp is None:
        typer.echo("not running (no cluster state)")
        raise typer.Exit(3)
    states = cp.component_status()
    for name, alive in states.items():
        typer.echo(f"{name:<24} {'running' if alive else 'STOPPED'}")
    ready = cp.api.ok("/readyz") if states.get("kube-apiserver") else False
    typer.echo(f"{'api server':<24} {cp.server} ({'ready' if ready else 'not ready'})")
    if not (ready and all(states.values())):
        typer.echo("degraded: `kubeop cluster up` restarts it")
        raise typer.Exit(1)


@app.command()
def kubeconfig(data_dir: DataDir = None) -> None:
    """Print the path of the local cluster's admin kubeconfig."""
    directory = data_dir or default_data_dir()
    cp = ControlPlane.attach(directory)
    if cp is None:
        _fail("no cluster is running; start one with `kubeop cluster up`")
        return
    typer.echo(cp.kubeconfig_path)


@app.command()
def env(data_dir: DataDir = None) -> None:
    """Print shell exports for the local cluster: eval "$(kubeop cluster env)"."""
    directory = data_dir or default_data_dir()
    cp = ControlPlane.attach(directory)
    if cp is None:
        _fail("no cluster is running; start one with `kubeop cluster up`")
        return
    k8s = bins.component_dir(bins.COMPONENTS["kubernetes"]) / "bin"
    typer.echo(f"export KUBECONFIG={cp.kubeconfig_path}")
    typer.echo(f"export PATH={k8s}:$PATH")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
