"""The image build context: only what the image needs, and a vendored kubeop for local checkouts."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeop.scaffold import ScaffoldError, find_project, init_project
from kubeop.scaffold.image import local_kubeop, write_build_context

from .conftest import DOMAIN, REPO

KUBEOP = Path(__file__).resolve().parents[3]


def test_a_released_kubeop_is_not_vendored(tmp_path: Path) -> None:
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    project = find_project(tmp_path / "op")
    assert local_kubeop(project) is None
    entries = write_build_context(project, tmp_path / "ctx")
    assert entries == [
        ".dockerignore",
        ".kubeop-build-context",
        "Dockerfile",
        "README.md",
        "op",
        "pyproject.toml",
    ]
    assert (tmp_path / "ctx" / "pyproject.toml").read_text() == (project.root / "pyproject.toml").read_text()


def test_a_local_checkout_is_vendored_and_the_dependency_made_plain(tmp_path: Path) -> None:
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO, kubeop_source=str(KUBEOP))
    project = find_project(tmp_path / "op")
    (project.root / "op" / "__pycache__").mkdir()
    (project.root / "op" / "__pycache__" / "main.cpython-311.pyc").write_bytes(b"")
    assert local_kubeop(project) == KUBEOP
    ctx = tmp_path / "ctx"
    assert "vendor" in write_build_context(project, ctx)
    assert (ctx / "vendor/kubeop/src/kubeop/__init__.py").is_file()
    assert (ctx / "vendor/kubeop/pyproject.toml").is_file()
    assert not list(ctx.rglob("__pycache__"))
    text = (ctx / "pyproject.toml").read_text()
    assert '    "kubeop",\n' in text and "file://" not in text
    # Written again: replaced, not merged.
    (ctx / "stale.txt").write_text("x")
    write_build_context(project, ctx)
    assert not (ctx / "stale.txt").exists()


def test_a_directory_that_is_not_a_context_is_not_replaced(tmp_path: Path) -> None:
    init_project(tmp_path / "op", domain=DOMAIN, repo=REPO)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "file").write_text("x")
    with pytest.raises(ScaffoldError, match="not a build context kubeop wrote"):
        write_build_context(find_project(tmp_path / "op"), tmp_path / "mine")
    assert (tmp_path / "mine" / "file").read_text() == "x"
