"""The command line of Helm operator projects: kubeop init --plugin helm, create api --helm-chart."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

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
