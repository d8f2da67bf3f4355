"""The commands as a user types them: bad input is one clear line with the fix, exit code 1, no traceback."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kubeop.cli import app
from kubeop.cli.run import _leader_election

from .conftest import DOMAIN, REPO

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "guestbook-operator"
    root.mkdir()
    monkeypatch.chdir(root)
    return root


def test_init_then_create_api(here: Path) -> None:
    code, out = invoke("init", "--domain", DOMAIN, "--repo", REPO)
    assert code == 0, out
    assert "created PROJECT" in out and "kubeop create api --group <group>" in out
    code, out = invoke("create", "api", "--group", "webapp", "--version", "v1", "--kind", "Guestbook")
    assert code == 0, out
    assert "created guestbook_operator/controllers/guestbook.py" in out
    assert "updated guestbook_operator/main.py" in out
    code, out = invoke("create", "api", "--group", "webapp", "--version", "v1", "--kind", "Guestbook")
    assert (code, out.strip()) == (
        0,
        "Guestbook (webapp.example.com/v1) already exists in this project: nothing to do",
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kind", "guestbook"], "error: --kind: kind 'guestbook' is not CamelCase"),
        (["--kind", "Guest-Book"], "(for example 'GuestBook')"),
        (["--group", "Web_App"], "error: --group 'Web_App' is not a DNS subdomain"),
        (["--group", "-webapp"], "error: --group '-webapp' is not a DNS subdomain"),
        (["--version", "1.0"], "error: --version: version '1.0' is not a Kubernetes version name"),
        (["--version", "v1beta"], "use v<N>, v<N>alpha<M> or v<N>beta<M>"),
    ],
)
def test_bad_api_names(here: Path, args: list[str], message: str) -> None:
    assert invoke("init", "--domain", DOMAIN, "--repo", REPO)[0] == 0
    base = {"--group": "webapp", "--version": "v1", "--kind": "Guestbook"}
    base[args[0]] = args[1]
    code, out = invoke("create", "api", *[x for kv in base.items() for x in kv])
    assert code == 1
    assert message in out and "Traceback" not in out


def test_init_in_a_non_empty_directory(here: Path) -> None:
    (here / "main.py").write_text("print('mine')\n")
    code, out = invoke("init", "--domain", DOMAIN, "--repo", REPO)
    assert code == 1
    assert "is not empty (main.py)" in out and "--force" in out
    code, out = invoke("init", "--domain", DOMAIN, "--repo", REPO, "--force")
    assert code == 0 and (here / "main.py").read_text() == "print('mine')\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--domain", "Example.COM", "--repo", REPO], "error: --domain 'Example.COM' is not a DNS subdomain"),
        (["--domain", DOMAIN, "--repo", REPO, "--plugin", "go"], "error: --plugin 'go' is not available"),
        (["--domain", DOMAIN, "--repo", REPO, "--project-name", "Guestbook"], "--project-name guestbook"),
        (["--domain", DOMAIN, "--repo", REPO, "--kubeop-source", "/nonexistent"], "is not a kubeop checkout"),
        # a quote would end pyproject.toml's string (invalid TOML, or a key of the user's choosing)
        (["--domain", DOMAIN, "--repo", 'github.com/x/y"z'], "error: --repo 'github.com/x/y\"z' must be"),
        (["--domain", DOMAIN, "--repo", "github.com/x/y\\z"], "must be the project's repository"),
    ],
)
def test_bad_init_input(here: Path, args: list[str], message: str) -> None:
    code, out = invoke("init", *args)
    assert code == 1 and message in out and "Traceback" not in out
    assert not (here / "PROJECT").exists()


def test_a_missing_option_is_named(here: Path) -> None:
    code, out = invoke("init", "--repo", REPO)
    assert code == 2 and "--domain" in out


@pytest.mark.parametrize(
    "command",
    [
        ["create", "api", "--group", "webapp", "--version", "v1", "--kind", "Guestbook"],
        ["manifests"],
        ["generate"],
        ["install"],
        ["uninstall"],
        ["run"],
        ["deploy"],
        ["undeploy"],
        ["docker-build"],
    ],
)
def test_outside_a_project_every_command_says_where_to_go(tmp_path: Path, command: list[str]) -> None:
    code, out = invoke(*command, "--dir", str(tmp_path))
    assert code == 1
    assert "is not inside a kubeop project" in out and "kubeop init" in out and "Traceback" not in out


def test_manifests_check_fails_on_a_stale_config(here: Path) -> None:
    invoke("init", "--domain", DOMAIN, "--repo", REPO)
    invoke("create", "api", "--group", "webapp", "--version", "v1", "--kind", "Guestbook")
    assert invoke("manifests", "--check") == (0, "config/ is up to date (1 kind)\n")
    model = here / "guestbook_operator/api/v1/guestbook.py"
    model.write_text(model.read_text().replace("max_length=256", "max_length=100"))
    code, out = invoke("manifests", "--check")
    assert code == 1 and "config/crd/bases/webapp.example.com_guestbooks.yaml" in out
    code, out = invoke("generate")
    assert code == 0 and "updated config/crd/bases/webapp.example.com_guestbooks.yaml" in out
    assert invoke("manifests", "--check")[0] == 0


def test_a_broken_model_is_reported_with_its_file_and_line(here: Path) -> None:
    invoke("init", "--domain", DOMAIN, "--repo", REPO)
    invoke("create", "api", "--group", "webapp", "--version", "v1", "--kind", "Guestbook")
    model = here / "guestbook_operator/api/v1/guestbook.py"
    model.write_text(model.read_text().replace('version="v1"', 'version="1"'))
    code, out = invoke("manifests")
    assert code == 1 and "Traceback" not in out
    assert (
        "importing guestbook_operator.api.v1.guestbook failed at guestbook_operator/api/v1/guestbook.py:"
        in out
    )
    assert "version '1' is not a Kubernetes version name" in out


def _fake_engine(bin_dir: Path, name: str, info_exit: int) -> None:
    script = bin_dir / name
    script.write_text(
        "#!/bin/sh\n"
        f"if [ \"$1\" = info ]; then echo 'Cannot connect to the daemon' >&2; exit {info_exit}; fi\n"
        f'echo "$@" > "{bin_dir}/{name}.args"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def project_dir(here: Path) -> Path:
    invoke("init", "--domain", DOMAIN, "--repo", REPO)
    invoke("create", "api", "--group", "webapp", "--version", "v1", "--kind", "Guestbook")
    return here


def test_docker_build_without_an_engine_says_so_and_leaves_the_context(
    project_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_engine(bin_dir, "docker", info_exit=1)
    monkeypatch.setenv("PATH", str(bin_dir))
    code, out = invoke("docker-build", "--image", "example.com/op:v1")
    assert code == 1
    assert "cannot build example.com/op:v1: no usable container engine here" in out
    assert (
        "docker is installed but its engine does not answer (docker info: Cannot connect to the daemon)"
        in out
    )
    assert "podman is not installed" in out and "start docker's engine" in out
    assert "docker build -t example.com/op:v1 build/image" in out
    context = project_dir / "build" / "image"
    assert (context / "Dockerfile").is_file() and (context / "guestbook_operator" / "main.py").is_file()


def test_docker_build_builds_with_a_working_engine(
    project_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_engine(bin_dir, "podman", info_exit=0)
    monkeypatch.setenv("PATH", str(bin_dir) + os.pathsep + "/usr/bin:/bin")
    code, out = invoke("docker-build", "--image", "op:dev", "--engine", "podman")
    assert code == 0, out
    assert "building op:dev with podman" in out and "built op:dev" in out
    assert (bin_dir / "podman.args").read_text().split() == [
        "build",
        "-t",
        "op:dev",
        str(project_dir / "build/image"),
    ]


def test_docker_build_context_only(project_dir: Path) -> None:
    code, out = invoke("docker-build", "--context-only")
    assert code == 0 and "wrote the build context to build/image" in out
    assert "the image installs kubeop 0.1.0 from wheels/kubeop-0.1.0-py3-none-any.whl" in out
    assert "warning" not in out


def test_docker_build_says_where_kubeop_comes_from_and_refuses_a_bad_source(
    project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBEOP_FROM", "git+https://github.com/example/kubeop@v0.1.0")
    code, out = invoke("docker-build", "--context-only")
    assert code == 0 and out.splitlines()[0] == (
        "the image installs kubeop from git+https://github.com/example/kubeop@v0.1.0 (the version it holds)"
    )
    code, out = invoke("docker-build", "--context-only", "--kubeop-from", "latest")
    assert code == 1 and len(out.splitlines()) == 1
    assert "error: --kubeop-from 'latest' (or $KUBEOP_FROM) is neither 'wheel'" in out


def test_docker_build_warns_of_a_dockerfile_that_does_not_install_kubeop_from_the_context(
    project_dir: Path,
) -> None:
    dockerfile = project_dir / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("-r kubeop-requirements.txt ", ""))
    code, out = invoke("docker-build", "--context-only")
    assert code == 0 and "warning: Dockerfile does not install kubeop-requirements.txt" in out


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        ([], {}, (False, None)),
        (["--leader-elect"], {}, (True, None)),
        (["--leader-elect", "--leader-election-namespace", "ops"], {}, (True, "ops")),
        (["--leader-elect", "--leader-election-namespace=ops"], {}, (True, "ops")),
        ([], {"LEADER_ELECT": "true", "POD_NAMESPACE": "pods"}, (True, "pods")),
        (["--no-leader-elect"], {"LEADER_ELECT": "1"}, (False, None)),
    ],
)
def test_run_reads_the_operators_leader_election_flags(
    args: list[str], env: dict[str, str], expected: tuple[bool, str | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("LEADER_ELECT", "LEADER_ELECTION_NAMESPACE", "POD_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert _leader_election(args) == expected
