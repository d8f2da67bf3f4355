"""The kubeop wheel an image build context carries, so the image installs the very kubeop of the
CLI that wrote the context, without a package index serving it.

:func:`kubeop_wheel` packs the running kubeop (the ``kubeop`` package directory this module
was imported from: a source checkout or an installed copy) into
``kubeop-<version>-py3-none-any.whl``: the package's files, ``METADATA`` with its version and
dependencies (read from the checkout's pyproject.toml, else from the installed distribution),
``entry_points.txt`` (the ``kubeop`` command, the pytest plugin) and ``RECORD``. No build
backend runs and nothing is downloaded; the dependencies are installed from the index as usual.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import re
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from kubeop.scaffold.errors import ScaffoldError

__all__ = ["WHEEL_DIR", "KubeopDist", "kubeop_dist", "kubeop_wheel"]

WHEEL_DIR = "wheels"  # where a build context keeps it
_SKIP_DIRS = frozenset({"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
# The Go modules `kubeop cluster build` compiles the local control plane from: an image runs the
# operator, never a control plane, so its wheel leaves them out.
_SKIP_PREFIXES = ("testing/gomod/",)
_ENTRY_POINTS = (
    "[console_scripts]\nkubeop = kubeop.__main__:main\n\n[pytest11]\nkubeop = kubeop.testing.pytest_plugin\n"
)


@dataclass(frozen=True)
class KubeopDist:
    """The running kubeop: where its package lives, its version, what it requires."""

    package_dir: Path
    version: str
    requires_python: str
    requires: tuple[str, ...]
    source: str  # "checkout <path>" or "installed"

    @property
    def wheel_name(self) -> str:
        return f"kubeop-{self.version}-py3-none-any.whl"


def kubeop_dist() -> KubeopDist:
    package_dir = Path(__file__).resolve().parents[1]  # .../kubeop
    checkout = package_dir.parent.parent
    pyproject = checkout / "pyproject.toml"
    if package_dir.parent.name == "src" and pyproject.is_file():
        try:
            project = tomllib.loads(pyproject.read_text())["project"]
        except (tomllib.TOMLDecodeError, KeyError) as e:
            raise ScaffoldError(
                f"{pyproject} cannot be read ({e}); it describes the kubeop to pack"
            ) from None
        if project.get("name") == "kubeop":
            return KubeopDist(
                package_dir,
                _version(package_dir),
                str(project.get("requires-python") or ""),
                tuple(str(d) for d in project.get("dependencies") or ()),
                f"checkout {checkout}",
            )
    try:
        meta = importlib.metadata.distribution("kubeop")
    except importlib.metadata.PackageNotFoundError:
        raise ScaffoldError(
            f"kubeop at {package_dir} is neither a source checkout nor an installed distribution: "
            "install it (pip install -e <checkout>) to build images from this CLI"
        ) from None
    requires = tuple(r for r in meta.requires or () if "extra ==" not in r)
    return KubeopDist(
        package_dir,
        meta.version,
        str((meta.metadata.get_all("Requires-Python") or [""])[0]),
        requires,
        "installed",
    )


def _version(package_dir: Path) -> str:
    """``__version__`` of ``kubeop/__init__.py``: the one place the version is written (the build
    backend reads it there too)."""
    init = package_dir / "__init__.py"
    match = re.search(r'^__version__ = "([^"]+)"$', init.read_text(), re.MULTILINE)
    if match is None:
        raise ScaffoldError(f'{init} has no __version__ = "..." line: it says which kubeop to pack')
    return match.group(1)


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def kubeop_wheel(dest: Path) -> tuple[Path, KubeopDist]:
    """Write the wheel of the running kubeop into the directory ``dest``; returns its path and
    what it was packed from. Files go in sorted order with fixed timestamps, so the same kubeop
    gives the same bytes (a container engine's layer cache keeps working)."""
    dist = kubeop_dist()
    dest.mkdir(parents=True, exist_ok=True)
    info = f"kubeop-{dist.version}.dist-info"
    metadata = [
        "Metadata-Version: 2.1",
        "Name: kubeop",
        f"Version: {dist.version}",
        "Summary: A Python framework for writing Kubernetes operators.",
    ]
    if dist.requires_python:
        metadata.append(f"Requires-Python: {dist.requires_python}")
    metadata += [f"Requires-Dist: {r}" for r in dist.requires]
    entries: list[tuple[str, bytes]] = []
    for path in sorted(dist.package_dir.rglob("*")):
        rel = path.relative_to(dist.package_dir)
        if (
            path.is_file()
            and not _SKIP_DIRS.intersection(rel.parts)
            and path.suffix != ".pyc"
            and not rel.as_posix().startswith(_SKIP_PREFIXES)
        ):
            entries.append((f"kubeop/{rel.as_posix()}", path.read_bytes()))
    entries += [
        (f"{info}/METADATA", ("\n".join(metadata) + "\n").encode()),
        (
            f"{info}/WHEEL",
            b"Wheel-Version: 1.0\nGenerator: kubeop\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        ),
        (f"{info}/entry_points.txt", _ENTRY_POINTS.encode()),
    ]
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in entries)
    record += f"{info}/RECORD,,\n"
    entries.append((f"{info}/RECORD", record.encode()))
    target = dest / dist.wheel_name
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for name, data in entries:
            item = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            item.external_attr = 0o644 << 16
            item.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(item, data)
    return target, dist
