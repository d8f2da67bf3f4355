"""kubeop init: the layout, what it refuses, and --force that never clobbers user edits."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kubeop.scaffold import GENERATED, ScaffoldError, init_project, load_project

from .conftest import DOMAIN, REPO, new_project

LAYOUT = [
    "Dockerfile",
    "Makefile",
    "PROJECT",
    "README.md",
    "config/crd/kustomization.yaml",
    "config/default/kustomization.yaml",
    "config/default/metrics_service.yaml",
    "config/default/namespace.yaml",
    "config/manager/kustomization.yaml",
    "config/manager/manager.yaml",
    "config/network-policy/allow-metrics-traffic.yaml",
    "config/network-policy/kustomization.yaml",
    "config/prometheus/kustomization.yaml",
    "config/prometheus/monitor.yaml",
    "config/rbac/kustomization.yaml",
    "config/rbac/leader_election_role.yaml",
    "config/rbac/leader_election_role_binding.yaml",
    "config/rbac/metrics_auth_role.yaml",
    "config/rbac/metrics_auth_role_binding.yaml",
    "config/rbac/metrics_reader_role.yaml",
    "config/rbac/role.yaml",
    "config/rbac/role_binding.yaml",
    "config/rbac/service_account.yaml",
    "config/samples/kustomization.yaml",
    "grafana/controller-resources-metrics.json",
    "grafana/controller-runtime-metrics.json",
    "guestbook_operator/__init__.py",
    "guestbook_operator/__main__.py",
    "guestbook_operator/api/__init__.py",
    "guestbook_operator/api/conditions.py",
    "guestbook_operator/controllers/__init__.py",
    "guestbook_operator/main.py",
    "pyproject.toml",
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/test_manifests.py",
]


def _files(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and not p.name.startswith(".")
    )


def test_the_layout(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    assert _files(project.root) == LAYOUT
    assert (project.root / ".gitignore").is_file() and (project.root / ".dockerignore").is_file()
    assert project.domain == DOMAIN and project.repo == REPO and project.package == "guestbook_operator"
    assert project.resources == ()


def test_pyproject_depends_on_kubeop(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    text = (project.root / "pyproject.toml").read_text()
    assert '"kubeop>=0.1"' in text and "allow-direct-references" not in text
    assert 'Repository = "https://github.com/example/guestbook-operator"' in text


def test_a_local_kubeop_checkout_can_be_the_dependency(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[3]
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO, kubeop_source=str(source))
    text = (tmp_path / "op" / "pyproject.toml").read_text()
    assert f'"kubeop @ {source.as_uri()}"' in text and "allow-direct-references = true" in text


def test_manager_deployment_probes_leader_election_and_non_root(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    (dep,) = yaml.safe_load_all((project.root / "config/manager/manager.yaml").read_text())
    (ns,) = yaml.safe_load_all((project.root / "config/default/namespace.yaml").read_text())
    assert ns == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "labels": {
                "app.kubernetes.io/name": "guestbook-operator",
                "app.kubernetes.io/managed-by": "kubeop",
                "control-plane": "controller-manager",
            },
            "name": "guestbook-operator-system",
        },
    }
    pod = dep["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "guestbook-operator-controller-manager"
    assert pod["securityContext"]["runAsNonRoot"] is True
    (manager,) = pod["containers"]
    assert "--leader-elect" in manager["args"]
    assert manager["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert manager["readinessProbe"]["httpGet"]["path"] == "/readyz"
    dockerfile = (project.root / "Dockerfile").read_text()
    assert "python:3.12-slim" in dockerfile and "USER 65532:65532" in dockerfile
    assert 'ENTRYPOINT ["python", "-m", "guestbook_operator"]' in dockerfile


TARGETS = ["generate", "manifests", "install", "uninstall", "run", "test", "docker-build", "deploy"]


def test_the_makefile_has_the_familiar_targets(tmp_path: Path) -> None:
    text = (new_project(tmp_path).root / "Makefile").read_text()
    for target in [*TARGETS, "undeploy"]:
        assert f"\n{target}:" in text, target


def test_init_in_a_non_empty_directory_says_how_to_proceed(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ScaffoldError, match=r"is not empty \(notes.txt\).*empty directory.*--force"):
        init_project(tmp_path, domain=DOMAIN, repo=REPO, project_name="op")


def test_init_twice_points_at_create_api(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    with pytest.raises(ScaffoldError, match="already holds a kubeop project: add APIs with kubeop create"):
        init_project(project.root, domain=DOMAIN, repo=REPO)


def test_a_git_checkout_counts_as_empty(tmp_path: Path) -> None:
    (tmp_path / "op" / ".git").mkdir(parents=True)
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    assert (tmp_path / "op" / "PROJECT").is_file()


def test_force_keeps_what_the_user_changed_and_restores_what_they_did_not(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    root = project.root
    (root / "README.md").write_text("# my own readme\n")
    (root / "Makefile").unlink()
    changes = {c.path: c.action for c in init_project(root, domain=DOMAIN, repo=REPO, force=True)}
    assert changes["README.md"] == "kept"
    assert changes["Makefile"] == "created"
    assert changes["Dockerfile"] == "unchanged"
    assert (root / "README.md").read_text() == "# my own readme\n"


def test_force_with_new_parameters_rewrites_untouched_templates_only(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    root = project.root
    pyproject = root / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n# mine\n")
    changes = {c.path: c.action for c in init_project(root, domain=DOMAIN, repo="gitlab.com/x/y", force=True)}
    assert changes["README.md"] == "unchanged"  # the repo does not appear in it
    assert changes["pyproject.toml"] == "kept"
    assert load_project(root).repo == "gitlab.com/x/y"


def test_force_in_a_foreign_directory_adds_files_and_keeps_existing_ones(tmp_path: Path) -> None:
    (tmp_path / "op").mkdir()
    (tmp_path / "op" / "README.md").write_text("mine")
    changes = {c.path: c.action for c in init_project(tmp_path / "op", domain=DOMAIN, repo=REPO, force=True)}
    assert changes["README.md"] == "kept" and changes["Makefile"] == "created"


def test_the_directory_name_must_be_a_project_name_or_be_given_one(tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError, match=r"directory name 'My_Operator'.*--project-name my-operator"):
        init_project(tmp_path / "My_Operator", domain=DOMAIN, repo=REPO)
    init_project(tmp_path / "My_Operator", domain=DOMAIN, repo=REPO, project_name="my-operator")
    assert load_project(tmp_path / "My_Operator").package == "my_operator"


def test_only_the_python_plugin(tmp_path: Path) -> None:
    with pytest.raises(ScaffoldError, match=r"--plugin 'helm' is not available.*--plugin python"):
        init_project(tmp_path / "op", domain=DOMAIN, repo=REPO, plugin="helm")


def test_an_unknown_plugin_names_both_plugins(tmp_path: Path) -> None:
    expected = r"--plugin 'go' is not available.*--plugin python.*--plugin helm"
    with pytest.raises(ScaffoldError, match=expected):
        init_project(tmp_path / "op", domain=DOMAIN, repo=REPO, plugin="go")


def test_generated_rbac_has_the_header_and_events(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    text = (project.root / "config/rbac/role.yaml").read_text()
    assert text.startswith(GENERATED)
    (role,) = list(yaml.safe_load_all(text))
    assert role["metadata"]["name"] == "guestbook-operator-manager-role"
    assert {r["resources"][0] for r in role["rules"]} == {"events"}


def _tool(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def test_the_generated_code_is_lint_and_format_clean(project_with_two_kinds: Path) -> None:
    for args in (["check", "."], ["format", "--check", "."]):
        res = subprocess.run(
            [_tool("ruff"), *args], cwd=project_with_two_kinds, capture_output=True, text=True, check=False
        )
        assert res.returncode == 0, res.stdout + res.stderr


def test_the_generated_code_type_checks_strictly(project_with_two_kinds: Path) -> None:
    # The project's own mypy settings: strict, with the pydantic plugin, package and tests.
    res = subprocess.run(
        [_tool("mypy"), ".", "--cache-dir", str(project_with_two_kinds / ".mypy_cache")],
        cwd=project_with_two_kinds,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stdout + res.stderr
