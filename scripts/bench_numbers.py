"""Numbers quoted from the benchmarks' JSON results, with where each one comes from.

A page quotes a measured number only through a marker that names its source:

    <span title="bench/client/results-run6.json: cells[1].cpu * 1000 / cells[1].count">0.129</span>

The ``title`` is the result file (relative to the repository root), a colon, and an expression
over that file's JSON: names are its top-level keys, ``.key`` and ``[index]`` walk into it, and
``+ - * /`` combine values. A reader hovering the number sees its source; ``scripts/docs_gen.py``
writes the markers with :func:`quote`, and ``tests/docs/test_bench_numbers.py`` recomputes every
marker of every page (:func:`markers`, :func:`check`), so a number no result file holds fails.
Numbers with a unit on the performance pages must all be such markers (:func:`bare_numbers`).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

MARKER = re.compile(r'<span title="(?P<file>bench/[^":]+\.json): (?P<expr>[^"]+)">(?P<shown>[^<]*)</span>')

# A figure with a unit: what a performance page may show only inside a marker.
_FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?\s?(?:ms|µs|s|MB|KB|x|%)(?![\w])")
_CODE_BLOCK = re.compile(r"^(`{3,}|~{3,}).*?^\1", re.S | re.M)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_COMMENT = re.compile(r"<!--.*?-->", re.S)


@dataclass(frozen=True)
class Marker:
    """One quoted number: the file and expression it comes from, and the text the page shows."""

    file: str
    expr: str
    shown: str
    line: int


@cache
def _load(rel: str) -> Any:
    return json.loads((ROOT / rel).read_text(encoding="utf-8"))


def _eval(node: ast.AST, data: Any) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body, data)
    if isinstance(node, ast.Name):
        return data[node.id]
    if isinstance(node, ast.Attribute):
        return _eval(node.value, data)[node.attr]
    if isinstance(node, ast.Subscript):
        return _eval(node.value, data)[_eval(node.slice, data)]
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, data)
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, data), _eval(node.right, data)
        ops = {ast.Add: left.__add__, ast.Sub: left.__sub__, ast.Mult: left.__mul__}
        if isinstance(node.op, ast.Div):
            return left / right
        if type(node.op) in ops:
            return ops[type(node.op)](right)
    raise ValueError(f"not allowed in a bench expression: {ast.dump(node)}")


def value(file: str, expr: str) -> Any:
    """The value of ``expr`` over the JSON result ``file`` (a path relative to the repository)."""
    return _eval(ast.parse(expr, mode="eval"), _load(file))


def quote(file: str, expr: str, fmt: str = ".2f", unit: str = "") -> str:
    """The marker for ``expr`` over ``file``, its value formatted with ``fmt`` and followed by ``unit``."""
    shown = format(value(file, expr), fmt)
    return f'<span title="{file}: {expr}">{shown}{unit}</span>'


def markers(text: str) -> Iterator[Marker]:
    """Every marker in a page's text."""
    for m in MARKER.finditer(text):
        yield Marker(m["file"], m["expr"], m["shown"], text.count("\n", 0, m.start()) + 1)


def _number(shown: str) -> float:
    found = re.search(r"-?\d[\d,]*(?:\.\d+)?", shown)
    if found is None:
        raise ValueError(f"no number in {shown!r}")
    return float(found[0].replace(",", ""))


def check(marker: Marker) -> str | None:
    """Why the marker's shown number is not its source's value (rounded as shown), or None."""
    path = ROOT / marker.file
    if not path.is_file():
        return f"line {marker.line}: {marker.file} does not exist"
    try:
        actual = float(value(marker.file, marker.expr))
        shown = _number(marker.shown)
    except (KeyError, IndexError, TypeError, ValueError, SyntaxError) as exc:
        return f"line {marker.line}: {marker.file}: {marker.expr}: {exc!r}"
    digits = marker.shown.split(".")[1] if "." in marker.shown else ""
    places = len(re.match(r"\d*", digits)[0]) if digits else 0  # type: ignore[index]
    if abs(round(actual, places) - shown) > 10 ** (-places) / 2 + 1e-9:
        return f"line {marker.line}: shows {marker.shown!r} but {marker.file}: {marker.expr} is {actual!r}"
    return None


def bare_numbers(text: str) -> list[str]:
    """Figures with a unit that are not inside a marker (code, comments and markers left out)."""
    text = MARKER.sub("", text)
    for pattern in (_CODE_BLOCK, _COMMENT, _INLINE_CODE):
        text = pattern.sub("", text)
    return [m[0] for m in _FIGURE.finditer(text)]
