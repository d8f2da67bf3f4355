"""Helm operator projects: the files of init --plugin helm and create api --helm-chart."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from kubeop.helm.crd import crd_for_chart
from kubeop.helm.watches import load_watches
from kubeop.scaffold import GENERATED, build_kustomization
from kubeop.scaffold.helm import (
    HELM_LAYOUT,
    HelmProjectError,
    chart_kinds,
    copy_chart,
    find_helm_project,
    helm_api_files,
    helm_project_files,
)

EXAMPLE_CHART = Path(__file__).parents[3] / "examples" / "php_deployment" / "helm-charts" / "php-deployment"


def write(root: Path, files: dict[str, str]) -> None:
    for path, content in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)


@pytest.fixture
def project_root(tmp_path: Path) -> Path:
    root = tmp_path / "php-operator"
    write(
        root,
        helm_project_files(
            domain="example.com", repo="github.com/example/php-operator", project_name="php-operator"
        ),
    )
    return root


def test_init_files(project_root: Path) -> None:
    files = sorted(str(p.relative_to(project_root)) for p in project_root.rglob("*") if p.is_file())
    assert files == [
        ".dockerignore", ".gitignore", "Dockerfile", "Makefile", "PROJECT", "README.md",
        "config/crd/kustomization.yaml", "config/default/kustomization.yaml",
        "config/default/metrics_service.yaml", "config/default/namespace.yaml",
        "config/manager/kustomization.yaml", "config/manager/manager.yaml",
        "config/network-policy/allow-metrics-traffic.yaml", "config/network-policy/kustomization.yaml",
        "config/prometheus/kustomization.yaml", "config/prometheus/monitor.yaml",
        "config/rbac/kustomization.yaml", "config/rbac/leader_election_role.yaml",
        "config/rbac/leader_election_role_binding.yaml", "config/rbac/metrics_auth_role.yaml",
        "config/rbac/metrics_auth_role_binding.yaml", "config/rbac/metrics_reader_role.yaml",
        "config/rbac/role.yaml", "config/rbac/role_binding.yaml",
        "config/rbac/service_account.yaml", "config/samples/kustomization.yaml",
        "helm-charts/.gitkeep", "pytest.ini", "tests/__init__.py", "tests/conftest.py", "watches.yaml",
    ]  # fmt: skip
    compile((project_root / "tests/conftest.py").read_text(), "conftest.py", "exec")
    for path in project_root.rglob("*.yaml"):
        text = path.read_text()
        list(yaml.safe_load_all(text))  # all valid YAML
        assert "&id" not in text and "*id" not in text, path  # no anchors
    assert load_watches(project_root / "watches.yaml") == []
    project = find_helm_project(project_root / "config")
    assert project is not None
    assert (project.domain, project.project_name, project.apis) == ("example.com", "php-operator", ())
    assert HELM_LAYOUT in (project_root / "PROJECT").read_text()
    assert '"python", "-m", "kubeop.helm"' in (project_root / "Dockerfile").read_text()
    assert "python -m kubeop.helm" in (project_root / "Makefile").read_text()
    binding = yaml.safe_load((project_root / "config/rbac/role_binding.yaml").read_text())
    subject = binding["subjects"][0]
    assert (subject["name"], subject["namespace"]) == (
        "php-operator-controller-manager",
        "php-operator-system",
    )
    assert "helm@v3.22.0" in (project_root / "Dockerfile").read_text()
    assert "kustomize" not in (project_root / "Makefile").read_text().replace("kustomize needed", "")


def test_config_default_renders_without_kustomize(project_root: Path) -> None:
    """kubeop's own rendering reads config/default (kubectl apply -k works on it too): a
    Namespace first, everything namespaced in it, every name prefixed."""
    objs = build_kustomization(project_root / "config/default", images={"controller": "reg/op:v1"})
    kinds = [o["kind"] for o in objs]
    assert kinds[0] == "Namespace" or "Namespace" in kinds
    ns = next(o for o in objs if o["kind"] == "Namespace")
    assert ns["metadata"]["name"] == "php-operator-system"
    assert kinds.index("Namespace") < kinds.index("Deployment")
    for obj in objs:
        md = obj["metadata"]
        assert md["name"].startswith("php-operator-"), md
        if obj["kind"] in ("ServiceAccount", "Deployment", "Service", "Role", "RoleBinding"):
            assert md["namespace"] == "php-operator-system", md
    [deployment] = [o for o in objs if o["kind"] == "Deployment"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "reg/op:v1"
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "php-operator-controller-manager"


def test_init_checks_names() -> None:
    with pytest.raises(HelmProjectError, match="--domain"):
        helm_project_files(domain="example", repo="r", project_name="p")
    with pytest.raises(HelmProjectError, match="--project-name"):
        helm_project_files(domain="example.com", repo="r", project_name="Php_Operator")


def test_not_a_helm_project(tmp_path: Path) -> None:
    assert find_helm_project(tmp_path) is None
    (tmp_path / "PROJECT").write_text("layout: [python.kubeop.dev/v1]\nprojectName: x\n")
    assert find_helm_project(tmp_path) is None


def test_create_api(project_root: Path) -> None:
    rel, copied = copy_chart(EXAMPLE_CHART, project_root)
    assert (rel, copied) == ("helm-charts/php-deployment", True)
    assert (project_root / rel / "values.schema.json").is_file()
    assert copy_chart(EXAMPLE_CHART, project_root) == (rel, False)  # already there
    project = find_helm_project(project_root)
    assert project is not None
    files = helm_api_files(project, group="web", version="v1", kind="PhpDeployment", chart=rel)
    assert {
        "PROJECT", "watches.yaml", "config/crd/bases/web.example.com_phpdeployments.yaml",
        "config/crd/kustomization.yaml", "config/samples/web_v1_phpdeployment.yaml",
        "config/samples/kustomization.yaml", "config/rbac/role.yaml",
    } <= set(files)  # fmt: skip
    assert all("&id" not in text for text in files.values())
    test = files["tests/test_phpdeployment.py"]
    compile(test, "test_phpdeployment.py", "exec")
    assert 'RESOURCE = "phpdeployments.web.example.com"' in test and "web_v1_phpdeployment.yaml" in test
    write(project_root, files)
    [watch] = load_watches(project_root / "watches.yaml")
    assert (watch.group, watch.version, watch.kind) == ("web.example.com", "v1", "PhpDeployment")
    assert watch.chart == project_root / rel
    crd = yaml.safe_load((project_root / "config/crd/bases/web.example.com_phpdeployments.yaml").read_text())
    assert (
        (project_root / "config/crd/bases/web.example.com_phpdeployments.yaml")
        .read_text()
        .startswith(GENERATED)
    )
    assert crd == crd_for_chart(project_root / rel, "web.example.com", "v1", "PhpDeployment")
    sample = yaml.safe_load((project_root / "config/samples/web_v1_phpdeployment.yaml").read_text())
    assert sample["apiVersion"] == "web.example.com/v1" and sample["spec"]["image"] == "php:8.3-apache"
    assert yaml.safe_load((project_root / "config/crd/kustomization.yaml").read_text()) == {
        "resources": ["bases/web.example.com_phpdeployments.yaml"]
    }
    assert yaml.safe_load((project_root / "config/samples/kustomization.yaml").read_text()) == {
        "resources": ["web_v1_phpdeployment.yaml"]
    }
    role = yaml.safe_load((project_root / "config/rbac/role.yaml").read_text())
    rules = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    for needed in [
        ("", "secrets"), ("web.example.com", "phpdeployments"), ("web.example.com", "phpdeployments/status"),
        ("web.example.com", "phpdeployments/finalizers"), ("apps", "deployments"), ("", "services"),
        ("networking.k8s.io", "ingresses"),
    ]:  # fmt: skip
        assert needed in rules, needed
    updated = find_helm_project(project_root)
    assert updated is not None and [a.kind for a in updated.apis] == ["PhpDeployment"]
    with pytest.raises(HelmProjectError, match="already in this project"):
        helm_api_files(updated, group="web", version="v1", kind="PhpDeployment", chart=rel)
    # A second kind keeps the first everywhere.
    more = helm_api_files(updated, group="web", version="v1", kind="Other", chart=rel)
    write(project_root, more)
    assert [w.kind for w in load_watches(project_root / "watches.yaml")] == ["PhpDeployment", "Other"]
    assert len(yaml.safe_load((project_root / "config/crd/kustomization.yaml").read_text())["resources"]) == 2


def test_create_api_checks(project_root: Path, tmp_path: Path) -> None:
    project = find_helm_project(project_root)
    assert project is not None
    with pytest.raises(HelmProjectError, match="not a Helm chart"):
        copy_chart(tmp_path, project_root)
    with pytest.raises(HelmProjectError, match=r"is not a directory|Chart\.yaml"):
        helm_api_files(project, group="web", version="v1", kind="X", chart="helm-charts/none")
    remote = tmp_path / "remote"
    remote.mkdir()
    (remote / "Chart.yaml").write_text(
        "apiVersion: v2\nname: r\nversion: 1.0.0\ndependencies:\n- name: redis\n  repository: https://charts.example\n"
    )
    with pytest.raises(HelmProjectError, match="helm dependency build"):
        copy_chart(remote, project_root)


def test_chart_kinds_with_and_without_helm() -> None:
    kinds = {("apps/v1", "Deployment"), ("v1", "Service"), ("networking.k8s.io/v1", "Ingress")}
    assert set(chart_kinds(EXAMPLE_CHART)) == kinds  # helm template
    assert set(chart_kinds(EXAMPLE_CHART, helm="/nonexistent/helm")) == kinds  # the templates' kind: lines


@pytest.mark.parametrize(
    ("field", "message"),
    [
        (
            "resources: [{group: a, version: v1, kind: A, chart: ../../outside}]",
            "chart '../../outside' of kind A is outside",
        ),
        ("resources: [{group: a, version: v1, kind: A, chart: /etc}]", "chart '/etc' of kind A is outside"),
        ("resources: [{group: a, version: v1, kind: A}]", "has no chart"),
        ('projectName: "op\\nx"', "projectName"),
        ("namespace: [a, b]", "namespace"),
    ],
)
def test_a_helm_project_file_field_that_would_leave_the_project_is_one_line(
    project_root: Path, field: str, message: str
) -> None:
    text = (project_root / "PROJECT").read_text()
    key = field.split(":", 1)[0]
    kept = [line for line in text.splitlines() if not line.startswith(f"{key}:")]
    (project_root / "PROJECT").write_text("\n".join([*kept, field]) + "\n")
    with pytest.raises(HelmProjectError, match=message) as caught:
        find_helm_project(project_root)
    assert "\n" not in str(caught.value)


def test_an_image_context_needs_watches_whose_charts_it_carries(project_root: Path, tmp_path: Path) -> None:
    from kubeop.scaffold import write_helm_build_context

    chart, _ = copy_chart(EXAMPLE_CHART, project_root)
    outside = tmp_path / "outside-chart"
    shutil.copytree(EXAMPLE_CHART, outside)
    for text, message in (
        (f"- group: web.example.com\n  version: v1\n  kind: Php\n  chart: {chart}-gone\n", "chart"),
        (
            f"- group: web.example.com\n  version: v1\n  kind: Php\n  chart: {outside}\n",
            "outside the project's",
        ),
        ("- group: [\n", "not valid YAML"),
    ):
        (project_root / "watches.yaml").write_text(text)
        project = find_helm_project(project_root)
        assert project is not None
        with pytest.raises(HelmProjectError, match=message):
            write_helm_build_context(project, tmp_path / "ctx")
    (project_root / "watches.yaml").write_text(
        f"- group: web.example.com\n  version: v1\n  kind: Php\n  chart: {chart}\n"
    )
    project = find_helm_project(project_root)
    assert project is not None
    assert "watches.yaml" in write_helm_build_context(project, tmp_path / "ctx").entries


def test_a_chart_yaml_that_is_not_yaml_is_one_line(project_root: Path, tmp_path: Path) -> None:
    chart = tmp_path / "broken"
    chart.mkdir()
    (chart / "Chart.yaml").write_text("name: [unclosed\n")
    with pytest.raises(HelmProjectError, match=r"Chart\.yaml is not valid YAML: line 2, column 1") as caught:
        copy_chart(chart, project_root)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("name", ["../../escaped", "a/b", "..", "x\ny", "[list]"])
def test_a_chart_name_that_is_not_a_directory_name_is_refused(
    project_root: Path, tmp_path: Path, name: str
) -> None:
    chart = tmp_path / "chart"
    shutil.copytree(EXAMPLE_CHART, chart)
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    meta["name"] = yaml.safe_load(name) if name.startswith("[") else name
    (chart / "Chart.yaml").write_text(yaml.safe_dump(meta))
    with pytest.raises(HelmProjectError, match="name") as caught:
        copy_chart(chart, project_root)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "escaped").exists() and not (project_root / "helm-charts" / "a").exists()
