"""The one patch engine of kubeop's servers (the aggregated API server and the fake cluster):
JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

Every function takes the current object (never modified) and returns a new one, or raises
:class:`PatchError` with the HTTP code, reason and message kube-apiserver answers with: 400
BadRequest for a patch that is not well formed (not a list of operations, an operation without
``op``/``path``/``value``/``from``, an unknown operation, a pointer that is not RFC 6901), 422
Invalid for one that does not apply (a missing path, an index out of range, a failed ``test``).
Messages name the operation's index and path.

JSON patch is strict as RFC 6902 and 6901 are: array indexes are decimal without leading zeros,
``-`` (after the last item) only where a value is added, ``~0``/``~1`` the only escapes, ``test``
compares JSON values (``1`` is not ``true``, ``1`` is ``1.0``), a ``move`` into its own child
is refused. (The ``jsonpatch`` package would add a runtime dependency and its own exceptions to
translate; these 150 lines answer Status errors directly.)

Strategic merge patch merges a list by a key (containers by ``name``) or as a set of scalars
where ``rules`` says so, and replaces it whole otherwise; it knows the ``$patch: replace|delete``
directives of maps and of list items. ``$setElementOrder``, ``$retainKeys`` and
``$deleteFromPrimitiveList`` are 422 (not implemented).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["ListRule", "PatchError", "json_patch", "merge_patch", "strategic_merge_patch"]

_MAX_OPERATIONS = 10_000
#: What ``copy`` operations may copy in all, encoded: a small patch must not grow a document
#: without bound (twenty copies of a doubling subtree are a million times its size).
_COPY_LIMIT = 3 * 1024 * 1024


class PatchError(Exception):
    """A patch refused: ``code`` (400, 413 or 422), ``reason`` (BadRequest, Invalid...), ``message``."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge recursively, ``null`` deletes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# -- JSON patch ---------------------------------------------------------------------------------


class _Malformed(Exception):
    pass


class _Failed(Exception):
    pass


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 (add, remove, replace, move, copy, test) applied to a copy of ``target``."""
    if not isinstance(operations, list):
        raise PatchError(400, "BadRequest", "a JSON patch must be a list of operations")
    if len(operations) > _MAX_OPERATIONS:
        raise PatchError(
            413,
            "RequestEntityTooLarge",
            f"a JSON patch of {len(operations)} operations is over {_MAX_OPERATIONS}",
        )
    doc = copy.deepcopy(target)
    copied = 0
    for i, op in enumerate(operations):
        if (
            not isinstance(op, dict)
            or not isinstance(op.get("op"), str)
            or not isinstance(op.get("path"), str)
        ):
            raise PatchError(400, "BadRequest", f"JSON patch operation {i}: needs 'op' and 'path' strings")
        where = f"JSON patch operation {i} ({op['op']} {op['path']!r})"
        try:
            if op["op"] == "copy" and isinstance(op.get("from"), str):
                source = op["from"]
                copied += len(orjson.dumps(_get(doc, _tokens(source), source), default=str))
                if copied > _COPY_LIMIT:
                    raise PatchError(
                        413,
                        "RequestEntityTooLarge",
                        f"{where}: the patch's copy operations copy over {_COPY_LIMIT} bytes in all; "
                        "send the values instead",
                    )
            doc = _operate(doc, op)
        except _Malformed as exc:
            raise PatchError(400, "BadRequest", f"{where}: {exc}") from None
        except _Failed as exc:
            raise PatchError(422, "Invalid", f"{where}: {exc}") from None
    return doc


def _operate(doc: Any, op: dict[str, Any]) -> Any:
    kind, path = op["op"], op["path"]
    if kind not in ("add", "remove", "replace", "move", "copy", "test"):
        raise _Malformed(f"unknown operation {kind!r} (add, remove, replace, move, copy or test)")
    if kind in ("add", "replace", "test") and "value" not in op:
        raise _Malformed("needs a 'value'")
    if kind in ("move", "copy") and not isinstance(op.get("from"), str):
        raise _Malformed("needs a 'from' string")
    tokens = _tokens(path)
    if kind == "add":
        return _add(doc, tokens, path, copy.deepcopy(op["value"]))
    if kind == "remove":
        return _remove(doc, tokens, path)[0]
    if kind == "replace":
        if not tokens:
            return copy.deepcopy(op["value"])
        doc, _ = _remove(doc, tokens, path)
        return _add(doc, tokens, path, copy.deepcopy(op["value"]))
    if kind == "test":
        if not _equal(_get(doc, tokens, path), op["value"]):
            raise _Failed(f"the test failed: the value at {path!r} is not {op['value']!r}")
        return doc
    source: str = op["from"]
    source_tokens = _tokens(source)
    if kind == "move":
        if source_tokens == tokens:
            return doc
        if tokens[: len(source_tokens)] == source_tokens:
            raise _Failed(f"cannot move {source!r} into its own child {path!r}")
        doc, value = _remove(doc, source_tokens, source)
        return _add(doc, tokens, path, value)
    return _add(doc, tokens, path, copy.deepcopy(_get(doc, source_tokens, source)))


def _tokens(path: str) -> list[str]:
    """An RFC 6901 pointer's reference tokens, unescaped."""
    if path == "":
        return []
    if not path.startswith("/"):
        raise _Malformed(f"the path {path!r} must be empty or start with '/'")
    out = []
    for token in path[1:].split("/"):
        rest = token.replace("~0", "").replace("~1", "")
        if "~" in rest:
            raise _Malformed(f"{token!r} in {path!r} has a '~' that is not ~0 or ~1")
        out.append(token.replace("~1", "/").replace("~0", "~"))
    return out


def _index(items: list[Any], token: str, path: str, *, adding: bool) -> int:
    if token == "-":
        if adding:
            return len(items)
        raise _Failed(f"'-' in {path!r} names no item (it is only where a value is added)")
    if not token.isascii() or not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise _Failed(f"{token!r} in {path!r} is not an array index")
    index = int(token)
    if index > len(items) or (index == len(items) and not adding):
        raise _Failed(f"index {index} in {path!r} is out of range (the array has {len(items)} items)")
    return index


def _get(doc: Any, tokens: list[str], path: str) -> Any:
    for token in tokens:
        if isinstance(doc, dict):
            if token not in doc:
                raise _Failed(f"the path {path!r} does not exist (no {token!r})")
            doc = doc[token]
        elif isinstance(doc, list):
            doc = doc[_index(doc, token, path, adding=False)]
        else:
            raise _Failed(f"the path {path!r} goes through a scalar at {token!r}")
    return doc


def _add(doc: Any, tokens: list[str], path: str, value: Any) -> Any:
    if not tokens:
        return value
    parent, last = _get(doc, tokens[:-1], path), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, adding=True), value)
    else:
        raise _Failed(f"cannot add {path!r}: its parent is a scalar")
    return doc


def _remove(doc: Any, tokens: list[str], path: str) -> tuple[Any, Any]:
    """``doc`` without the value at ``path``, and that value."""
    if not tokens:
        raise _Failed("cannot remove the whole document")
    parent, last = _get(doc, tokens[:-1], path), tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _Failed(f"the path {path!r} does not exist")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, path, adding=False))
    raise _Failed(f"cannot remove {path!r}: its parent is a scalar")


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: booleans are not numbers, maps and arrays compare deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


# -- strategic merge patch ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListRule:
    """How strategic merge treats one list: ``key`` set, its items (maps) merge by that field;
    ``key`` None, its items (scalars) merge as a set."""

    key: str | None = None


ListRules = Callable[[tuple[str, ...]], ListRule | None]
"""The rule of the list at a path of field names from the object's root (list items add no
name), or None: the list is replaced whole."""


def strategic_merge_patch(target: Any, patch: Any, rules: ListRules) -> Any:
    """Strategic merge of ``patch`` into a copy of ``target``; lists merge as ``rules`` say."""
    if not isinstance(patch, dict):
        raise PatchError(400, "BadRequest", "a strategic merge patch must be a JSON object")
    out = _smp(target, patch, (), rules)
    return {} if out is None else out


def _smp(target: Any, patch: Any, path: tuple[str, ...], rules: ListRules) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    if directive is not None:
        raise PatchError(
            422, "Invalid", f"strategic merge patch: unknown $patch {directive!r} at {_dotted(path)}"
        )
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key == "$patch":
            continue
        if key.startswith("$"):
            raise PatchError(
                422, "Invalid", f"strategic merge patch: {key} (at {_dotted(path)}) is not implemented"
            )
        here = (*path, key)
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list):
            rule = rules(here)
            current = out.get(key)
            out[key] = (
                _merge_list(current, value, here, rule, rules)
                if rule is not None and isinstance(current, list)
                else _strip(value)
            )
        else:
            merged = _smp(out.get(key), value, here, rules)
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
    return out


def _merge_list(
    current: list[Any], patch: list[Any], path: tuple[str, ...], rule: ListRule, rules: ListRules
) -> list[Any]:
    if rule.key is None:
        return [*copy.deepcopy(current), *(copy.deepcopy(v) for v in patch if v not in current)]
    if not all(isinstance(v, dict) for v in patch):
        raise PatchError(
            422,
            "Invalid",
            f"strategic merge patch: the items of {_dotted(path)} must be objects (merged by {rule.key!r})",
        )
    if any(v.get("$patch") == "replace" for v in patch):
        return [_strip(v) for v in patch if v.get("$patch") != "replace"]
    out = copy.deepcopy(current)
    for item in patch:
        if rule.key not in item:
            raise PatchError(
                422,
                "Invalid",
                f"strategic merge patch: an item of {_dotted(path)} has no merge key {rule.key!r}",
            )
        index = next(
            (i for i, v in enumerate(out) if isinstance(v, dict) and v.get(rule.key) == item[rule.key]), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del out[index]
        elif index is None:
            out.append(_strip(item))
        else:
            out[index] = _smp(out[index], item, path, rules)
    return out


def _strip(value: Any) -> Any:
    """A copy of a patch value without its directives (what a new item or a replaced list holds)."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _dotted(path: tuple[str, ...]) -> str:
    return "." + ".".join(path) if path else "the object"
