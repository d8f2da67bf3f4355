"""The one error kubeop.scaffold raises: bad input or a project in a state it cannot work with.

Messages say what is wrong and how to fix it; the CLI prints them as they are, without a
traceback.
"""

from __future__ import annotations

__all__ = ["ScaffoldError"]


class ScaffoldError(Exception):
    """A name, flag or project state the scaffolder refuses; the message carries the fix."""
