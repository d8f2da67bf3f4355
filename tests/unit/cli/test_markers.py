"""Scaffold markers in main.py: lines added once, imports kept sorted, a missing marker reported."""

from __future__ import annotations

import pytest

from kubeop.scaffold.markers import MarkerMissing, insert_at_marker

MAIN = """import x

# +kubeop:scaffold:imports

def controllers():
    return [
        # +kubeop:scaffold:controllers
    ]
"""


def test_lines_go_above_the_marker_with_its_indentation() -> None:
    text, added = insert_at_marker(MAIN, "controllers", "b.controller(),")
    text, _ = insert_at_marker(text, "controllers", "a.controller(),")
    assert added
    assert "        b.controller(),\n        a.controller(),\n        # +kubeop:scaffold:controllers" in text


def test_imports_go_into_the_sorted_block_below_the_marker() -> None:
    text, _ = insert_at_marker(MAIN, "imports", "from p.controllers import zeta as z", below=True)
    text, _ = insert_at_marker(text, "imports", "from p.controllers import alpha as a", below=True)
    assert (
        "# +kubeop:scaffold:imports\n"
        "from p.controllers import alpha as a\n"
        "from p.controllers import zeta as z\n\n"
    ) in text


def test_a_line_that_is_there_is_not_added_again() -> None:
    text, _ = insert_at_marker(MAIN, "controllers", "a.controller(),")
    again, added = insert_at_marker(text, "controllers", "a.controller(),")
    assert not added and again == text


def test_a_missing_marker_is_reported() -> None:
    with pytest.raises(MarkerMissing, match="kubeop:scaffold:webhooks"):
        insert_at_marker(MAIN, "webhooks", "x")
