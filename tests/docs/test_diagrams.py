"""The documentation's sequence diagrams (scripts/sequence_svg.py): plain, deterministic SVG.

That each diagram under docs/assets is current is checked with the other generated pages
(tests/docs/test_site.py runs ``scripts/docs_gen.py --check``).
"""

from __future__ import annotations

import importlib.util
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sequence_svg", ROOT / "scripts" / "sequence_svg.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("sequence_svg", module)
    spec.loader.exec_module(module)
    return module


svg = _load()


def test_a_diagram_is_valid_svg_and_the_same_every_time() -> None:
    steps = [svg.Message("a", "b", "ask <x> & y"), svg.Message("b", "b", "think"), svg.Note("a note")]
    first = svg.render("t", ["a", "b"], steps)
    assert first == svg.render("t", ["a", "b"], steps)
    root = ET.fromstring(first)
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "ask <x> & y" in texts and "think" in texts and "a note" in texts
    assert "<script" not in first


def test_a_message_to_an_unknown_participant_is_refused() -> None:
    with pytest.raises(ValueError, match="not in"):
        svg.render("t", ["a"], [svg.Message("a", "c", "hello")])


@pytest.mark.parametrize(
    "name", ["reconcile-sequence.svg", "sharding-handover.svg", "webhook-certificates.svg"]
)
def test_the_pages_diagrams_are_svg_files_the_pages_show(name: str) -> None:
    ET.parse(ROOT / "docs" / "assets" / name)
    pages = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").rglob("*.md"))
    assert f"assets/{name})" in pages, f"no page shows {name}"
