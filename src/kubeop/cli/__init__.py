"""The ``kubeop`` command line."""

from __future__ import annotations

import typer

from kubeop.cli import cluster, create, demo, deploy, image, init, install, manifests, run, version

app = typer.Typer(
    name="kubeop",
    help="kubeop: write Kubernetes operators in Python, and run them against a real local cluster.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(cluster.app, name="cluster")
app.command(name="demo")(demo.demo)
# The kubebuilder / operator-sdk workflow, on a project made by `kubeop init`.
app.command(name="init")(init.init)
app.add_typer(create.app, name="create")
app.command(name="generate")(manifests.generate)
app.command(name="manifests")(manifests.manifests)
app.command(name="install")(install.install)
app.command(name="uninstall")(install.uninstall)
app.command(name="run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(run.run)
app.command(name="docker-build")(image.docker_build)
app.command(name="deploy")(deploy.deploy)
app.command(name="undeploy")(deploy.undeploy)
app.command(name="version")(version.version)


def main() -> None:
    app()
