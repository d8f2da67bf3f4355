"""The patch formats a fake cluster applies: JSON merge, JSON patch and strategic merge.

Each function takes the stored object (never modified) and returns a new one, or raises
:class:`PatchError` with the HTTP status and message kube-apiserver would answer with.

Strategic merge knows the list keys of the built-in fields operators write (containers, ports,
env, volumes, volume mounts, conditions, ...) and the ``$patch: delete|replace`` directive; a
list it has no key for is replaced whole, as for a merge patch. ``$setElementOrder`` and
``$deleteFromPrimitiveList`` are not implemented and raise a clear error.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["PatchError", "json_patch", "merge_patch", "strategic_merge_patch"]


class PatchError(Exception):
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


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(422, "Invalid", f"JSON patch path {path!r} must start with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _walk(doc: Any, tokens: list[str], path: str) -> Any:
    for token in tokens:
        if isinstance(doc, dict):
            if token not in doc:
                raise PatchError(422, "Invalid", f"JSON patch: path {path!r} does not exist (no {token!r})")
            doc = doc[token]
        elif isinstance(doc, list):
            doc = doc[_index(doc, token, path, allow_end=False)]
        else:
            raise PatchError(422, "Invalid", f"JSON patch: path {path!r} goes through a scalar")
    return doc


def _index(doc: list[Any], token: str, path: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(doc)
    if not token.isdigit():
        raise PatchError(422, "Invalid", f"JSON patch: {token!r} in {path!r} is not an array index")
    i = int(token)
    if i > len(doc) or (i == len(doc) and not allow_end):
        raise PatchError(422, "Invalid", f"JSON patch: index {i} in {path!r} is out of range")
    return i


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _tokens(path)
    if not tokens:
        return value
    parent = _walk(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, allow_end=True), value)
    else:
        raise PatchError(422, "Invalid", f"JSON patch: cannot add {path!r} under a scalar")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    tokens = _tokens(path)
    if not tokens:
        raise PatchError(422, "Invalid", "JSON patch: cannot remove the whole object")
    parent = _walk(doc, tokens[:-1], path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(422, "Invalid", f"JSON patch: cannot remove {path!r}: it does not exist")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, path, allow_end=False))
    raise PatchError(422, "Invalid", f"JSON patch: cannot remove {path!r} under a scalar")


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902 (add, remove, replace, move, copy, test); a failed ``test`` is a 422."""
    if not isinstance(ops, list):
        raise PatchError(400, "BadRequest", "a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        if (
            not isinstance(op, dict)
            or not isinstance(op.get("op"), str)
            or not isinstance(op.get("path"), str)
        ):
            raise PatchError(400, "BadRequest", f"JSON patch: malformed operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(400, "BadRequest", f"JSON patch: {kind} of {path!r} has no value")
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            doc, _ = _remove(doc, path)
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind in ("move", "copy"):
            source = op.get("from")
            if not isinstance(source, str):
                raise PatchError(400, "BadRequest", f"JSON patch: {kind} to {path!r} has no 'from'")
            if kind == "move":
                doc, value = _remove(doc, source)
            else:
                value = copy.deepcopy(_walk(doc, _tokens(source), source))
            doc = _add(doc, path, value)
        elif kind == "test":
            if _walk(doc, _tokens(path), path) != op["value"]:
                raise PatchError(
                    422, "Invalid", f"JSON patch: test of {path!r} failed: the value is not {op['value']!r}"
                )
        else:
            raise PatchError(400, "BadRequest", f"JSON patch: unknown operation {kind!r}")
    return doc


# List fields of built-in kinds that strategic merge merges by a key instead of replacing.
_MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "env": "name",
    "ports": "containerPort",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "tolerations": "key",
    "topologySpreadConstraints": "topologyKey",
    "conditions": "type",
    "ownerReferences": "uid",
    "volumeClaimTemplates": "name",
    "webhooks": "name",
}
# Lists of scalars that strategic merge treats as sets (merged, not replaced).
_SET_LISTS = frozenset({"finalizers"})


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge for built-in kinds (see the module docstring for what it knows)."""
    return _smp(target, patch, "")


def _smp(target: Any, patch: Any, where: str) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            if key == "$patch":
                continue
            raise PatchError(
                422, "Invalid", f"strategic merge patch: {key} is not implemented by the fake cluster"
            )
        if key.startswith("$setElementOrder/") or key.startswith("$deleteFromPrimitiveList/"):
            raise PatchError(
                422, "Invalid", f"strategic merge patch: {key} is not implemented by the fake cluster"
            )
        path = f"{where}.{key}"
        if value is None:
            out.pop(key, None)
        elif isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = _merge_list(key, out[key], value, path)
        else:
            merged = _smp(out.get(key), value, path)
            if merged is None and isinstance(value, dict):
                out.pop(key, None)
            else:
                out[key] = merged
    return out


def _merge_list(key: str, current: list[Any], patch: list[Any], where: str) -> list[Any]:
    if key in _SET_LISTS:
        return [*current, *(v for v in patch if v not in current)]
    merge_key = _MERGE_KEYS.get(key)
    if merge_key is None or not all(isinstance(v, dict) for v in patch):
        return copy.deepcopy(patch)
    if any(v.get("$patch") == "replace" for v in patch):
        return [copy.deepcopy({k: x for k, x in v.items() if k != "$patch"}) for v in patch if len(v) > 1]
    out = [copy.deepcopy(v) for v in current]
    for item in patch:
        if merge_key not in item:
            raise PatchError(
                422, "Invalid", f"strategic merge patch: an item of {where} has no merge key {merge_key!r}"
            )
        index = next(
            (i for i, v in enumerate(out) if isinstance(v, dict) and v.get(merge_key) == item[merge_key]),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del out[index]
        elif index is None:
            out.append({k: copy.deepcopy(v) for k, v in item.items() if k != "$patch"})
        else:
            out[index] = _smp(out[index], item, where)
    return out
