"""The fenced code blocks of the documentation pages, as the docs tests run them.

A page's ``python`` and ``bash`` blocks run in order, as one session: python blocks share one
module (``kubeop_docs_page``, so an ``if __name__ == "__main__":`` tail does not run)
and every block runs from the repository root, as a reader would (so a block should not
leave files behind). A block that must not run carries the reason in an HTML comment on the
line before it (blank lines between are allowed), which the rendered page does not show::

    <!-- not-run: starts its own control plane (the tests run one for all pages) -->
    ```bash
    kubeop cluster up
    ```

Blocks in any other language (yaml, text, console output) are never run.

A block may include code from a file of the repository, as the rendered page does
(``pymdownx.snippets``, paths from the repository root): the block runs what the page shows::

    ```python
    --8<-- "examples/crontab/schedule.py:next_run"
    ```

where the file marks the section with ``# --8<-- [start:next_run]`` and ``# --8<-- [end:next_run]``
lines (or names lines, ``file.py:10:20``). A missing file or section is an error, as in the build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import markdown

__all__ = ["RUNNABLE", "Block", "BlockError", "page_blocks"]

RUNNABLE = ("python", "bash")
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)[^\n]*$")
_NOT_RUN = re.compile(r"^\s*<!--\s*not-run:(?P<reason>.*?)-->\s*$")
_COMMENT = re.compile(r"^\s*<!--.*-->\s*$")


class BlockError(ValueError):
    """A page whose blocks cannot be read (an unclosed fence, a not-run without a reason)."""


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    not_run: str | None  # the reason, for a block marked not runnable

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def page_blocks(page: Path, *, root: Path | None = None) -> list[Block]:
    """The python and bash blocks of one Markdown page, in page order."""
    shown = page.relative_to(root) if root else page
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, indent, fence, lang = i, len(m["indent"]), m["fence"], m["lang"].lower()
        body: list[str] = []
        i += 1
        while i < len(lines) and not (
            lines[i].strip().startswith(fence) and lines[i].strip().strip(fence[0]) == ""
        ):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        if i == len(lines):
            raise BlockError(f"{shown}:{start + 1}: a ``` block that is never closed")
        i += 1
        if lang == "sh":
            lang = "bash"
        if lang not in RUNNABLE:
            continue
        code = _included(body, root or Path.cwd(), f"{shown}:{start + 1}")
        blocks.append(Block(shown, start + 1, lang, "\n".join(code) + "\n", _reason(lines, start, shown)))
    return blocks


def _included(body: list[str], root: Path, where: str) -> list[str]:
    """The block's lines with its ``--8<--`` includes replaced by what they name, as mkdocs.yml's
    ``pymdownx.snippets`` renders them."""
    if not any("8<-" in line for line in body):
        return body
    md = markdown.Markdown(
        extensions=["pymdownx.snippets"],
        extension_configs={
            "pymdownx.snippets": {"base_path": [str(root)], "check_paths": True, "dedent_subsections": True}
        },
    )
    try:
        return list(md.preprocessors["snippet"].run(body))
    except Exception as exc:  # pymdownx's SnippetMissingError, an unreadable file
        raise BlockError(f"{where}: an include in this block fails: {exc}") from exc


def _reason(lines: list[str], fence: int, shown: Path) -> str | None:
    j = fence - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    if j < 0 or not _COMMENT.match(lines[j]):
        return None
    m = _NOT_RUN.match(lines[j])
    if m is None:
        return None
    reason = m["reason"].strip()
    if not reason:
        raise BlockError(
            f"{shown}:{fence + 1}: `<!-- not-run: -->` needs a reason, e.g. "
            "`<!-- not-run: needs a container engine -->`"
        )
    return reason
