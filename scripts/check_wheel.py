"""What kubeop's wheel carries: the ``kubeop`` package and its metadata, nothing else.

    python scripts/check_wheel.py dist/kubeop-<version>-py3-none-any.whl

Fails (exit 1, naming the problem) when the wheel holds files outside ``kubeop/`` and its
dist-info, tests or caches, a version other than ``kubeop.__version__`` of the source it was built
from, or typer among the runtime's dependencies (it is the ``cli`` extra). Prints the wheel's size
and the Go module files it keeps (``kubeop cluster build`` and the pytest plugin compile the
local control plane from them; an operator image's wheel leaves them out).
"""

from __future__ import annotations

import re
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "kubeop" / "__init__.py"


def problems(wheel: Path) -> list[str]:
    found: list[str] = []
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(archive.read(meta_name).decode())
    version = re.search(r'^__version__ = "([^"]+)"$', SRC.read_text(), re.MULTILINE)
    if version is None or meta["Version"] != version.group(1):
        found.append(f"the wheel's version {meta['Version']} is not kubeop.__version__ of {SRC}")
    for name in names:
        top = name.split("/", 1)[0]
        if top != "kubeop" and not top.endswith(".dist-info"):
            found.append(f"{name}: outside the kubeop package")
        if re.search(r"(__pycache__|\.pyc$|/tests?/|\.mypy_cache|\.pytest_cache)", name):
            found.append(f"{name}: a cache or a test in the wheel")
    requires = meta.get_all("Requires-Dist") or []
    runtime = [r for r in requires if "extra ==" not in r]
    if any(r.lower().startswith(("typer", "rich", "click")) for r in runtime):
        found.append(f"the command line's libraries are runtime dependencies: {runtime}")
    if not any(r.startswith("typer") and re.search(r"extra == [\"']cli[\"']", r) for r in requires):
        found.append("typer is not in the cli extra")
    for field in ("Summary", "License-Expression", "Project-URL", "Classifier", "Keywords", "Author"):
        if not meta.get_all(field):
            found.append(f"the metadata has no {field}")
    return found


def main() -> int:
    wheel = Path(sys.argv[1])
    found = problems(wheel)
    for problem in found:
        print(f"error: {wheel.name}: {problem}", file=sys.stderr)
    with zipfile.ZipFile(wheel) as archive:
        go = [i for i in archive.infolist() if "/gomod/" in i.filename]
        count = len(archive.infolist())
    kib = sum(i.file_size for i in go) / 1024
    print(
        f"{wheel.name}: {wheel.stat().st_size / 1024:.0f} KiB, {count} files "
        f"({len(go)} Go module files, {kib:.0f} KiB unpacked, for kubeop cluster build)"
    )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
