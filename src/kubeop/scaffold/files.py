"""Writing a project's files without clobbering what the user wrote.

Every file a command would write is :class:`Planned` first: its path, its content, and which
existing content it may replace. :func:`write_planned` then creates what is missing, replaces
only what ``may_replace`` accepts (an untouched template, a file that still carries the
generated header), and keeps everything else, reporting it. :func:`pending` answers "would
anything change?" without writing (``kubeop manifests --check``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = ["Change", "Planned", "never", "pending", "write_planned"]

Action = Literal["created", "updated", "unchanged", "kept"]


def never(_: str) -> bool:
    """The policy of files that are the user's once written: never replace."""
    return False


@dataclass(frozen=True)
class Planned:
    """A file a command wants at ``path`` (relative to the project root, ``/``-separated)."""

    path: str
    content: str
    may_replace: Callable[[str], bool] = never


@dataclass(frozen=True)
class Change:
    """What happened (or would happen) to one planned file."""

    path: str
    action: Action


def _action(root: Path, plan: Planned) -> Action:
    target = root / plan.path
    try:
        current = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return "created"
    if current == plan.content:
        return "unchanged"
    return "updated" if plan.may_replace(current) else "kept"


def pending(root: Path, plans: Iterable[Planned]) -> list[Change]:
    """What :func:`write_planned` would do, without touching the disk."""
    return [Change(p.path, _action(root, p)) for p in plans]


def write_planned(root: Path, plans: Iterable[Planned]) -> list[Change]:
    """Create or replace what the plans allow; returns one :class:`Change` per plan, in order."""
    changes = []
    for plan in plans:
        action = _action(root, plan)
        if action in ("created", "updated"):
            target = root / plan.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(plan.content, encoding="utf-8")
        changes.append(Change(plan.path, action))
    return changes
