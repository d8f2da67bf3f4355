"""The image build context of a project: what ``docker build`` needs, and nothing else.

``kubeop docker-build`` writes it to ``build/image`` (then builds it, where an engine runs):
the Dockerfile, pyproject.toml, README.md and the package. A project that depends on a local
kubeop checkout (``kubeop init --kubeop-source``) gets a copy of that checkout in
``vendor/kubeop`` and a pyproject.toml that asks for plain ``kubeop``, which the Dockerfile
builds from there: the image does not depend on paths of this machine.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path
from urllib.parse import unquote, urlparse

from kubeop.scaffold.errors import ScaffoldError
from kubeop.scaffold.project import Project

__all__ = ["CONTEXT_MARKER", "local_kubeop", "prepare_context", "write_build_context"]

CONTEXT_MARKER = ".kubeop-build-context"
_SKIP = shutil.ignore_patterns("__pycache__", "*.pyc", ".mypy_cache", ".pytest_cache", ".ruff_cache")


def _kubeop_requirement(pyproject: dict[str, object]) -> str | None:
    project = pyproject.get("project")
    deps = project.get("dependencies", []) if isinstance(project, dict) else []
    for dep in deps if isinstance(deps, list) else []:
        text = str(dep).strip()
        if text.split("@", 1)[0].strip().lower() == "kubeop" and "@" in text:
            return text.split("@", 1)[1].strip()
    return None


def local_kubeop(project: Project) -> Path | None:
    """The local kubeop checkout pyproject.toml depends on (``kubeop @ file:///...``), if any."""
    path = project.root / "pyproject.toml"
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ScaffoldError(f"{path} is missing: restore it (kubeop init --force)") from None
    except tomllib.TOMLDecodeError as e:
        raise ScaffoldError(f"{path} is not valid TOML: {e}") from None
    url = _kubeop_requirement(data)
    if url is None or not url.startswith("file:"):
        return None
    source = Path(unquote(urlparse(url).path))
    if not (source / "pyproject.toml").is_file():
        raise ScaffoldError(
            f"pyproject.toml depends on kubeop at {source}, which is not a kubeop checkout; fix that line"
        )
    return source


def prepare_context(dest: Path) -> None:
    """An empty ``dest`` marked as kubeop's (an earlier context is replaced, anything else refused)."""
    if dest.exists():
        if not (dest / CONTEXT_MARKER).is_file() and any(dest.iterdir()):
            raise ScaffoldError(
                f"{dest} exists and is not a build context kubeop wrote; choose another --context-dir"
            )
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    (dest / CONTEXT_MARKER).write_text("written by kubeop docker-build; rewritten on every run\n")


def write_build_context(project: Project, dest: Path) -> list[str]:
    """Write the context into ``dest`` (replacing an earlier one); returns the top-level entries."""
    root = project.root
    for needed in ("Dockerfile", "pyproject.toml", project.package):
        if not (root / needed).exists():
            raise ScaffoldError(
                f"{root / needed} is missing: restore it (kubeop init --force) to build an image"
            )
    source = local_kubeop(project)
    prepare_context(dest)
    for name in ("Dockerfile", ".dockerignore", "README.md"):
        if (root / name).is_file():
            shutil.copy2(root / name, dest / name)
    shutil.copytree(root / project.package, dest / project.package, ignore=_SKIP)
    pyproject = (root / "pyproject.toml").read_text()
    if source is not None:
        vendored = dest / "vendor" / "kubeop"
        vendored.mkdir(parents=True)
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            if (source / name).is_file():
                shutil.copy2(source / name, vendored / name)
        shutil.copytree(source / "src", vendored / "src", ignore=_SKIP)
        start = pyproject.index('"kubeop @ ')
        pyproject = pyproject[:start] + '"kubeop' + pyproject[pyproject.index('"', start + 1) :]
    (dest / "pyproject.toml").write_text(pyproject)
    return sorted(p.name for p in dest.iterdir())
