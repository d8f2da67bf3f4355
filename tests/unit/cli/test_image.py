"""The image build context: only what the image needs, and kubeop from a wheel of this kubeop (no
index serving kubeop needed), or from an index or a VCS URL the user names."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import kubeop
from kubeop.cli.image import ENGINES, usable_engine
from kubeop.scaffold import ScaffoldError, find_project, init_project
from kubeop.scaffold.image import REQUIREMENTS_FILE, local_kubeop, write_build_context

from .conftest import DOMAIN, REPO

KUBEOP = Path(__file__).resolve().parents[3]
VERSION = kubeop.__version__
WHEEL = f"kubeop-{VERSION}-py3-none-any.whl"


def requirements(ctx: Path) -> list[str]:
    return [line for line in (ctx / REQUIREMENTS_FILE).read_text().splitlines() if not line.startswith("#")]


def test_the_context_carries_a_wheel_of_this_kubeop(tmp_path: Path) -> None:
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    project = find_project(tmp_path / "op")
    assert local_kubeop(project) is None
    context = write_build_context(project, tmp_path / "ctx")
    assert context.entries == [
        ".dockerignore",
        ".kubeop-build-context",
        "Dockerfile",
        "README.md",
        REQUIREMENTS_FILE,
        "op",
        "pyproject.toml",
        "wheels",
    ]
    assert context.kubeop == f"the image installs kubeop {VERSION} from wheels/{WHEEL} (checkout {KUBEOP})"
    assert requirements(tmp_path / "ctx") == [f"./wheels/{WHEEL}"]
    with zipfile.ZipFile(tmp_path / "ctx" / "wheels" / WHEEL) as whl:
        assert "kubeop/__init__.py" in whl.namelist()
    assert (tmp_path / "ctx/pyproject.toml").read_text() == (project.root / "pyproject.toml").read_text()
    assert f"-r {REQUIREMENTS_FILE} ." in (tmp_path / "ctx/Dockerfile").read_text()


def test_a_local_checkout_dependency_is_made_plain(tmp_path: Path) -> None:
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO, kubeop_source=str(KUBEOP))
    project = find_project(tmp_path / "op")
    (project.root / "op" / "__pycache__").mkdir()
    (project.root / "op" / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"")
    assert local_kubeop(project) == KUBEOP
    ctx = tmp_path / "ctx"
    assert "wheels" in write_build_context(project, ctx).entries
    assert (ctx / "wheels" / WHEEL).is_file() and not (ctx / "vendor").exists()
    assert not list(ctx.rglob("__pycache__"))
    text = (ctx / "pyproject.toml").read_text()
    assert '    "kubeop",\n' in text and "file://" not in text
    # Written again: replaced, not merged.
    (ctx / "stale.txt").write_text("x")
    write_build_context(project, ctx)
    assert not (ctx / "stale.txt").exists()


def test_a_vcs_url(tmp_path: Path) -> None:
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    url = "git+https://github.com/example/kubeop@v0.1.0"
    context = write_build_context(find_project(tmp_path / "op"), tmp_path / "ctx", url)
    assert requirements(tmp_path / "ctx") == [f"kubeop @ {url}"]
    assert "wheels" not in context.entries
    assert context.kubeop == f"the image installs kubeop from {url} (the version it holds)"


@pytest.fixture
def index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A PEP 503 index on loopback, serving the directory it returns."""
    root = tmp_path / "index"
    root.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple", root
    server.shutdown()
    server.server_close()


def _serve(root: Path, *files: str) -> None:
    page = root / "simple" / "kubeop" / "index.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text("".join(f'<a href="../../files/{f}#sha256=00">{f}</a>\n' for f in files))


def test_an_index_that_serves_this_version(tmp_path: Path, index: tuple[str, Path]) -> None:
    url, root = index
    _serve(root, "kubeop-0.0.9.tar.gz", WHEEL)
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    context = write_build_context(find_project(tmp_path / "op"), tmp_path / "ctx", url)
    assert requirements(tmp_path / "ctx") == [f"--extra-index-url {url}", f"kubeop=={VERSION}"]
    assert context.kubeop == f"the image installs kubeop {VERSION} from the index {url}"


@pytest.mark.parametrize(
    ("served", "says"), [(("kubeop-0.0.9-py3-none-any.whl",), "it serves 0.0.9"), ((), "it serves no kubeop")]
)
def test_an_index_without_this_version_is_refused(
    tmp_path: Path, index: tuple[str, Path], served: tuple[str, ...], says: str
) -> None:
    url, root = index
    if served:
        _serve(root, *served)
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    with pytest.raises(ScaffoldError) as err:
        write_build_context(find_project(tmp_path / "op"), tmp_path / "ctx", url)
    assert str(err.value) == (
        f"the index {url} has no kubeop {VERSION} ({says}): publish it there, or build the image from "
        "this kubeop's wheel: kubeop docker-build (without --kubeop-from)"
    )
    assert not (tmp_path / "ctx").exists()


def test_bad_sources_are_refused(tmp_path: Path) -> None:
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    project = find_project(tmp_path / "op")
    with pytest.raises(ScaffoldError, match=r"--kubeop-from 'pypi' \(or \$KUBEOP_FROM\) is neither 'wheel'"):
        write_build_context(project, tmp_path / "ctx", "pypi")
    with pytest.raises(ScaffoldError, match=r"cannot read the index http://127\.0\.0\.1:9/simple"):
        write_build_context(project, tmp_path / "ctx", "http://127.0.0.1:9/simple")
    pyproject = project.root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"kubeop>=0.1"', '"kubeop>=99"'))
    with pytest.raises(ScaffoldError) as err:
        write_build_context(project, tmp_path / "ctx")
    assert str(err.value).startswith(
        f"pyproject.toml asks for kubeop>=99, but the image would get kubeop {VERSION}: upgrade kubeop here"
    )


def test_a_directory_that_is_not_a_context_is_not_replaced(tmp_path: Path) -> None:
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "file").write_text("x")
    with pytest.raises(ScaffoldError, match="not a build context kubeop wrote"):
        write_build_context(find_project(tmp_path / "op"), tmp_path / "mine")
    assert (tmp_path / "mine" / "file").read_text() == "x"


def _pip(*args: str, cwd: Path | None = None) -> str:
    res = subprocess.run(
        [sys.executable, "-m", "pip", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return res.stdout


def test_the_context_installs_into_a_clean_venv_without_an_index_serving_kubeop(tmp_path: Path) -> None:
    # What the Dockerfile does (pip ... -r kubeop-requirements.txt .), into a fresh venv: kubeop comes
    # from the context's wheel, its dependencies from the usual index; the project then imports.
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    project = find_project(tmp_path / "op")
    ctx = tmp_path / "ctx"
    write_build_context(project, ctx)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    _pip("--python", str(python), "install", "-q", "-r", REQUIREMENTS_FILE, ".", cwd=ctx)
    check = (
        "import importlib.metadata as m, kubeop, op.main; print(kubeop.__file__); print(op.main.__file__); "
        "print(m.distribution('kubeop').read_text('direct_url.json'))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run(
        [str(python), "-c", check], cwd=venv, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert res.returncode == 0, res.stderr
    where, package, origin = res.stdout.splitlines()[:3]
    assert where.startswith(str(venv)) and package.startswith(str(venv)), res.stdout
    assert f"wheels/{WHEEL}" in origin
    found, reasons = usable_engine(ENGINES)
    if found is None:  # the image itself where an engine runs; here, why not
        assert reasons and all("docker" in r or "podman" in r for r in reasons)
        return
    built = subprocess.run(
        [found, "build", "-t", "kubeop-test/op:dev", str(ctx)], capture_output=True, text=True, timeout=900
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]


@pytest.fixture
def private_index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A PEP 503 index on loopback that wants HTTP basic auth (user:s3cret)."""
    root = tmp_path / "index"
    root.mkdir()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

        def do_GET(self) -> None:
            if self.headers.get("Authorization") != "Basic dXNlcjpzM2NyZXQ=":
                self.send_error(401)
                return
            super().do_GET()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://user:s3cret@127.0.0.1:{server.server_address[1]}/simple", root
    server.shutdown()
    server.server_close()


def test_credentials_in_an_index_url_are_used_but_never_shown(
    tmp_path: Path, private_index: tuple[str, Path]
) -> None:
    url, root = private_index
    _serve(root, WHEEL)
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    project = find_project(tmp_path / "op")
    context = write_build_context(project, tmp_path / "ctx", url)
    assert "s3cret" not in context.kubeop and "user:***@127.0.0.1" in context.kubeop
    assert requirements(tmp_path / "ctx") == [
        f"--extra-index-url {url}",
        f"kubeop=={VERSION}",
    ]  # pip needs them
    (root / "simple" / "kubeop" / "index.html").unlink()
    for source in (url, url.replace("/simple", "/nothing"), "https://tok:s3cret@127.0.0.1:9/simple"):
        with pytest.raises(ScaffoldError) as err:
            write_build_context(project, tmp_path / "ctx", source)
        assert "s3cret" not in str(err.value)
    vcs = "git+https://oauth2:s3cret@git.example/op/kubeop@v1"
    shown = write_build_context(project, tmp_path / "ctx", vcs).kubeop
    assert "s3cret" not in shown and "git+https://oauth2:***@git.example/op/kubeop@v1" in shown


@pytest.mark.parametrize(
    "source",
    [
        "https://idx.example/simple --trusted-host evil.example",
        "https://idx.example/simple\n--index-url https://evil.example",
        "https://idx.example/simple\t-e .",
    ],
)
def test_an_index_url_cannot_add_pip_options(tmp_path: Path, source: str) -> None:
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    with pytest.raises(ScaffoldError, match=r"--kubeop-from .* is neither 'wheel'"):
        write_build_context(find_project(tmp_path / "op"), tmp_path / "ctx", source)


def test_a_local_checkout_dependency_written_without_spaces_is_made_plain(tmp_path: Path) -> None:
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO, kubeop_source=str(KUBEOP))
    project = find_project(tmp_path / "op")
    pyproject = project.root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace('"kubeop @ ', "'kubeop@").replace('.git"', ".git'"))
    text = pyproject.read_text()
    start = text.index("'kubeop@")
    text = text[:start] + text[start:].replace('",', "',", 1)
    pyproject.write_text(text)
    assert local_kubeop(project) == KUBEOP
    write_build_context(project, tmp_path / "ctx")
    written = (tmp_path / "ctx" / "pyproject.toml").read_text()
    assert "'kubeop'" in written and "file://" not in written


def test_without_an_engine_the_suggested_command_quotes_a_path_with_spaces(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kubeop.cli import app

    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    ctx = tmp_path / "my build"
    args = [
        "docker-build",
        "--dir",
        str(tmp_path / "op"),
        "--context-dir",
        str(ctx),
        "--engine",
        "no-such-engine",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1
    assert f"docker build -t controller:latest '{ctx}'" in " ".join(result.output.split())


def test_the_wheel_is_the_same_bytes_for_the_same_kubeop(tmp_path: Path) -> None:
    from kubeop.scaffold.wheel import kubeop_wheel

    first, _ = kubeop_wheel(tmp_path / "a")
    second, _ = kubeop_wheel(tmp_path / "b")  # fixed timestamps and modes, sorted entries
    assert first.name == second.name and first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as whl:
        assert {i.date_time for i in whl.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert not [n for n in whl.namelist() if "__pycache__" in n or n.endswith(".pyc")]


def test_a_context_dir_inside_what_it_copies_is_refused(tmp_path: Path) -> None:
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    project = find_project(tmp_path / "op")
    with pytest.raises(ScaffoldError, match="inside op/, which the context copies"):
        write_build_context(project, project.root / "op" / "ctx")
    assert not (project.root / "op" / "ctx").exists()


def test_a_vcs_url_of_this_machine_is_refused(tmp_path: Path) -> None:
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    with pytest.raises(ScaffoldError, match="cannot reach paths of this machine"):
        write_build_context(find_project(tmp_path / "op"), tmp_path / "ctx", f"git+file://{KUBEOP}@main")
