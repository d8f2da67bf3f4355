"""YAML the scaffolder reads from others (a third-party chart's values.yaml, PROJECT, the
kustomizations deploy builds) may not hold a "billion laughs": aliases that stand for a huge tree.
The dumpers write without aliases, so on main 300 bytes became a sample of many MiB, taking
seconds and hundreds of MiB. The file is refused at once, naming it and the line."""

from __future__ import annotations

import itertools
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kubeop.scaffold import ScaffoldError, build_kustomization, find_project, init_project

from .conftest import DOMAIN, REPO

EXAMPLE_CHART = Path(__file__).parents[3] / "examples" / "php_deployment" / "helm-charts" / "php-deployment"


def billion_laughs(key: str, levels: int = 8) -> str:
    """A mapping entry ``key`` whose aliases stand for 9**levels strings, in ~300 bytes."""
    names = "abcdefghij"
    lines = [f"{key}:", "  a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]"]
    lines += [f"  {n}: &{n} [" + ",".join([f"*{p}"] * 9) + "]" for p, n in itertools.pairwise(names[:levels])]
    return "\n".join(lines) + "\n"


def test_a_project_file_with_a_billion_laughs_is_refused(tmp_path: Path) -> None:
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    path = tmp_path / "op" / "PROJECT"
    path.write_text(path.read_text() + billion_laughs("notes"))
    with pytest.raises(ScaffoldError) as err:
        find_project(tmp_path / "op")
    assert str(err.value).startswith(f"{path} is not valid YAML (line ")
    assert "billion laughs" in str(err.value)


def test_a_kustomization_resource_with_a_billion_laughs_is_refused(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: [cm.yaml]\n")
    (tmp_path / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n" + billion_laughs("data")
    )
    with pytest.raises(ScaffoldError, match=r"cm\.yaml is not valid YAML \(line \d+, column \d+: .*billion"):
        build_kustomization(tmp_path)


def _limits() -> None:  # in the child: 1.5 GiB of address space at most
    resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))


def test_create_api_with_a_chart_whose_values_hold_a_billion_laughs_is_refused_quickly(
    tmp_path: Path,
) -> None:
    """End to end, in a child bounded in time and memory (on main it dumped a tree of 9**8 strings)."""
    chart = tmp_path / "bomb"
    shutil.copytree(EXAMPLE_CHART, chart)
    values = chart / "values.yaml"
    values.write_text(billion_laughs("extra"))
    root = tmp_path / "op"
    kubeop = [sys.executable, "-m", "kubeop"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3] / "src")}
    init = [*kubeop, "init", "--plugin", "helm", "--domain", DOMAIN, "--repo", REPO, "--dir", str(root)]
    subprocess.run(init, env=env, check=True, capture_output=True, timeout=120)
    create = [*kubeop, "create", "api", "--group", "web", "--version", "v1", "--kind", "Bomb"]
    start = time.monotonic()
    try:
        done = subprocess.run(
            [*create, "--helm-chart", str(chart), "--dir", str(root)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=_limits,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("create api --helm-chart ran for over 60 s on a 300-byte values.yaml")
    took = time.monotonic() - start
    assert done.returncode == 1, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    copied = root / "helm-charts" / "php-deployment" / "values.yaml"
    assert f"{copied} is not valid YAML: line " in done.stdout + done.stderr
    assert "billion laughs" in done.stdout + done.stderr and "Traceback" not in done.stderr
    assert took < 60
    assert not (root / "config" / "samples").exists() or not list(
        (root / "config" / "samples").glob("*bomb*")
    )
