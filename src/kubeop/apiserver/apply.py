"""Server-side apply and field ownership (``metadata.managedFields``), a faithful subset of
structured-merge-diff, the library kube-apiserver uses.

Every write records who set which fields. A field set is a set of paths; a path is a tuple of
elements as ``fieldsV1`` spells them: ``f:<field>``, ``k:<json of the key fields>`` (an item of a
``x-kubernetes-list-type: map`` list), ``v:<json value>`` (an item of a ``set`` list). Granular
maps are owned key by key; atomic lists and maps (``x-kubernetes-map-type: atomic``) as one
leaf. ``apiVersion``, ``kind``, ``metadata`` other than labels, annotations, finalizers and
ownerReferences, and (with a status subresource) the status of the main resource are nobody's.

- An **update** (create, PUT, merge / JSON / strategic patch) by manager M (``fieldManager``, else
  the User-Agent up to its first ``/``) takes the fields whose values it changed: they join M's
  ``Update`` entry and leave every other entry. Updates never conflict.
- An **apply** by M merges the applied configuration into the object (maps by key, map lists by
  their keys, sets by value, atomic values replaced). A leaf it would change that another
  manager owns is a **conflict**: 409 naming each field and manager, unless ``force=true``, which
  takes the fields over. Fields M applied before and leaves out now are removed, unless another
  manager owns them too. M's ``Apply`` entry becomes exactly the applied fields.

Left out (documented): field sets of several versions (one version is served), the
``$setElementOrder``-like reordering of list items (merged items keep the live order, new ones
go last), ``x-kubernetes-list-map-keys`` that are not present in an applied item (an error),
and the "reset fields" strategies beyond status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from kubeop.apiserver.status import Cause, StatusError
from kubeop.core.model import copy_json

__all__ = ["Ownership", "manager_name"]

Path = tuple[str, ...]
_MISSING: Any = object()
_OWNED_META = ("labels", "annotations", "finalizers", "ownerReferences")
_META_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        "ownerReferences": {
            "type": "array",
            "items": {"type": "object"},
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["uid"],
        },
    },
}


def manager_name(query: Mapping[str, str], user_agent: str | None) -> str:
    """The field manager of a write: ``?fieldManager=``, else the User-Agent's product, as
    kube-apiserver names it."""
    name = query.get("fieldManager") or (user_agent or "").partition("/")[0] or "unknown"
    if len(name) > 128:
        raise StatusError(
            422,
            f"fieldManager: {name[:40]!r}... is longer than 128 characters; send a shorter fieldManager",
            causes=[("FieldValueTooLong", "longer than 128 characters", "fieldManager")],
        )
    return name


class Ownership:
    """Field ownership of one served kind: ``schema`` is the object's OpenAPI v3 schema,
    ``api_version`` what the entries record, ``status_subresource`` whether status is set apart."""

    def __init__(self, schema: Mapping[str, Any], api_version: str, *, status_subresource: bool) -> None:
        properties = dict(schema.get("properties") or {})
        properties["metadata"] = _META_SCHEMA
        self._schema: dict[str, Any] = {**schema, "properties": properties}
        self._api_version = api_version
        self._status_subresource = status_subresource

    # -- updates ----------------------------------------------------------------------------

    def record_update(
        self, old: Mapping[str, Any] | None, new: dict[str, Any], manager: str, subresource: str, now: str
    ) -> None:
        """Set ``new``'s managedFields: the entries of ``old`` (or those ``new`` brings, when it
        sets managedFields itself), with the fields this write changed given to ``manager``."""
        meta = new["metadata"]
        given = meta.get("managedFields")
        if isinstance(given, list) and (old is None or given != old["metadata"].get("managedFields")):
            entries = _parse_entries(given)
        else:
            entries = _parse_entries((old or {}).get("metadata", {}).get("managedFields") or [])
        before = self._fieldset(old, subresource) if old is not None else {}
        after = self._fieldset(new, subresource)
        # a map or list already there is not changed by a change inside it (only leaves compare)
        changed = {
            p for p, leaf in after.items() if p not in before or (leaf and _value(old, p) != _value(new, p))
        }
        removed = set(before) - set(after)
        for entry in entries:
            entry.fields -= changed | removed
        if changed:
            mine = next(
                (
                    e
                    for e in entries
                    if (e.manager, e.operation, e.subresource) == (manager, "Update", subresource)
                ),
                None,
            )
            if mine is None:
                mine = _Entry(manager, "Update", subresource, set(), now)
                entries.append(mine)
            mine.fields |= changed
            mine.time = now
        self._store(meta, entries)

    # -- apply ------------------------------------------------------------------------------

    def apply(
        self,
        live: dict[str, Any] | None,
        applied: dict[str, Any],
        manager: str,
        subresource: str,
        *,
        force: bool,
        now: str,
    ) -> dict[str, Any]:
        """``live`` (None: the object is created) with ``applied`` merged in as ``manager``'s
        configuration, managedFields updated; 409 on conflicts unless ``force``."""
        base = live if live is not None else {"metadata": {}}
        entries = _parse_entries(base["metadata"].get("managedFields") or [])
        fields = self._fieldset(applied, subresource)
        merged: dict[str, Any] = self._merge(
            copy_json(base), self._owned_part(applied, subresource), self._schema
        )
        conflicts: list[tuple[str, Path]] = []
        for entry in entries:
            if entry.manager == manager and entry.operation == "Apply" and entry.subresource == subresource:
                continue
            for path in sorted(entry.fields & {p for p, leaf in fields.items() if leaf}):
                if _value(base, path) is not _MISSING and _value(base, path) != _value(merged, path):
                    conflicts.append((entry.manager, path))
        if conflicts and not force:
            raise _conflict_error(conflicts)
        taken = {path for _, path in conflicts}
        mine = next(
            (
                e
                for e in entries
                if (e.manager, e.operation, e.subresource) == (manager, "Apply", subresource)
            ),
            None,
        )
        others: set[Path] = set()
        for entry in entries:
            if entry is not mine:
                entry.fields -= taken
                others |= entry.fields
        if mine is not None:
            # the metadata map itself is the server's: only its owned fields may go
            kept = {("f:metadata",)} | {path[:i] for path in others for i in range(1, len(path) + 1)}
            for path in sorted(mine.fields - set(fields) - kept, key=len, reverse=True):
                _drop(merged, path)
        else:
            mine = _Entry(manager, "Apply", subresource, set(), now)
            entries.append(mine)
        if mine.fields != set(fields):
            mine.time = now
        mine.fields = set(fields)
        self._store(merged["metadata"], entries)
        return merged

    # -- field sets ---------------------------------------------------------------------------

    def _owned_part(self, obj: Mapping[str, Any], subresource: str) -> dict[str, Any]:
        """The part of ``obj`` that anyone may own through ``subresource``."""
        meta = obj.get("metadata") or {}
        owned = {k: meta[k] for k in _OWNED_META if k in meta}
        # no owned metadata is no field (an empty map would be a leaf, "changed" by any write)
        out: dict[str, Any] = {"metadata": owned} if owned else {}
        for key, value in obj.items():
            if key in ("apiVersion", "kind", "metadata"):
                continue
            if self._status_subresource and (key == "status") != (subresource == "status"):
                continue
            out[key] = value
        return out

    def _fieldset(self, obj: Mapping[str, Any] | None, subresource: str) -> dict[Path, bool]:
        """Every owned path of ``obj``, mapped to whether it is a leaf."""
        out: dict[Path, bool] = {}
        if obj is not None:
            _walk(self._owned_part(obj, subresource), self._schema, (), out)
        return out

    def _merge(self, live: Any, applied: Any, schema: Mapping[str, Any]) -> Any:
        if (
            isinstance(applied, dict)
            and isinstance(live, dict)
            and schema.get("x-kubernetes-map-type") != "atomic"
        ):
            for key, value in applied.items():
                child = _child(schema, key)
                if value is None:
                    live.pop(key, None)
                else:
                    live[key] = self._merge(live.get(key, _MISSING), value, child)
            return live
        if isinstance(applied, list) and isinstance(live, list):
            kind = schema.get("x-kubernetes-list-type")
            items = schema.get("items") or {}
            if kind == "set":
                return [*live, *(copy_json(v) for v in applied if v not in live)]
            if kind == "map":
                keys = list(schema.get("x-kubernetes-list-map-keys") or ())
                out = list(live)
                for item in applied:
                    key = _item_key(item, keys)
                    index = next(
                        (i for i, v in enumerate(out) if isinstance(v, dict) and _item_key(v, keys) == key),
                        None,
                    )
                    if index is None:
                        out.append(copy_json(item))
                    else:
                        out[index] = self._merge(out[index], item, items)
                return out
        return copy_json(applied)

    def _store(self, meta: dict[str, Any], entries: list[_Entry]) -> None:
        kept = [e.dump(self._api_version) for e in entries if e.fields]
        if kept:
            meta["managedFields"] = kept
        else:
            meta.pop("managedFields", None)


class _Entry:
    __slots__ = ("fields", "manager", "operation", "subresource", "time")

    def __init__(self, manager: str, operation: str, subresource: str, fields: set[Path], time: str) -> None:
        self.manager, self.operation, self.subresource = manager, operation, subresource
        self.fields, self.time = fields, time

    def dump(self, api_version: str) -> dict[str, Any]:
        out: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": _to_fields_v1(self.fields),
        }
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def _parse_entries(raw: Iterable[Any]) -> list[_Entry]:
    entries = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("manager", ""), str):
            raise StatusError(
                422,
                f"metadata.managedFields[{i}] must be an object with a manager; send [] to reset them",
                causes=[("FieldValueInvalid", "not a managedFields entry", f"metadata.managedFields[{i}]")],
            )
        fields = item.get("fieldsV1") or {}
        if not isinstance(fields, dict):
            raise StatusError(422, f"metadata.managedFields[{i}].fieldsV1 must be an object")
        entries.append(
            _Entry(
                item.get("manager", ""),
                "Apply" if item.get("operation") == "Apply" else "Update",
                str(item.get("subresource") or ""),
                _from_fields_v1(fields),
                str(item.get("time") or ""),
            )
        )
    return entries


def _walk(value: Any, schema: Mapping[str, Any], path: Path, out: dict[Path, bool]) -> None:
    if isinstance(value, dict) and schema.get("x-kubernetes-map-type") != "atomic" and (value or not path):
        if path:
            out[path] = False
        for key, child in value.items():
            _walk(child, _child(schema, key), (*path, f"f:{key}"), out)
        return
    kind = schema.get("x-kubernetes-list-type")
    if isinstance(value, list) and kind in ("set", "map"):
        out[path] = False
        keys = list(schema.get("x-kubernetes-list-map-keys") or ())
        for item in value:
            if kind == "set":
                out[(*path, "v:" + _json(item))] = True
            elif isinstance(item, dict):
                _walk_item(item, keys, schema.get("items") or {}, path, out)
        return
    out[path] = True


def _walk_item(
    item: dict[str, Any], keys: list[str], schema: Mapping[str, Any], path: Path, out: dict[Path, bool]
) -> None:
    here = (*path, "k:" + _json(_item_key(item, keys)))
    out[here] = False
    for key, child in item.items():
        _walk(child, _child(schema, key), (*here, f"f:{key}"), out)


def _child(schema: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    properties = schema.get("properties") or {}
    if key in properties:
        return properties[key]  # type: ignore[no-any-return]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else {}


def _item_key(item: Any, keys: list[str]) -> dict[str, Any]:
    if not isinstance(item, dict) or any(k not in item for k in keys):
        raise StatusError(
            422,
            f"an item of a list keyed by {keys} lacks a key field; give every item {', '.join(keys)}",
            causes=[("FieldValueRequired", f"needs {keys}", ",".join(keys))],
        )
    return {k: item[k] for k in keys}


def _json(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _value(obj: Any, path: Path) -> Any:
    """The value at ``path`` in ``obj``, or ``_MISSING``."""
    for element in path:
        kind, _, text = element.partition(":")
        if kind == "f" and isinstance(obj, dict):
            obj = obj.get(text, _MISSING)
        elif kind == "k" and isinstance(obj, list):
            key = orjson.loads(text)
            obj = next(
                (v for v in obj if isinstance(v, dict) and all(v.get(k) == x for k, x in key.items())),
                _MISSING,
            )
        elif kind == "v" and isinstance(obj, list):
            wanted = orjson.loads(text)
            obj = wanted if wanted in obj else _MISSING
        else:
            return _MISSING
        if obj is _MISSING:
            return _MISSING
    return obj


def _drop(obj: Any, path: Path) -> None:
    parent = _value(obj, path[:-1])
    kind, _, text = path[-1].partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(text, None)
    elif kind in ("k", "v") and isinstance(parent, list):
        target = _value(obj, path)
        if target is not _MISSING:
            parent.remove(target)


def _to_fields_v1(fields: set[Path]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    parents = {path[:i] for path in fields for i in range(len(path))}
    for path in sorted(fields):
        node = tree
        for element in path:
            node = node.setdefault(element, {})
        if path in parents:
            node["."] = {}
    return tree


def _from_fields_v1(tree: Mapping[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for element, child in tree.items():
        if element == ".":
            out.add(prefix)
            continue
        here = (*prefix, element)
        if isinstance(child, dict) and any(k != "." for k in child):
            out |= _from_fields_v1(child, here)
            if "." in child:
                out.add(here)
        else:
            out.add(here)
    return out


def _conflict_error(conflicts: list[tuple[str, Path]]) -> StatusError:
    causes: list[Cause] = [
        ("FieldManagerConflict", f'conflict with "{who}"', _dotted(p)) for who, p in conflicts
    ]
    text = "; ".join(f'conflict with "{who}": {_dotted(p)}' for who, p in conflicts)
    count = len(conflicts)
    return StatusError(
        409,
        f"Apply failed with {count} conflict{'s' if count > 1 else ''}: {text} (send force=true to take "
        "these fields over, or leave them out of the applied configuration)",
        causes=causes,
    )


def _dotted(path: Path) -> str:
    out = []
    for element in path:
        kind, _, text = element.partition(":")
        out.append(f".{text}" if kind == "f" else f"[{text}]" if kind == "k" else f"[={text}]")
    return "".join(out)
