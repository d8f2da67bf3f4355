"""Scaffold markers: the comment lines in user code where ``kubeop create api`` adds its lines.

kubebuilder marks main.go with ``// +kubebuilder:scaffold:...``; here main.py carries
``# +kubeop:scaffold:imports`` (new imports go into the sorted block right below it, so the
file stays isort-clean) and ``# +kubeop:scaffold:controllers`` (new entries go right above
it, in the order they were created). A line is added only once: a line that is already there,
anywhere in the file, is not added again.
"""

from __future__ import annotations

__all__ = ["MarkerMissing", "insert_at_marker"]


class MarkerMissing(LookupError):
    """The file has no such marker (the user removed it): the line must be added by hand."""


def _is_import(line: str) -> bool:
    return line.startswith(("import ", "from "))


def insert_at_marker(text: str, marker: str, line: str, *, below: bool = False) -> tuple[str, bool]:
    """``text`` with ``line`` added at ``# +kubeop:scaffold:<marker>``; True if it was added.

    ``below``: into the block of import lines that follows the marker, keeping it sorted.
    Otherwise just above the marker, with its indentation.
    """
    tag = f"# +kubeop:scaffold:{marker}"
    lines = text.splitlines(keepends=True)
    if any(existing.strip() == line.strip() for existing in lines):
        return text, False
    at = next((i for i, existing in enumerate(lines) if existing.strip() == tag), None)
    if at is None:
        raise MarkerMissing(tag)
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    new = f"{indent}{line.strip()}\n"
    if not below:
        lines.insert(at, new)
        return "".join(lines), True
    end = at + 1
    while end < len(lines) and _is_import(lines[end]):
        end += 1
    block = sorted([*lines[at + 1 : end], new], key=lambda s: s.strip().lower())
    lines[at + 1 : end] = block
    return "".join(lines), True
