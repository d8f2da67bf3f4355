"""Sequence diagrams as plain SVG, so the documentation's diagrams show without any script.

A diagram is a list of participants and a list of steps; :func:`render` lays them out top to
bottom and returns the SVG text (deterministic: the same input gives the same bytes, so
``scripts/docs_gen.py --check`` can compare it). Steps:

- ``Message(source, target, text)``: an arrow (``reply=True``: dashed, for an answer or a
  notification); ``source == target`` draws a step the participant takes on its own;
- ``Note(text)``: a note across the whole diagram.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

_COLUMN = 210  # between two lifelines
_MARGIN = 24
_HEAD = 40  # a participant's box
_ROW = 38  # one step
_CHAR = 6.6  # average width of a 12px character
_FONT = 'font-family="Helvetica, Arial, sans-serif" font-size="12"'
_INK = "#333"
_ACCENT = "#3f51b5"


@dataclass(frozen=True)
class Message:
    """An arrow from ``source`` to ``target`` labelled ``text`` (dashed when ``reply``)."""

    source: str
    target: str
    text: str
    reply: bool = False


@dataclass(frozen=True)
class Note:
    """A note across the whole diagram."""

    text: str


def _text(x: float, y: float, text: str, anchor: str = "middle", extra: str = "") -> str:
    halo = 'paint-order="stroke" stroke="white" stroke-width="4"'  # legible over the lifelines
    return f'<text x="{x:.0f}" y="{y:.0f}" text-anchor="{anchor}" {_FONT} {halo}{extra}>{escape(text)}</text>'


def render(title: str, participants: list[str], steps: list[Message | Note]) -> str:
    """The SVG of a sequence diagram; ``title`` is its accessible name."""
    index = {name: i for i, name in enumerate(participants)}
    for step in steps:
        if isinstance(step, Message) and not {step.source, step.target} <= index.keys():
            raise ValueError(f"{title}: {step} names a participant not in {participants}")
    left = _MARGIN + 85

    def x(name: str) -> float:
        return left + _COLUMN * index[name]

    def span(text: str) -> float:
        return len(text) * _CHAR

    width = int(
        max(
            2 * left + _COLUMN * (len(participants) - 1),
            *(span(s.text) + 2 * _MARGIN + 20 for s in steps if isinstance(s, Note)),
            *(span(s.text) + 2 * _MARGIN for s in steps if isinstance(s, Message)),
            *(
                x(s.source) + 36 + span(s.text) + _MARGIN
                for s in steps
                if isinstance(s, Message) and s.source == s.target
            ),
        )
    )

    top = _MARGIN + _HEAD
    height = top + _ROW * (len(steps) + 1) + _HEAD + _MARGIN
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{_INK}"/>'
        "</marker></defs>",
        f'<rect width="{width}" height="{height}" fill="white"/>',
    ]
    bottom = height - _MARGIN - _HEAD
    for name in participants:
        cx = x(name)
        out.append(
            f'<line x1="{cx:.0f}" y1="{top}" x2="{cx:.0f}" y2="{bottom}" stroke="#999" '
            'stroke-dasharray="4 4"/>'
        )
        for y in (_MARGIN, bottom):
            out.append(
                f'<rect x="{cx - 80:.0f}" y="{y}" width="160" height="{_HEAD - 8}" rx="4" '
                f'fill="#e8eaf6" stroke="{_ACCENT}"/>'
            )
            out.append(_text(cx, y + 21, name, extra=' font-weight="bold"'))
    for row, step in enumerate(steps, start=1):
        y = top + _ROW * row
        if isinstance(step, Note):
            out.append(
                f'<rect x="{_MARGIN}" y="{y - 16}" width="{width - 2 * _MARGIN}" height="24" '
                'fill="#fff8e1" stroke="#f9a825"/>'
            )
            out.append(_text(width / 2, y, step.text))
            continue
        dash = ' stroke-dasharray="6 4"' if step.reply else ""
        x1, x2 = x(step.source), x(step.target)
        if x1 == x2:  # a step the participant takes on its own
            out.append(
                f'<path d="M{x1:.0f},{y - 6} h28 v12 h-28" fill="none" stroke="{_INK}"{dash} '
                'marker-end="url(#arrow)"/>'
            )
            out.append(_text(x1 + 36, y + 4, step.text, anchor="start"))
            continue
        out.append(
            f'<line x1="{x1:.0f}" y1="{y + 6}" x2="{x2:.0f}" y2="{y + 6}" stroke="{_INK}"{dash} '
            'marker-end="url(#arrow)"/>'
        )
        half = span(step.text) / 2
        middle = min(max((x1 + x2) / 2, _MARGIN + half), width - _MARGIN - half)
        out.append(_text(middle, y, step.text))
    out.append("</svg>\n")
    return "\n".join(out)
