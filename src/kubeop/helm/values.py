"""A release's values: the custom resource's spec, with the operator's override values on top.

The spec is used whole (every field is a chart value); ``overrideValues`` from watches.yaml win
over it. Override keys use Helm's ``--set`` path syntax and their values Helm's ``--set`` typing,
so an override means here what it means on a ``helm`` command line:

- ``image.tag`` (nested maps, created as needed; a non-map in the way is replaced),
  ``hosts[0].name`` (list elements, the list grown with nulls), ``a\\.b`` (a literal dot);
- ``true`` / ``false`` (any case) are booleans, ``null`` is null, integers without a leading zero
  are integers, ``{a,b}`` is a list, anything else (``1.5``, ``007``) is a string.

Unlike ``--set``, a comma inside a value does not start another assignment: one override is one
value. The result is passed to Helm as one values file, so ``helm get values`` shows exactly this.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["ValuesError", "parse_path", "release_values", "set_path", "typed_value"]

_INT = re.compile(r"^[+-]?[0-9]+$")
_INT64 = (-(2**63), 2**63 - 1)

Path = list[str | int]


class ValuesError(ValueError):
    """An override key that is not a valid ``--set`` path."""


def release_values(
    spec: Mapping[str, Any] | None, overrides: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The values of a release: a deep copy of ``spec`` with each override set on it (overrides win)."""
    values: dict[str, Any] = copy.deepcopy(dict(spec)) if spec else {}
    for key, raw in (overrides or {}).items():
        set_path(values, parse_path(key), typed_value(raw))
    return values


def typed_value(raw: str) -> Any:
    """A ``--set`` value as Helm types it (see the module docstring)."""
    if len(raw) >= 2 and raw[0] == "{" and raw[-1] == "}":
        inner = raw[1:-1]
        return [] if not inner else [typed_value(part) for part in inner.split(",")]
    lowered = raw.lower()
    if lowered == "true":
        return True
    if lowered == "false":
        return False
    if lowered == "null":
        return None
    if raw == "0":
        return 0
    if raw and raw[0] != "0" and _INT.match(raw):
        number = int(raw)
        if _INT64[0] <= number <= _INT64[1]:
            return number
    return raw


def parse_path(key: str) -> Path:
    """``a.b[0].c`` -> ``["a", "b", 0, "c"]``; a backslash escapes the next character."""
    n = len(key)

    def read_name(i: int) -> tuple[str, int]:
        buf: list[str] = []
        while i < n and key[i] not in ".[":
            if key[i] == "\\":
                if i + 1 >= n:
                    raise ValuesError(f"override key {key!r} ends with a lone backslash")
                buf.append(key[i + 1])
                i += 2
            else:
                buf.append(key[i])
                i += 1
        if not buf:
            raise ValuesError(f"override key {key!r} has an empty name at position {i}")
        return "".join(buf), i

    name, i = read_name(0)
    path: Path = [name]
    while i < n:
        if key[i] == ".":
            name, i = read_name(i + 1)
            path.append(name)
            continue
        end = key.find("]", i)
        if end == -1:
            raise ValuesError(f"override key {key!r}: '[' at position {i} is never closed")
        index_text = key[i + 1 : end]
        if not index_text.isdigit():
            raise ValuesError(f"override key {key!r}: list index {index_text!r} is not a number")
        path.append(int(index_text))
        i = end + 1
        if i < n and key[i] not in ".[":
            raise ValuesError(f"override key {key!r}: expected '.' or '[' after ']' at position {i}")
    return path


def set_path(values: dict[str, Any], path: Path, value: Any) -> None:
    """Set ``value`` at ``path`` in ``values`` (in place), creating maps and growing lists."""
    if not path or not isinstance(path[0], str):
        raise ValuesError("a values path starts with a key")
    target: Any = values
    for step, nxt in itertools.pairwise(path):
        child_default: Any = [] if isinstance(nxt, int) else {}
        if isinstance(step, str):
            child = target.get(step)
            if not isinstance(child, type(child_default)):
                child = child_default
                target[step] = child
        else:
            _grow(target, step)
            child = target[step]
            if not isinstance(child, type(child_default)):
                child = child_default
                target[step] = child
        target = child
    last = path[-1]
    if isinstance(last, str):
        target[last] = value
    else:
        _grow(target, last)
        target[last] = value


def _grow(items: list[Any], index: int) -> None:
    if index >= len(items):
        items.extend([None] * (index + 1 - len(items)))
