"""Every code block of the documentation runs, against the local control plane.

One test per page runs the page's python and bash blocks in order (see tests/docs/blocks.py for
the rules) with ``KUBECONFIG`` set to the session's control plane and its kubectl first on
``PATH``. Blocks marked ``<!-- not-run: reason -->`` are reported as skipped with their reason.
"""

from __future__ import annotations

import os
import subprocess
import sys
import traceback
import types
from pathlib import Path
from typing import Any

import pytest

from tests.docs.blocks import Block, BlockError, page_blocks

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))
PAGE_MODULE = "kubeop_docs_page"


def _blocks(page: Path) -> list[Block] | BlockError:
    try:
        return page_blocks(page, root=ROOT)
    except BlockError as exc:
        return exc


def _runnable_pages() -> list[Any]:
    params = []
    for page in PAGES:
        blocks = _blocks(page)
        if isinstance(blocks, BlockError) or any(b.not_run is None for b in blocks):
            params.append(pytest.param(page, id=str(page.relative_to(DOCS))))
    return params


def _not_run() -> list[Any]:
    params = []
    for page in PAGES:
        blocks = _blocks(page)
        if isinstance(blocks, BlockError):
            continue
        for b in blocks:
            if b.not_run is not None:
                params.append(pytest.param(b, id=f"{page.relative_to(DOCS)}:{b.line}"))
    return params


def test_there_are_pages_and_blocks() -> None:
    assert PAGES, f"no pages under {DOCS}"
    assert _runnable_pages(), "no page has a block that runs"


@pytest.mark.parametrize("page", _runnable_pages())
def test_page_blocks_run(page: Path, control_plane: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _blocks(page)
    if isinstance(blocks, BlockError):
        pytest.fail(str(blocks), pytrace=False)
    kubectl = _kubectl(control_plane)
    monkeypatch.setenv("KUBECONFIG", control_plane.kubeconfig_path)
    monkeypatch.setenv(
        "PATH",
        f"{kubectl.parent}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}" + os.environ.get("PATH", ""),
    )
    monkeypatch.chdir(ROOT)  # where a reader runs them
    # The page's python blocks run as one module, registered like an imported one (pydantic
    # resolves a model's annotations through sys.modules).
    module = types.ModuleType(PAGE_MODULE)
    monkeypatch.setitem(sys.modules, PAGE_MODULE, module)
    for block in blocks:
        if block.not_run is not None:
            continue
        if block.lang == "python":
            _run_python(block, module.__dict__)
        else:
            _run_bash(block, ROOT)


@pytest.mark.parametrize("block", _not_run())
def test_block_not_run(block: Block) -> None:
    pytest.skip(f"{block.where}: {block.not_run}")


def _kubectl(cluster: Any) -> Path:
    binaries = getattr(cluster, "binaries", None)
    if binaries is not None:
        return Path(binaries.kubectl)
    return Path(cluster._kubectl_path())


def _run_python(block: Block, namespace: dict[str, Any]) -> None:
    code = compile(block.code, block.where, "exec")
    failure = None
    try:
        exec(code, namespace)
    except Exception:
        failure = traceback.format_exc()
    if failure is not None:
        pytest.fail(f"the python block at {block.where} failed:\n{failure}", pytrace=False)


def _run_bash(block: Block, cwd: Path) -> None:
    try:
        res = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block.code],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the bash block at {block.where} ran for more than 120 s", pytrace=False)
    if res.returncode != 0:
        pytest.fail(
            f"the bash block at {block.where} exited {res.returncode}:\n{block.code}\n"
            f"stdout:\n{res.stdout}\nstderr:\n{res.stderr}",
            pytrace=False,
        )


def test_blocks_parse_strictly(tmp_path: Path) -> None:
    page = tmp_path / "p.md"
    page.write_text(
        "<!-- not-run: needs a container engine -->\n\n```bash\ndocker ps\n```\n"
        "```python\nx = 1\n```\n```yaml\na: 1\n```\n    ```sh\n    echo hi\n    ```\n",
        encoding="utf-8",
    )
    blocks = page_blocks(page)
    assert [(b.lang, b.not_run, b.code) for b in blocks] == [
        ("bash", "needs a container engine", "docker ps\n"),
        ("python", None, "x = 1\n"),
        ("bash", None, "echo hi\n"),
    ]
    page.write_text("<!-- not-run: -->\n```bash\nls\n```\n", encoding="utf-8")
    with pytest.raises(BlockError, match="needs a reason"):
        page_blocks(page)
    page.write_text("```python\nx = 1\n", encoding="utf-8")
    with pytest.raises(BlockError, match="never closed"):
        page_blocks(page)


def test_blocks_run_what_they_include(tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text(
        "import os\n# --8<-- [start:part]\ndef f():\n    return 1\n# --8<-- [end:part]\n", encoding="utf-8"
    )
    page = tmp_path / "p.md"
    page.write_text('```python\n--8<-- "lib.py:part"\nassert f() == 1\n```\n', encoding="utf-8")
    [block] = page_blocks(page, root=tmp_path)
    assert block.code == "def f():\n    return 1\nassert f() == 1\n"
    page.write_text('```python\n--8<-- "lib.py:nowhere"\n```\n', encoding="utf-8")
    with pytest.raises(BlockError, match=r"p\.md:1: an include in this block fails"):
        page_blocks(page, root=tmp_path)
