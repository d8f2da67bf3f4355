"""The user pages (docs/, README, CHANGELOG) speak to users: no words from how the project is developed.

Issue numbers, and the words of the project's own development process (seeds, sessions,
leads, briefs, worktrees), mean nothing to a reader of the documentation or the README.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]

INTERNAL = re.compile(
    r"\bissues? #?\d+"  # "issue 12", "issues 3"
    r"|(?<![\w&/#'\"])#\d+\b"  # "#12" (not an HTML entity, a URL fragment or a colour)
    r"|\bseeds?\b"
    r"|\b(?:this|next|previous|last|a|the) session\b(?!'s one)"
    r"|\bsessions? \d+"
    r"|\bthe lead\b"
    r"|\bbriefs?\b"
    r"|\bworktrees?\b"
    r"|\bhelper sessions?\b",
    re.IGNORECASE,
)
_COMMENT = re.compile(r"<!--.*?-->", re.S)


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_no_internal_vocabulary(page: Path) -> None:
    text = _COMMENT.sub("", page.read_text(encoding="utf-8"))
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        found.extend(f"line {number}: {m[0]!r} in {line.strip()[:100]!r}" for m in INTERNAL.finditer(line))
    assert not found, f"{_id(page)} uses words from the project's development:\n" + "\n".join(found)


def test_the_pattern_catches_what_it_should() -> None:
    for text in ("the hardening of issue 12", "see #12", "Seed 000", "as the lead said"):
        assert INTERNAL.search(text), text
    for text in ("`control_plane` (one per session)", "&#123;", "page.md#section", "leader election"):
        assert not INTERNAL.search(text), text
