"""The patches an aggregated API applies: JSON merge patch (RFC 7386) and JSON patch (RFC 6902,
every operation: add, remove, replace, move, copy, test).

Both work on copies and raise :class:`~kubeop.apiserver.status.StatusError` (422 for a patch that
does not apply, ``test`` failing included; 400 for one that is not well formed)."""

from __future__ import annotations

from typing import Any

from kubeop.apiserver.status import StatusError
from kubeop.core.model import copy_json

__all__ = ["json_patch", "merge_patch"]

_MAX_OPERATIONS = 10_000


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return copy_json(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def json_patch(doc: Any, operations: Any) -> Any:
    """RFC 6902 applied to a copy of ``doc``."""
    if not isinstance(operations, list):
        raise StatusError(400, "a JSON patch must be a list of operations")
    if len(operations) > _MAX_OPERATIONS:
        raise StatusError(413, f"a JSON patch of {len(operations)} operations is over {_MAX_OPERATIONS}")
    doc = copy_json(doc)
    for i, op in enumerate(operations):
        if (
            not isinstance(op, dict)
            or not isinstance(op.get("op"), str)
            or not isinstance(op.get("path"), str)
        ):
            raise StatusError(400, f"JSON patch operation {i}: needs 'op' and 'path' strings")
        try:
            doc = _apply(doc, op)
        except _Failed as exc:
            raise StatusError(422, f"JSON patch operation {i} ({op['op']} {op['path']}): {exc}") from None
    return doc


class _Failed(Exception):
    pass


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _Failed(f"path {path!r} must be empty or start with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _index(parent: list[Any], token: str, *, adding: bool) -> int:
    if adding and token == "-":
        return len(parent)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise _Failed(f"{token!r} is not an array index")
    index = int(token)
    if index > len(parent) or (index == len(parent) and not adding):
        raise _Failed(f"index {index} is out of range")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for token in tokens[:-1]:
        if isinstance(cur, dict):
            if token not in cur:
                raise _Failed(f"{token!r} does not exist")
            cur = cur[token]
        elif isinstance(cur, list):
            cur = cur[_index(cur, token, adding=False)]
        else:
            raise _Failed(f"{token!r} is inside a scalar")
    return cur


def _get(doc: Any, path: str) -> Any:
    tokens = _tokens(path)
    if not tokens:
        return doc
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _Failed(f"{path!r} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, adding=False)]
    raise _Failed(f"{path!r} is inside a scalar")


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _tokens(path)
    if not tokens:
        return value
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, adding=True), value)
    else:
        raise _Failed(f"{path!r} is inside a scalar")
    return doc


def _remove(doc: Any, path: str) -> Any:
    tokens = _tokens(path)
    if not tokens:
        raise _Failed("cannot remove the whole document")
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _Failed(f"{path!r} does not exist")
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, adding=False)]
    else:
        raise _Failed(f"{path!r} is inside a scalar")
    return doc


def _apply(doc: Any, op: dict[str, Any]) -> Any:
    kind, path = op["op"], op["path"]
    if kind in ("add", "replace", "test") and "value" not in op:
        raise _Failed("needs a 'value'")
    if kind in ("move", "copy") and not isinstance(op.get("from"), str):
        raise _Failed("needs a 'from' string")
    if kind == "add":
        return _add(doc, path, copy_json(op["value"]))
    if kind == "remove":
        return _remove(doc, path)
    if kind == "replace":
        _get(doc, path)
        return (
            _add(_remove(doc, path), path, copy_json(op["value"]))
            if _tokens(path)
            else copy_json(op["value"])
        )
    if kind == "move":
        source = op["from"]
        if path.startswith(source + "/"):
            raise _Failed("cannot move a value into itself")
        value = _get(doc, source)
        return _add(_remove(doc, source), path, value)
    if kind == "copy":
        return _add(doc, path, copy_json(_get(doc, op["from"])))
    if kind == "test":
        if not _equal(_get(doc, path), op["value"]):
            raise _Failed("the test failed: the value differs")
        return doc
    raise _Failed(f"unknown operation {kind!r}")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)
