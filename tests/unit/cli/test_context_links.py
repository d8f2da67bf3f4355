"""The image build context takes nothing from outside the project: links are copied as links,
a link whose target leaves the project (absolute, `..`, a chain, a linked directory, a loop) is
refused naming it and its target, and so is a FIFO, socket or device (never opened: no hang).
shutil.copytree followed links, so a link committed in a pull request put a file of the
building machine (a CI token) into the context and the image."""

from __future__ import annotations

import os
import shutil
import socket
import threading
from pathlib import Path

import pytest

from kubeop.scaffold import ScaffoldError, find_project, init_project
from kubeop.scaffold.helm import HelmProjectError, copy_chart, find_helm_project, write_helm_build_context
from kubeop.scaffold.image import write_build_context

from .conftest import DOMAIN, REPO

SECRET = "ci-token-0123456789"
EXAMPLE_CHART = Path(__file__).parents[3] / "examples" / "php_deployment" / "helm-charts" / "php-deployment"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory of the building machine, not part of the project, holding a secret."""
    secrets = tmp_path / "home" / ".config"
    secrets.mkdir(parents=True)
    (secrets / "token").write_text(SECRET)
    return secrets


def _project(tmp_path: Path) -> Path:
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    return tmp_path / "op"


def _build(root: Path, ctx: Path) -> None:
    write_build_context(find_project(root), ctx)


def _nothing_secret_in(ctx: Path) -> None:
    for path in ctx.rglob("*") if ctx.exists() else ():
        if path.is_file() and not path.is_symlink():
            assert SECRET.encode() not in path.read_bytes(), path


def test_links_inside_the_project_are_kept_as_links(tmp_path: Path) -> None:
    root = _project(tmp_path)
    pkg = root / "op"
    (pkg / "data").mkdir()
    (pkg / "data" / "real.txt").write_text("hello")
    (pkg / "alias.txt").symlink_to("data/real.txt")  # a link to a file
    (pkg / "data2").symlink_to("data")  # a link to a directory
    (pkg / "readme").symlink_to("../README.md")  # up, but still inside the project
    (pkg / "chain").symlink_to("alias.txt")  # a chain that stays inside
    ctx = tmp_path / "ctx"
    _build(root, ctx)
    assert os.readlink(ctx / "op" / "alias.txt") == "data/real.txt"
    assert (ctx / "op" / "alias.txt").read_text() == "hello"
    assert (ctx / "op" / "data2").is_symlink() and os.readlink(ctx / "op" / "data2") == "data"
    assert os.readlink(ctx / "op" / "readme") == "../README.md"
    assert os.readlink(ctx / "op" / "chain") == "alias.txt"
    assert (ctx / "op" / "data" / "real.txt").read_text() == "hello"
    assert not (ctx / "op" / "data" / "real.txt").is_symlink()


@pytest.mark.parametrize(
    ("where", "link", "says"),
    [
        # a relative link to a file outside the project
        ("op/settings.py", "../../home/.config/token", "resolves to {outside}/token, outside {root}"),
        # a link to a directory outside the project
        ("op/conf", "../../home/.config", "resolves to {outside}, outside {root}"),
        # an absolute link, even to the secret's exact path
        ("op/token", "{outside}/token", "a symbolic link to the absolute path {outside}/token"),
        # `..` climbing out and back in by another name
        ("op/sneaky", "../../op/../home/.config/token", "outside {root}"),
        # a top-level file the context copies
        ("README.md", "../home/.config/token", "resolves to {outside}/token, outside {root}"),
        ("Dockerfile", "../home/.config/token", "resolves to {outside}/token, outside {root}"),
    ],
)
def test_a_link_leaving_the_project_is_refused(
    tmp_path: Path, outside: Path, where: str, link: str, says: str
) -> None:
    root = _project(tmp_path)
    path = root / where
    if path.exists():
        path.unlink()
    path.symlink_to(link.format(outside=outside))
    ctx = tmp_path / "ctx"
    with pytest.raises(ScaffoldError) as err:
        _build(root, ctx)
    message = str(err.value)
    assert message.startswith(f"{path} is a symbolic link to ")
    assert says.format(outside=outside, root=root) in message
    assert "remove the link, or replace it with the file it stands for" in message
    _nothing_secret_in(ctx)


def test_a_chain_that_leaves_through_another_link_is_refused(tmp_path: Path, outside: Path) -> None:
    root = _project(tmp_path)
    (root / "config" / "hop").symlink_to(outside / "token")  # not copied itself, but followed
    (root / "op" / "innocent").symlink_to("../config/hop")  # its text stays inside
    (root / "op" / "through").symlink_to("../config/escape/token")  # through a linked directory
    (root / "config" / "escape").symlink_to("../../home/.config")
    ctx = tmp_path / "ctx"
    with pytest.raises(ScaffoldError, match=r"op/(innocent|through) is a symbolic link to \.\./config/"):
        _build(root, ctx)
    _nothing_secret_in(ctx)
    (root / "op" / "innocent").unlink()
    with pytest.raises(ScaffoldError, match=rf"op/through is .* resolves to {outside}/token, outside"):
        _build(root, ctx)


def test_a_link_loop_is_refused(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "op" / "a").symlink_to("b")
    (root / "op" / "b").symlink_to("a")
    with pytest.raises(ScaffoldError, match=r"op/a is a symbolic link to b that never ends \(a loop\)"):
        _build(root, tmp_path / "ctx")


def _bounded(fn: object) -> BaseException | None:
    """Run ``fn`` in a thread for at most 20 s; what it raised (a FIFO opened would block forever)."""
    caught: list[BaseException] = []

    def target() -> None:
        try:
            fn()  # type: ignore[operator]
        except BaseException as e:
            caught.append(e)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "the copy blocked on a special file"
    return caught[0] if caught else None


def test_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    root = _project(tmp_path)
    os.mkfifo(root / "op" / "pipe")
    error = _bounded(lambda: _build(root, tmp_path / "ctx"))
    assert isinstance(error, ScaffoldError), error
    assert str(error) == (
        f"{root}/op/pipe is a FIFO (named pipe): a build context holds regular files, directories and "
        "links only; remove it from the project"
    )
    assert not (tmp_path / "ctx").exists()  # not left half-written


def test_a_fifo_behind_a_link_or_at_the_top_is_refused_without_hanging(tmp_path: Path) -> None:
    root = _project(tmp_path)
    (root / "README.md").unlink()
    os.mkfifo(root / "README.md")
    error = _bounded(lambda: _build(root, tmp_path / "ctx"))
    assert isinstance(error, ScaffoldError) and "README.md is a FIFO (named pipe)" in str(error), error
    (root / "README.md").unlink()
    (root / "pyproject.toml").rename(root / "real.toml")
    os.mkfifo(root / "pipe")
    (root / "pyproject.toml").symlink_to("pipe")
    error = _bounded(lambda: _build(root, tmp_path / "ctx"))
    assert isinstance(error, ScaffoldError) and "pyproject.toml is a symbolic link" in str(error), error


def test_docker_build_with_a_fifo_for_a_dockerfile_says_so_without_hanging(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kubeop.cli import app

    root = _project(tmp_path)
    (root / "Dockerfile").unlink()
    os.mkfifo(root / "Dockerfile")
    results = []
    args = ["docker-build", "--context-only", "--dir", str(root), "--context-dir", str(tmp_path / "ctx")]
    assert _bounded(lambda: results.append(CliRunner().invoke(app, args))) is None
    assert results[0].exit_code == 1
    assert f"{root}/Dockerfile is a FIFO (named pipe)" in " ".join(results[0].output.split())


def test_a_socket_is_refused(tmp_path: Path) -> None:
    root = _project(tmp_path)
    with socket.socket(socket.AF_UNIX) as sock:
        os.chdir(root / "op")  # a short path for the socket's name
        try:
            sock.bind("s")
        finally:
            os.chdir(tmp_path)
        with pytest.raises(ScaffoldError, match=r"op/s is a socket: a build context holds"):
            _build(root, tmp_path / "ctx")


def test_the_helm_context_and_a_copied_chart_take_nothing_from_outside(tmp_path: Path, outside: Path) -> None:
    from typer.testing import CliRunner

    from kubeop.cli import app

    root = tmp_path / "hop"
    init = ["init", "--plugin", "helm", "--domain", DOMAIN, "--repo", REPO, "--dir", str(root)]
    assert CliRunner().invoke(app, init).exit_code == 0
    # A third-party chart with a link to a file of this machine: create api --helm-chart refuses it.
    chart = tmp_path / "chart"
    shutil.copytree(EXAMPLE_CHART, chart)
    (chart / "templates" / "token.yaml").symlink_to(outside / "token")
    with pytest.raises(
        HelmProjectError, match=r"templates/token\.yaml is a symbolic link to the absolute path"
    ):
        copy_chart(chart, root)
    assert not (root / "helm-charts" / "php-deployment").exists()
    (chart / "templates" / "token.yaml").unlink()
    (chart / "templates" / "kept.yaml").symlink_to("deployment.yaml")
    rel, copied = copy_chart(chart, root)
    assert copied and os.readlink(root / rel / "templates" / "kept.yaml") == "deployment.yaml"
    # A link planted in the project's charts afterwards: docker-build refuses it.
    (root / rel / "templates" / "leak.yaml").symlink_to("../../../../home/.config/token")
    project = find_helm_project(root)
    assert project is not None
    with pytest.raises(HelmProjectError, match=r"templates/leak\.yaml is a symbolic link to .*outside"):
        write_helm_build_context(project, tmp_path / "ctx")
    _nothing_secret_in(tmp_path / "ctx")
    (root / "watches.yaml").rename(root / "w.yaml")
    (root / "watches.yaml").symlink_to(outside / "token")
    with pytest.raises(HelmProjectError, match=r"watches\.yaml is a symbolic link to the absolute path"):
        write_helm_build_context(project, tmp_path / "ctx")
