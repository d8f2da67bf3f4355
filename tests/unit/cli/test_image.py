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
from kubeop.scaffold.image import (
    REQUIREMENTS_FILE,
    SECRET_ID,
    SECRET_MOUNT,
    local_kubeop,
    write_build_context,
)

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
    # --index-url: the only index pip asks, so no other index can offer its own kubeop==VERSION
    assert requirements(tmp_path / "ctx") == [f"--index-url {url}", f"kubeop=={VERSION}"]
    assert context.kubeop == (
        f"the image installs kubeop {VERSION} from the index {url}, the only index its pip asks (it must "
        "serve kubeop's dependencies too)"
    )
    assert context.netrc == ""


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


def _nowhere_in(ctx: Path, secret: str) -> None:
    for path in ctx.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
            if path.suffix == ".whl":
                with zipfile.ZipFile(path) as whl:
                    assert not [n for n in whl.namelist() if secret.encode() in whl.read(n)]


def test_credentials_in_an_index_url_are_used_but_never_shown_nor_written(
    tmp_path: Path, private_index: tuple[str, Path]
) -> None:
    url, root = private_index
    _serve(root, WHEEL)
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    project = find_project(tmp_path / "op")
    context = write_build_context(project, tmp_path / "ctx", url)
    assert "s3cret" not in context.kubeop and "user:***@127.0.0.1" in context.kubeop
    assert "its login goes to the build as the secret kubeop-netrc, not into the context" in context.kubeop
    bare = url.replace("user:s3cret@", "")
    assert requirements(tmp_path / "ctx") == [f"--index-url {bare}", f"kubeop=={VERSION}"]
    _nowhere_in(tmp_path / "ctx", "s3cret")  # not in the requirements, the Dockerfile, anything
    assert "s3cret" not in repr(context)
    assert context.netrc == 'machine 127.0.0.1 login "user" password "s3cret"\n'
    assert f"{SECRET_MOUNT} \\\n    pip wheel" in (tmp_path / "ctx" / "Dockerfile").read_text()
    (root / "simple" / "kubeop" / "index.html").unlink()
    for source in (url, url.replace("/simple", "/nothing"), "https://tok:s3cret@127.0.0.1:9/simple"):
        with pytest.raises(ScaffoldError) as err:
            write_build_context(project, tmp_path / "ctx", source)
        assert "s3cret" not in str(err.value)
    vcs = "git+https://oauth2:s3cret@git.example/op/kubeop@v1"
    context = write_build_context(project, tmp_path / "ctx", vcs)
    assert (
        "s3cret" not in context.kubeop and "git+https://oauth2:***@git.example/op/kubeop@v1" in context.kubeop
    )
    assert requirements(tmp_path / "ctx") == ["kubeop @ git+https://git.example/op/kubeop@v1"]
    _nowhere_in(tmp_path / "ctx", "s3cret")
    assert context.netrc == 'machine git.example login "oauth2" password "s3cret"\n'


@pytest.mark.parametrize(
    ("source", "says"),
    [
        ("https://idx.example/simple?private_token=s3cret", "an index URL has no query or fragment"),
        ("https://idx.example/simple#s3cret", "an index URL has no query or fragment"),
        ("git+ssh://git:s3cret@git.example/op/kubeop@v1", "an ssh URL logs in with keys"),
        ("https://u:s3%0Acret@idx.example/simple", "characters a netrc file cannot carry"),
    ],
)
def test_logins_a_secret_cannot_carry_are_refused(tmp_path: Path, source: str, says: str) -> None:
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    with pytest.raises(ScaffoldError, match=says) as err:
        write_build_context(find_project(tmp_path / "op"), tmp_path / "ctx", source)
    assert "s3" not in str(err.value).replace("--kubeop-from", "")
    assert not (tmp_path / "ctx").exists()


def test_a_login_with_quotes_and_backslashes_reads_back_from_the_netrc(tmp_path: Path) -> None:
    import netrc

    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    vcs = "git+https://a%20b:p%22%5Cq%20x@git.example/op/kubeop@v1"
    context = write_build_context(find_project(tmp_path / "op"), tmp_path / "ctx", vcs)
    (tmp_path / "netrc").write_text(context.netrc)
    (tmp_path / "netrc").chmod(0o600)
    assert netrc.netrc(str(tmp_path / "netrc")).authenticators("git.example") == ("a b", "", 'p"\\q x')
    token_only = "git+https://tok3n@git.example/op/kubeop@v1"
    context = write_build_context(find_project(tmp_path / "op"), tmp_path / "ctx", token_only)
    assert context.netrc == 'machine git.example login "tok3n" password ""\n'
    assert requirements(tmp_path / "ctx") == ["kubeop @ git+https://git.example/op/kubeop@v1"]
    ssh = "git+ssh://git@git.example/op/kubeop@v1"  # a user name for ssh keys: no login to move
    context = write_build_context(find_project(tmp_path / "op"), tmp_path / "ctx", ssh)
    assert context.netrc == "" and requirements(tmp_path / "ctx") == [f"kubeop @ {ssh}"]


def _fake_engine(tmp_path: Path) -> Path:
    """A `docker` that answers `info` and, for `build`, records its arguments and the secret's file."""
    log = tmp_path / "engine.log"
    engine = tmp_path / "fake-docker"
    engine.write_text(
        f"""#!{sys.executable}
import json, os, stat, sys
args = sys.argv[1:]
if args[:1] == ["build"]:
    record = {{"args": args}}
    if "--secret" in args:
        spec = dict(kv.split("=", 1) for kv in args[args.index("--secret") + 1].split(","))
        st = os.stat(spec["src"])
        record.update(spec=spec, mode=stat.S_IMODE(st.st_mode), netrc=open(spec["src"]).read())
    open({str(log)!r}, "w").write(json.dumps(record))
"""
    )
    engine.chmod(0o755)
    return engine


def test_docker_build_passes_the_login_as_a_build_secret(
    tmp_path: Path, private_index: tuple[str, Path]
) -> None:
    """What the engine is run with (no engine needed): --secret id=kubeop-netrc,src=<a 0600 file
    outside the context, removed afterwards> holding the login; the context holds none of it."""
    import json

    from typer.testing import CliRunner

    from kubeop.cli import app

    url, root = private_index
    _serve(root, WHEEL)
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    engine = _fake_engine(tmp_path)
    ctx = tmp_path / "op" / "build" / "image"
    args = ["docker-build", "--dir", str(tmp_path / "op"), "--engine", str(engine), "--kubeop-from", url]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "s3cret" not in result.output
    record = json.loads((tmp_path / "engine.log").read_text())
    secret = Path(record["spec"]["src"])
    assert record["args"] == [
        "build", "--secret", f"id=kubeop-netrc,src={secret}", "-t", "controller:latest", str(ctx)
    ]  # fmt: skip
    assert record["spec"]["id"] == SECRET_ID and record["mode"] == 0o600
    assert record["netrc"] == 'machine 127.0.0.1 login "user" password "s3cret"\n'
    assert not secret.is_relative_to(ctx) and not secret.exists() and not secret.parent.exists()
    _nowhere_in(ctx, "s3cret")
    # Without a login, no secret; --context-only says how to build with one elsewhere.
    assert CliRunner().invoke(app, args[:-2]).exit_code == 0  # this kubeop's wheel
    record = json.loads((tmp_path / "engine.log").read_text())
    assert record["args"] == ["build", "-t", "controller:latest", str(ctx)]
    result = CliRunner().invoke(app, [*args, "--context-only"])
    assert result.exit_code == 0 and "s3cret" not in result.output
    said = " ".join(result.output.split())
    assert "docker build --secret id=kubeop-netrc,src=NETRC -t controller:latest build/image" in said


def test_an_old_dockerfile_without_the_secret_mount_is_warned_about(
    tmp_path: Path, private_index: tuple[str, Path]
) -> None:
    from typer.testing import CliRunner

    from kubeop.cli import app

    url, root = private_index
    _serve(root, WHEEL)
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    dockerfile = tmp_path / "op" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace(f"{SECRET_MOUNT} \\\n    ", ""))
    args = ["docker-build", "--dir", str(tmp_path / "op"), "--context-only", "--kubeop-from", url]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "warning: Dockerfile does not mount the build secret kubeop-netrc" in " ".join(
        result.output.split()
    )


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


def test_both_dockerfiles_mount_the_login_secret_and_the_helm_context_keeps_it_out(tmp_path: Path) -> None:
    from kubeop.scaffold import find_helm_project, write_helm_build_context
    from kubeop.scaffold.render import template_text

    for name in ("project/Dockerfile.tmpl", "helm/Dockerfile.tmpl"):
        assert f"RUN {SECRET_MOUNT} \\\n    pip wheel --no-cache-dir" in template_text(name)
    from typer.testing import CliRunner

    from kubeop.cli import app

    init = ["init", "--plugin", "helm", "--domain", DOMAIN, "--repo", REPO, "--dir", str(tmp_path / "hop")]
    assert CliRunner().invoke(app, init).exit_code == 0
    project = find_helm_project(tmp_path / "hop")
    assert project is not None
    vcs = "git+https://oauth2:s3cret@git.example/op/kubeop@v1"
    context = write_helm_build_context(project, tmp_path / "ctx", vcs)
    assert context.netrc == 'machine git.example login "oauth2" password "s3cret"\n'
    assert requirements(tmp_path / "ctx") == ["kubeop @ git+https://git.example/op/kubeop@v1"]
    _nowhere_in(tmp_path / "ctx", "s3cret")
