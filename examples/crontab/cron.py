"""Cron expressions as a CronJob's ``spec.schedule`` is read: kube-apiserver validates it with
robfig/cron v3's standard parser (``cron.ParseStandard``) and forbids ``TZ=``/``CRON_TZ=`` in it
(the ``timeZone`` field names the zone), and kube-controller-manager schedules with the same parser.

What that parser accepts, and so :func:`cron_problem` (``None``) and :func:`normalized`:

- five fields separated by any whitespace: minute 0-59, hour 0-23, day of month 1-31, month 1-12
  or ``jan``-``dec``, day of week 0-6 or ``sun``-``sat`` (names in any case; 7 is not Sunday);
- in each, a comma-separated list of ``*`` or ``?`` (the whole range), a number or name, or a range
  ``a-b``, each with an optional ``/step``; ``a/step`` means ``a-<max>/step``; numbers as Go's
  ``strconv.Atoi`` reads them (``05`` and ``+5`` are 5);
- the descriptors ``@yearly`` (``@annually``), ``@monthly``, ``@weekly``, ``@daily``
  (``@midnight``), ``@hourly`` (exactly so spelled).

Where the CronTab example differs, on purpose (each a schedule it could not run as written):
``@every <duration>`` is refused (a CronTab's v1 schedule holds five cron fields, and
``@every`` counts from whenever the controller started, not from the clock), and so is a day that
no month in the schedule has (``0 0 30 2 *``, refused by :mod:`examples.crontab.schedule`),
which a CronJob accepts and never runs.
"""

from __future__ import annotations

import re

__all__ = ["DESCRIPTORS", "FIELDS", "cron_problem", "normalized"]

# (name, lowest, highest) of each field, in order
FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day of month", 1, 31),
    ("month", 1, 12),
    ("day of week", 0, 6),
)
_NAMES: dict[str, tuple[str, ...]] = {
    "month": ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
    "day of week": ("sun", "mon", "tue", "wed", "thu", "fri", "sat"),
}
#: The descriptors robfig/cron's standard parser knows, as five fields.
DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_ATOI = re.compile(r"^[+-]?[0-9]+$")  # Go's strconv.Atoi, base 10
_INT64 = 2**63 - 1


class _Problem(ValueError):
    pass


def cron_problem(expression: str) -> str | None:
    """Why a CronJob would not accept ``expression`` as its schedule (or the CronTab could not run
    it, see the module docstring), or None when it is a valid schedule."""
    try:
        normalized(expression)
    except _Problem as exc:
        return str(exc)
    return None


def normalized(expression: str) -> str:
    """``expression`` as five fields of numbers, ``*``, ranges and steps, which mean to cronsim
    what the original means to robfig/cron (descriptors expanded, names as numbers, ``?`` and
    ``*-x`` as ``*``, ``a/s`` as ``a-max/s``); ValueError naming the field when it is invalid."""
    if not expression.strip():
        raise _Problem("the schedule is empty")
    if "TZ" in expression:  # kube-apiserver's own rule for a new CronJob
        raise _Problem(
            f"{expression!r}: cannot use TZ or CRON_TZ in the schedule, set the timeZone field instead"
        )
    if expression.startswith("@"):
        return _descriptor(expression)
    parts = expression.split()
    if len(parts) != 5:
        return _raise(f"{expression!r} has {len(parts)} space-separated fields, a cron expression has 5")
    return " ".join(
        _field(value, name, low, high, _NAMES.get(name, ()))
        for value, (name, low, high) in zip(parts, FIELDS, strict=True)
    )


def _descriptor(expression: str) -> str:
    fields = DESCRIPTORS.get(expression)
    if fields is not None:
        return fields
    if expression.startswith("@every "):
        raise _Problem(
            f"{expression!r}: @every is not supported by CronTab (its schedule is five cron fields); "
            "write the interval as fields, e.g. '*/5 * * * *'"
        )
    raise _Problem(f"{expression!r} is not a descriptor; known: {', '.join(DESCRIPTORS)}")


def _raise(message: str) -> str:
    raise _Problem(message)


def _field(value: str, name: str, low: int, high: int, names: tuple[str, ...]) -> str:
    items = [_item(item, value, name, low, high, names) for item in value.split(",")]
    if "*" in items:  # robfig's "star" field: a day matches when both day fields match
        return "*"
    return ",".join(items)


def _item(item: str, value: str, name: str, low: int, high: int, names: tuple[str, ...]) -> str:
    range_and_step = item.split("/")
    low_and_high = range_and_step[0].split("-")
    if len(range_and_step) > 2:
        raise _Problem(f"{name} {value!r}: {item!r} has more than one /step")
    step = 1
    if len(range_and_step) == 2:
        step = _number(range_and_step[1], value, name, ())
        if step == 0:
            raise _Problem(f"{name} step in {item!r} must be at least 1")
    if low_and_high[0] in ("*", "?"):
        if step == 1:
            return "*"
        first, last = low, high
    else:
        if len(low_and_high) > 2:
            raise _Problem(f"{name} {value!r}: {item!r} has more than one '-'")
        first = _number(low_and_high[0], value, name, names)
        last = _number(low_and_high[1], value, name, names) if len(low_and_high) == 2 else first
        if len(range_and_step) == 2 and len(low_and_high) == 1:
            last = high  # "a/step" is "a-max/step"
        if not low <= first <= high or not low <= last <= high:
            raise _Problem(f"{name} {value!r} is outside {low}-{high}")
        if first > last:
            raise _Problem(f"{name} range {item!r} runs backwards")
    span = str(first) if first == last else f"{first}-{last}"
    return span if step == 1 else f"{span}/{step}"


def _number(text: str, value: str, name: str, names: tuple[str, ...]) -> int:
    if text.lower() in names:
        return names.index(text.lower()) + (1 if names[0] == "jan" else 0)
    if not _ATOI.match(text) or abs(int(text)) > _INT64:
        kinds = "a number or a name" if names else "a number"
        raise _Problem(
            f"{name} {value!r}: {text!r} is not {kinds} (a field is *, ?, a number"
            f"{', a name' if names else ''}, a range or a list, each with an optional /step)"
        )
    number = int(text)
    if number < 0:
        raise _Problem(f"{name} {value!r}: {text!r} is negative")
    return number
