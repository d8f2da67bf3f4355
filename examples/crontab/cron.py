"""Cron expressions: five fields, each ``*``, a number, a range or a list of them, with a step."""

from __future__ import annotations

import re

__all__ = ["FIELDS", "cron_problem"]

# (name, lowest, highest) of each field, in order
FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 7),
)
_ITEM = re.compile(r"^(\*|(\d+)(?:-(\d+))?)(?:/(\d+))?$")


def cron_problem(expression: str) -> str | None:
    """Why ``expression`` is not a five-field cron expression (single spaces), or None when it is."""
    parts = expression.split(" ")
    if len(parts) != 5:
        return f"{expression!r} has {len(parts)} space-separated fields, a cron expression has 5"
    for value, (name, low, high) in zip(parts, FIELDS, strict=True):
        for item in value.split(","):
            m = _ITEM.match(item)
            if m is None:
                return f"{name} {value!r} is not *, a number, a range or a list (with an optional /step)"
            first, last, step = m.group(2), m.group(3), m.group(4)
            numbers = [int(n) for n in (first, last) if n is not None]
            if any(not low <= n <= high for n in numbers):
                return f"{name} {value!r} is outside {low}-{high}"
            if len(numbers) == 2 and numbers[0] > numbers[1]:
                return f"{name} range {item!r} runs backwards"
            if step is not None and int(step) == 0:
                return f"{name} step in {item!r} must be at least 1"
    return None
