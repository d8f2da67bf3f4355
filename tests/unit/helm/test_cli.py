"""The command line of Helm operator projects: kubeop init --plugin helm, create api --helm-chart."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml
from typer.testing import CliRunner

import kubeop
from kubeop.cli import app
from kubeop.helm import load_watches
from kubeop.scaffold import find_helm_project

EXAMPLE_CHART = Path(__file__).parents[3] / "examples" / "php_deployment" / "helm-charts" / "php-deployment"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_init_then_create_api(tmp_path: Path) -> None:
    root = tmp_path / "php-operator"
    code, out = run(
        "init", "--plugin", "helm", "--domain", "example.com", "--repo", "github.com/x/y", "--dir", str(root)
    )
    assert code == 0, out
    assert "created watches.yaml" in out and "kubeop create api" in out
    code, out = run(
        "create", "api", "--group", "web", "--version", "v1", "--kind", "PhpDeployment",
        "--helm-chart", str(EXAMPLE_CHART), "--dir", str(root),
    )  # fmt: skip
    assert code == 0, out
    assert "created helm-charts/php-deployment/" in out
    assert "created config/crd/bases/web.example.com_phpdeployments.yaml" in out
    assert "updated watches.yaml" in out
    [watch] = load_watches(root / "watches.yaml")
    assert watch.kind == "PhpDeployment"
    project = find_helm_project(root)
    assert project is not None and [a.kind for a in project.apis] == ["PhpDeployment"]


def test_errors_are_one_line(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "keep.txt").write_text("x")
    code, out = run("init", "--plugin", "helm", "--domain", "example.com", "--repo", "r", "--dir", str(root))
    assert code == 1 and "is not empty" in out and "Traceback" not in out
    code, out = run(
        "init", "--plugin", "helm", "--domain", "example", "--repo", "r", "--dir", str(tmp_path / "q")
    )
    assert code == 1 and "--domain" in out
    code, out = run(
        "create", "api", "--group", "web", "--version", "v1", "--kind", "X",
        "--helm-chart", str(EXAMPLE_CHART), "--dir", str(tmp_path),
    )  # fmt: skip
    assert code == 1 and "not inside a Helm operator project" in out
    ok = tmp_path / "ok"
    assert run("init", "--plugin", "helm", "--domain", "example.com", "--repo", "r", "--dir", str(ok))[0] == 0
    code, out = run(
        "create", "api", "--group", "web", "--version", "v1", "--kind", "x",
        "--helm-chart", str(EXAMPLE_CHART), "--dir", str(ok),
    )  # fmt: skip
    assert code == 1 and "CamelCase" in out and "Traceback" not in out


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "php-operator"
    init = (
        "init",
        "--plugin",
        "helm",
        "--domain",
        "example.com",
        "--repo",
        "github.com/x/y",
        "--dir",
        str(root),
    )
    assert run(*init)[0] == 0
    code, out = run(
        "create", "api", "--group", "web", "--version", "v1", "--kind", "PhpDeployment",
        "--helm-chart", str(EXAMPLE_CHART), "--dir", str(root),
    )  # fmt: skip
    assert code == 0, out
    return root


def test_manifests_regenerates_what_the_charts_imply(tmp_path: Path) -> None:
    root = _project(tmp_path)
    code, out = run("manifests", "--check", "--dir", str(root))
    assert code == 0 and "config/ is up to date (PhpDeployment)" in out, out
    role = root / "config/rbac/role.yaml"
    role.write_text(role.read_text().replace("ingresses", "nothing"))
    code, out = run("manifests", "--check", "--dir", str(root))
    assert code == 1 and "config/rbac/role.yaml" in out and "run kubeop manifests" in out
    code, out = run("manifests", "--dir", str(root))
    assert code == 0 and "updated config/rbac/role.yaml" in out, out
    assert "ingresses" in role.read_text()
    # A file whose generated header was removed is the user's: kept.
    role.write_text("# mine\n" + role.read_text().split("\n", 1)[1])
    code, out = run("manifests", "--dir", str(root))
    assert code == 0 and "kept    config/rbac/role.yaml" in out, out


def test_commands_of_python_projects_name_what_a_helm_project_takes(tmp_path: Path) -> None:
    root = _project(tmp_path)
    code, out = run("create", "webhook", "--group", "web", "--version", "v1", "--kind", "PhpDeployment",
                    "--defaulting", "--dir", str(root))  # fmt: skip
    assert code == 1 and "is a Helm operator project" in out and "Traceback" not in out
    empty = tmp_path / "empty"
    assert (
        run("init", "--plugin", "helm", "--domain", "example.com", "--repo", "r", "--dir", str(empty))[0] == 0
    )
    code, out = run("run", "--dir", str(empty), "--no-rbac-check")
    assert code == 1 and "watches.yaml has no kinds yet" in out and "create api --helm-chart" in out
    code, out = run("install", "--dir", str(empty))
    assert code == 1 and "config/crd has no CRDs" in out and "--helm-chart" in out


def test_docker_build_context_carries_the_kubeop_wheel(tmp_path: Path) -> None:
    """The context builds an image without a package index serving kubeop: the wheel in
    wheels/ installs (here into a directory, no container engine needed) and is the kubeop of
    this CLI, templates and the Helm operator included."""
    root = _project(tmp_path)
    code, out = run("docker-build", "--context-only", "--dir", str(root))
    assert code == 0, out
    context = root / "build" / "image"
    assert "the image installs kubeop" in out and "wheels/kubeop-" in out
    assert sorted(p.name for p in context.iterdir()) == [
        ".dockerignore", ".kubeop-build-context", "Dockerfile", "helm-charts", "kubeop-requirements.txt",
        "watches.yaml", "wheels",
    ]  # fmt: skip
    assert (context / "helm-charts/php-deployment/Chart.yaml").is_file()
    dockerfile = (context / "Dockerfile").read_text()
    assert "-r kubeop-requirements.txt" in dockerfile
    [wheel] = (context / "wheels").glob("kubeop-*.whl")
    # What the Dockerfile's pip does, in the context's directory (into a target, offline).
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(target)]
    done = subprocess.run(
        [*pip, "-r", "kubeop-requirements.txt"], cwd=context, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(target)}
    check = (
        "import kubeop, kubeop.helm.__main__, importlib.metadata as m;"
        "from kubeop.scaffold.render import template_text;"
        "template_text('helm/Dockerfile.tmpl');"
        "print(kubeop.__file__, m.version('kubeop'))"
    )
    # The venv's site-packages give the dependencies; kubeop itself must come from the wheel.
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
    path, version = done.stdout.split()
    assert path.startswith(str(target)) and version == kubeop.__version__  # the version's one source
    # The same kubeop gives the same wheel (the engine's layer cache keeps working).
    first = wheel.read_bytes()
    assert run("docker-build", "--context-only", "--dir", str(root))[0] == 0
    assert wheel.read_bytes() == first


def test_one_namespace_setting(tmp_path: Path) -> None:
    """PROJECT's namespace, set by init --namespace and moved by manifests --namespace, is where
    every generated object goes and what deploy --dry-run prints."""
    root = tmp_path / "op"
    init = ("init", "--plugin", "helm", "--domain", "example.com", "--repo", "r", "--dir", str(root))
    code, out = run(*init, "--namespace", "Bad_NS")
    assert code == 1 and "--namespace 'Bad_NS' is not a namespace name" in out, out
    assert run(*init, "--namespace", "ops")[0] == 0
    assert "namespace: ops" in (root / "PROJECT").read_text()
    code, out = run("create", "api", "--group", "web", "--version", "v1", "--kind", "PhpDeployment",
                    "--helm-chart", str(EXAMPLE_CHART), "--dir", str(root))  # fmt: skip
    assert code == 0, out

    def namespaces() -> set[str]:
        code, out = run("deploy", "--dry-run", "--dir", str(root))
        assert code == 0, out
        docs = [d for d in yaml.safe_load_all(out.split("dry run:")[0]) if d]
        found = {d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"}
        found |= {d["metadata"].get("namespace") for d in docs if d["kind"] not in CLUSTER_KINDS}
        subjects = [s["namespace"] for d in docs for s in d.get("subjects", [])]
        return found | set(subjects)

    assert namespaces() == {"ops"}
    code, out = run("manifests", "--namespace", "elsewhere", "--dir", str(root))
    assert code == 0 and "namespace: ops -> elsewhere (recorded in PROJECT)" in out, out
    assert namespaces() == {"elsewhere"}
    code, out = run("manifests", "--check", "--dir", str(root))
    assert code == 0, out


CLUSTER_KINDS = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding"}


def test_docker_build_takes_kubeop_from_a_vcs_url(tmp_path: Path) -> None:
    """The same choice of where the image gets kubeop as a Python project (--kubeop-from)."""
    root = _project(tmp_path)
    url = "git+https://git.example/kubeop.git@v0.1.0"
    code, out = run("docker-build", "--context-only", "--dir", str(root), "--kubeop-from", url)
    assert code == 0 and f"the image installs kubeop from {url}" in out, out
    context = root / "build" / "image"
    assert f"kubeop @ {url}" in (context / "kubeop-requirements.txt").read_text()
    assert not (context / "wheels").exists()
    code, out = run("docker-build", "--context-only", "--dir", str(root), "--kubeop-from", "nonsense")
    assert code == 1 and "--kubeop-from 'nonsense'" in out and "Traceback" not in out


def test_helm_chart_in_a_python_project_says_to_drop_it(tmp_path: Path) -> None:
    root = tmp_path / "py-operator"
    assert run("init", "--domain", "example.com", "--repo", "r", "--dir", str(root))[0] == 0
    code, out = run("create", "api", "--group", "web", "--version", "v1", "--kind", "X",
                    "--helm-chart", str(EXAMPLE_CHART), "--dir", str(root))  # fmt: skip
    assert code == 1 and "is in a Python kubeop project" in out and "drop --helm-chart" in out
