"""kubeop create apiserver: the aggregated API package, a kind in it, its test, the refusals."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from kubeop.scaffold import Project, ScaffoldError, create_apiserver

from .conftest import read


def _run(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(project.root), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, *args],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_a_kind_in_the_projects_aggregated_api(project: Project) -> None:
    result = create_apiserver(project, group="metrics", version="v1alpha1", kind="Usage")
    pkg = "guestbook_operator"
    assert result.path == f"{pkg}/apiserver/usage.py" and not result.todo
    assert 'group="metrics.example.com"' in read(project, result.path)
    create_apiserver(project, group="metrics", version="v1alpha1", kind="Quota", namespaced=False)
    init = read(project, f"{pkg}/apiserver/__init__.py")
    assert "        Usage,\n        Quota,\n" in init
    assert f"from {pkg}.apiserver.quota import Quota\nfrom {pkg}.apiserver.usage import Usage\n" in init
    assert create_apiserver(project, group="metrics", version="v1alpha1", kind="Usage").exists
    with pytest.raises(ScaffoldError, match="one APIService serves one group version"):
        create_apiserver(project, group="metrics", version="v1", kind="Other")
    printed = _run(project, "-m", f"{pkg}.apiserver", "manifests")
    assert printed.returncode == 0, printed.stderr
    assert "name: v1alpha1.metrics.example.com" in printed.stdout and "kind: APIService" in printed.stdout
    assert "name: guestbook-operator-apiserver" in printed.stdout
    tests = _run(project, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_usage_apiserver.py",
                 "tests/test_quota_apiserver.py")  # fmt: skip
    assert tests.returncode == 0, tests.stdout + tests.stderr
    lint = _run(project, "-m", "ruff", "check", "--no-cache", f"{pkg}/apiserver", "tests")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert not list((project.root / "config" / "crd" / "bases").glob("metrics*"))  # no CRD of it
