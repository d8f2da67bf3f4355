"""Every measured number the documentation quotes is one a benchmark result file holds.

A quoted number is a marker (``<span title="bench/...json: expr">shown</span>``, see
scripts/bench_numbers.py): each marker on every page is recomputed from its file, and on the
performance pages no figure with a unit (ms, s, MB, x, %) may stand outside a marker.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
PERFORMANCE_PAGES = [ROOT / "docs" / "performance.md"]


def _bench_numbers() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_numbers", ROOT / "scripts" / "bench_numbers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_numbers", module)
    spec.loader.exec_module(module)
    return module


bench_numbers = _bench_numbers()


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_every_quoted_number_is_in_its_result_file(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    wrong = [why for m in bench_numbers.markers(text) if (why := bench_numbers.check(m)) is not None]
    assert not wrong, f"{_id(page)} quotes numbers its result files do not hold:\n" + "\n".join(wrong)


@pytest.mark.parametrize("page", PERFORMANCE_PAGES, ids=_id)
def test_performance_pages_quote_figures_only_through_markers(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert list(bench_numbers.markers(text)), f"{_id(page)} quotes no result at all"
    bare = bench_numbers.bare_numbers(text)
    assert not bare, (
        f"{_id(page)} shows figures that no result file backs: {bare}; quote them with "
        "bench_numbers.quote() in scripts/docs_gen.py"
    )


def test_a_wrong_number_is_caught() -> None:
    marker = next(
        bench_numbers.markers('<span title="bench/client/results-run6.json: cells[0].count">3001</span>')
    )
    assert bench_numbers.check(marker) is not None
    right = next(
        bench_numbers.markers('<span title="bench/client/results-run6.json: cells[0].count">3,000</span>')
    )
    assert bench_numbers.check(right) is None
    assert bench_numbers.bare_numbers("took 4.2 ms and `1 s` in code") == ["4.2 ms"]
