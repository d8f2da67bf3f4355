"""The one error kubeop.scaffold raises: bad input or a project in a state it cannot work with.

Messages say what is wrong and how to fix it; the CLI prints them as they are, without a
traceback.
"""

from __future__ import annotations

__all__ = ["ScaffoldError"]


class ScaffoldError(Exception):
    """A name, flag or project state the scaffolder refuses; the message carries the fix."""


def yaml_problem(error: Exception) -> str:
    """A PyYAML error in one line: where (line, column) and what, without its quoted source lines."""
    mark = getattr(error, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    return where + str(getattr(error, "problem", None) or type(error).__name__)
