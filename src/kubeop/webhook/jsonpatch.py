"""RFC 6902 JSON patches computed from two JSON documents: what a mutating webhook answers.

A defaulting handler returns the changed object; :func:`diff` turns (original, changed) into the
operations the API server applies. Objects are compared key by key (``add`` / ``remove`` /
``replace`` of the smallest differing member); a list that changed is replaced whole, because
element-wise list patches are fragile against the server's own view of the list and defaulting
rarely touches lists. Keys are escaped per RFC 6901 (``~`` -> ``~0``, ``/`` -> ``~1``), so a
label such as ``app.kubernetes.io/name`` is addressed correctly.

The patch is exact: applying it to ``original`` yields ``changed`` (a property test checks it).
"""

from __future__ import annotations

from typing import Any

__all__ = ["apply", "diff", "escape"]

Operation = dict[str, Any]


def escape(key: str) -> str:
    """One JSON Pointer reference token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def diff(original: Any, changed: Any) -> list[Operation]:
    """The JSON patch that turns ``original`` into ``changed`` (empty when they are equal)."""
    ops: list[Operation] = []
    _diff(original, changed, "", ops)
    return ops


def _same(a: Any, b: Any) -> bool:
    # JSON distinguishes true from 1 and 1 from 1.0 only by type; Python's == does not.
    return type(a) is type(b) and a == b


def _diff(a: Any, b: Any, path: str, ops: list[Operation]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key, value in a.items():
            if key not in b:
                ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
            else:
                _diff(value, b[key], f"{path}/{escape(key)}", ops)
        for key, value in b.items():
            if key not in a:
                ops.append({"op": "add", "path": f"{path}/{escape(key)}", "value": value})
        return
    if isinstance(a, list) and isinstance(b, list):
        if len(a) == len(b) and all(_deep_same(x, y) for x, y in zip(a, b, strict=True)):
            return
        ops.append({"op": "replace", "path": path, "value": b})
        return
    if not _same(a, b):
        ops.append({"op": "replace", "path": path, "value": b})


def _deep_same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_deep_same(v, b[k]) for k, v in a.items())
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_deep_same(x, y) for x, y in zip(a, b, strict=True))
    return _same(a, b)


def apply(doc: Any, ops: list[Operation]) -> Any:
    """Apply ``add`` / ``remove`` / ``replace`` operations to a copy of ``doc`` (for tests and checks)."""
    import copy

    doc = copy.deepcopy(doc)
    for op in ops:
        tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
        if not tokens:
            if op["op"] == "remove":
                raise ValueError("cannot remove the whole document")
            doc = copy.deepcopy(op["value"])
            continue
        parent = doc
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last: Any = int(tokens[-1]) if isinstance(parent, list) and tokens[-1] != "-" else tokens[-1]
        if op["op"] == "remove":
            del parent[last]
        elif op["op"] == "add" and isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else last, copy.deepcopy(op["value"]))
        elif op["op"] in ("add", "replace"):
            if op["op"] == "replace" and (last not in parent if isinstance(parent, dict) else False):
                raise ValueError(f"replace of a missing member {op['path']}")
            parent[last] = copy.deepcopy(op["value"])
        else:
            raise ValueError(f"unsupported operation {op['op']!r}")
    return doc
