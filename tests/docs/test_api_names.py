"""Every kubeop name the documentation mentions exists.

Blocks that run are checked by running them (tests/docs/test_code_blocks.py); this checks the
rest without a cluster: each ``kubeop.x.Name`` written in a page's text, and each name a python
block (run or not) imports from kubeop, must be importable as written.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from tests.docs.blocks import page_blocks

ROOT = Path(__file__).resolve().parents[2]
# Not CHANGELOG.md: it names what was renamed or removed.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# `kubeop.client.Client`, `kubeop.testing.FakeCluster`: a dotted name in inline code.
# Not a host name such as `kubeop.dev/hostpath`.
_DOTTED = re.compile(r"`(kubeop(?:\.[A-Za-z_]\w*)+)(?![\w/-])")


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_dotted_kubeop_names_exist(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    missing = sorted({name for name in _DOTTED.findall(text) if not _resolves(name)})
    assert not missing, f"{_id(page)} names what kubeop does not have: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_kubeop_imports_in_blocks_exist(page: Path) -> None:
    missing = []
    for block in page_blocks(page, root=ROOT):
        if block.lang != "python":
            continue
        try:
            tree = ast.parse(block.code)
        except SyntaxError:
            continue  # a fragment (a decorator without its function...): its names are in the text
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "kubeop":
                missing += [
                    f"{block.where}: from {node.module} import {alias.name}"
                    for alias in node.names
                    if not _resolves(f"{node.module}.{alias.name}")
                ]
    assert not missing, f"{_id(page)} imports names kubeop does not have:\n" + "\n".join(missing)
