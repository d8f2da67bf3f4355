"""kubeop as a package: one version source, a lean runtime with the CLI as an extra, pinned docs
tools, and a generated project whose README install step works before kubeop is on an index.

The build itself (sdist, wheel, twine check, the wheel in a fresh venv running a generated
project's tests) is scripts/check_dist.sh, run by CI."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

import kubeop
from kubeop.scaffold import init_project

from .conftest import DOMAIN, REPO

ROOT = Path(__file__).parents[3]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def test_the_version_is_written_once() -> None:
    assert "version" not in PROJECT and PROJECT["dynamic"] == ["version"]
    source = ROOT / PYPROJECT["tool"]["hatch"]["version"]["path"]
    assert source == Path(kubeop.__file__)
    assert re.search(rf'^__version__ = "{re.escape(kubeop.__version__)}"$', source.read_text(), re.MULTILINE)
    # the installed distribution (here: the editable install) agrees
    assert importlib.metadata.version("kubeop") == kubeop.__version__


def test_the_runtime_does_not_carry_the_command_line() -> None:
    runtime = [re.split(r"[<>=\[ ;]", d)[0].lower() for d in PROJECT["dependencies"]]
    assert not {"typer", "rich", "click"} & set(runtime)
    assert [d for d in PROJECT["optional-dependencies"]["cli"] if d.startswith("typer")]
    assert "kubeop[cli]" in PROJECT["optional-dependencies"]["dev"]


def test_the_docs_tools_are_pinned_exactly() -> None:
    docs = PROJECT["optional-dependencies"]["docs"]
    assert docs and all(
        re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[0-9][0-9A-Za-z.]*", d.split("#")[0].strip()) for d in docs
    )
    names = {d.split("==")[0].split("[")[0].lower() for d in docs}
    assert {"mkdocs", "mkdocs-material", "mkdocstrings", "mkdocstrings-python", "pymdown-extensions"} <= names


def test_the_metadata_an_index_shows() -> None:
    assert PROJECT["license"] == "Apache-2.0" and PROJECT["readme"] == "README.md"
    assert PROJECT["authors"] and PROJECT["keywords"]
    assert {"Homepage", "Documentation", "Repository", "Issues", "Changelog"} <= set(PROJECT["urls"])
    classifiers = PROJECT["classifiers"]
    assert "Typing :: Typed" in classifiers and "Programming Language :: Python :: 3.11" in classifiers
    assert PROJECT["scripts"]["kubeop"] == "kubeop.__main__:main"


@pytest.mark.parametrize("source", [None, ROOT])
def test_the_generated_readme_says_how_to_install(tmp_path: Path, source: Path | None) -> None:
    root = tmp_path / "memcached-operator"
    init_project(root, domain=DOMAIN, repo=REPO, kubeop_source=str(source) if source else None)
    readme = (root / "README.md").read_text()
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    dev = pyproject["optional-dependencies"]["dev"]
    assert "pip install -e '.[dev]'" in readme
    if source is None:
        assert "pip install '/path/to/kubeop-<version>-py3-none-any.whl[cli]'" in readme
        assert "kubeop is not on a package index yet" in readme
        assert dev[0] == "kubeop[cli]>=0.1" and pyproject["dependencies"] == ["kubeop>=0.1"]
    else:
        assert f"`{source}`" in readme
        assert dev[0] == f"kubeop[cli] @ {source.resolve().as_uri()}"
