"""One deploy namespace: recorded in PROJECT, set by init or manifests, followed by every file."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kubeop.cli import app
from kubeop.cli.cluster_ops import in_apply_order
from kubeop.crd import render_yaml
from kubeop.scaffold import ScaffoldError, build_kustomization, find_project, init_project

from .conftest import DOMAIN, REPO, new_project

runner = CliRunner()


def _namespaces(root: Path) -> set[str]:
    """Every namespace a file under config/ names, and what deploy would apply."""
    found: set[str] = set()
    for path in (root / "config").rglob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if not isinstance(doc, dict):
                continue
            md = doc.get("metadata") or {}
            if doc.get("kind") == "Namespace":
                found.add(md["name"])
            if md.get("namespace"):
                found.add(md["namespace"])
            found |= {s["namespace"] for s in doc.get("subjects") or () if "namespace" in s}
            if isinstance(doc.get("namespace"), str):
                found.add(doc["namespace"])
    return found


def test_the_default_is_recorded_and_used_everywhere(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    assert project.namespace == "guestbook-operator-system"
    assert "namespace: guestbook-operator-system" in (project.root / "PROJECT").read_text()
    assert _namespaces(project.root) == {"guestbook-operator-system"}


def test_init_namespace_reaches_every_file_and_what_deploy_applies(tmp_path: Path) -> None:
    root = tmp_path / "op"
    init_project(root, domain=DOMAIN, repo=REPO, namespace="ops")
    project = find_project(root)
    assert project.namespace == "ops"
    # the scaffolded files (the user's) and the generated ones agree
    assert _namespaces(root) == {"ops"}
    objs = build_kustomization(root / "config" / "default")
    assert {o["metadata"].get("namespace") for o in objs if o["kind"] != "Namespace"} <= {"ops", None}
    (ns,) = [o for o in objs if o["kind"] == "Namespace"]
    assert ns["metadata"]["name"] == "ops"


def test_manifests_namespace_moves_the_operator_and_is_kept(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    root = project.root
    res = runner.invoke(app, ["manifests", "--dir", str(root), "--namespace", "team-a"])
    assert res.exit_code == 0, res.output
    assert "guestbook-operator-system -> team-a" in res.output
    assert find_project(root).namespace == "team-a"
    objs = build_kustomization(root / "config" / "default")
    namespaced = [o for o in objs if o["metadata"].get("namespace")]
    assert namespaced and {o["metadata"]["namespace"] for o in namespaced} == {"team-a"}
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"] == ["team-a"]
    for binding in (o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert {s["namespace"] for s in binding["subjects"]} == {"team-a"}
    # a later manifests run keeps it (it was undone for the RBAC files before)
    res = runner.invoke(app, ["manifests", "--dir", str(root)])
    assert res.exit_code == 0, res.output
    assert "config/rbac/service_account.yaml" not in res.output
    check = runner.invoke(app, ["manifests", "--dir", str(root), "--check"])
    assert check.exit_code == 0, check.output


@pytest.mark.parametrize("bad", ["Ops", "ops_team", "-ops", "ops-", "a" * 64, "ops.team", ""])
def test_a_namespace_that_is_not_a_dns_label_is_one_clear_line(tmp_path: Path, bad: str) -> None:
    project = new_project(tmp_path)
    res = runner.invoke(app, ["manifests", "--dir", str(project.root), "--namespace", bad])
    assert res.exit_code == 1
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "--namespace" in lines[0] and "not a namespace name" in lines[0], res.output
    assert find_project(project.root).namespace == "guestbook-operator-system"
    with pytest.raises(ScaffoldError, match="--namespace"):
        init_project(tmp_path / "other", domain=DOMAIN, repo=REPO, namespace=bad)


def test_a_bad_namespace_in_project_names_the_file(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    path = project.root / "PROJECT"
    path.write_text(path.read_text().replace("namespace: guestbook-operator-system", "namespace: Bad_NS"))
    with pytest.raises(ScaffoldError, match="PROJECT: namespace 'Bad_NS' is not a namespace name"):
        find_project(project.root)


def test_check_does_not_change_the_namespace(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    res = runner.invoke(app, ["manifests", "--dir", str(project.root), "--check", "--namespace", "x"])
    assert res.exit_code == 1 and "drop --namespace or --check" in res.output
    assert find_project(project.root).namespace == "guestbook-operator-system"


def test_a_project_file_without_namespace_means_the_old_default(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    path = project.root / "PROJECT"
    path.write_text(path.read_text().replace("namespace: guestbook-operator-system\n", ""))
    assert find_project(project.root).namespace == "guestbook-operator-system"


def test_init_force_keeps_the_recorded_namespace(tmp_path: Path) -> None:
    root = tmp_path / "guestbook-operator"
    init_project(root, domain=DOMAIN, repo=REPO, namespace="ops")
    init_project(root, domain=DOMAIN, repo=REPO, force=True)
    assert find_project(root).namespace == "ops"
    assert _namespaces(root) == {"ops"}


def test_an_edited_default_kustomization_is_the_users_and_manifests_says_so(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    path = project.root / "config/default/kustomization.yaml"
    path.write_text(path.read_text().split("\n", 1)[1])  # the header line removed: the user's now
    res = runner.invoke(app, ["manifests", "--dir", str(project.root), "--namespace", "team-b"])
    assert res.exit_code == 0, res.output
    assert "config/default/kustomization.yaml is yours" in res.output and "namespace: team-b" in res.output


def test_deploy_dry_run_prints_what_it_would_apply_and_needs_no_cluster(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    runner.invoke(app, ["manifests", "--dir", str(project.root), "--namespace", "team-c"])
    res = CliRunner().invoke(
        app,
        ["deploy", "--dir", str(project.root), "--dry-run", "--image", "reg.example/op:v2"],
        env={"KUBECONFIG": str(tmp_path / "missing")},
    )
    assert res.exit_code == 0, res.output
    docs = [d for d in yaml.safe_load_all(res.stdout) if d]
    built = build_kustomization(project.root / "config/default", images={"controller": "reg.example/op:v2"})
    assert docs == in_apply_order(built)
    assert docs[0]["kind"] == "Namespace" and docs[0]["metadata"]["name"] == "team-c"
    assert (
        "dry run: guestbook-operator" in res.stderr and "to namespace team-c; nothing applied" in res.stderr
    )


def test_generated_yaml_has_no_anchors(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    for path in (project.root / "config").rglob("*.yaml"):
        text = path.read_text()
        assert "&id" not in text and "*id" not in text, path


def test_render_yaml_writes_an_object_met_twice_in_full() -> None:
    verbs = ["get", "list"]
    rules = [{"resources": ["a"], "verbs": verbs}, {"resources": ["b"], "verbs": verbs}]
    text = render_yaml({"kind": "ClusterRole", "rules": rules})
    assert "&" not in text and "*" not in text
    assert yaml.safe_load(text)["rules"][1]["verbs"] == ["get", "list"]
