"""kopf's diff-base storages: the essence of an object as last handled, which the next change is
compared with, as kopf 1.45.2 keeps it (kopf/_cogs/configs/diffbase.py).

The essence (:meth:`DiffBaseStorage.build`) is the object without ``apiVersion``, ``kind``,
``status`` and metadata other than labels and annotations; annotations of kopf operators (by
prefix, :func:`~kubeop.kopf.storagekeys.marked_prefixes`), kubeop.kopf's earlier record and
kubectl's last-applied configuration are left out; the handlers' ``field=`` fields are kept even
in status; ``ignored_fields`` are removed. :class:`AnnotationsDiffBaseStorage` (kopf's default)
keeps it as compact JSON plus a newline in ``kopf.zalando.org/last-handled-configuration``;
:class:`StatusDiffBaseStorage` as a JSON string in ``status.kopf.last-handled-configuration``;
:class:`MultiDiffBaseStorage` reads the first that has one and writes all.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, MutableMapping
from typing import Any

import orjson

from kubeop.core.model import copy_json
from kubeop.kopf.diffs import FieldPath, FieldSpec, parse_field
from kubeop.kopf.nested import (
    ABSENT,
    ensure,
    field_of,
    remove,
    remove_annotations,
    remove_empty_stanzas,
    resolve_field,
)
from kubeop.kopf.storagekeys import StorageKeys, marked_prefixes, store_marker

__all__ = ["AnnotationsDiffBaseStorage", "DiffBaseStorage", "MultiDiffBaseStorage", "StatusDiffBaseStorage"]

Body = Mapping[str, Any]
Patch = MutableMapping[str, Any]
_IGNORED = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})
_KUBEOP_PREFIX = "kopf.kubeop.dev/"  # the record of kubeop.kopf before it kept kopf's formats


class DiffBaseStorage:
    """The interface of kopf's diff-base storages, and how an essence is built."""

    def __init__(self, ignored_fields: Iterable[FieldSpec] | None = None) -> None:
        self.ignored_fields = list(ignored_fields or [])

    def build(self, *, body: Body, extra_fields: Iterable[FieldSpec] | None = None) -> dict[str, Any]:
        """The essence of ``body``: what its change handlers react to (see the module docstring)."""
        essence: dict[str, Any] = {
            k: copy_json(v) for k, v in body.items() if k not in ("apiVersion", "kind", "metadata", "status")
        }
        md = body.get("metadata") or {}
        meta: dict[str, Any] = {}
        if "labels" in md:
            meta["labels"] = copy_json(md["labels"])
        if "annotations" in md:
            annotations = dict(md["annotations"] or {})
            prefixes = marked_prefixes(annotations)
            meta["annotations"] = {
                k: v
                for k, v in annotations.items()
                if k not in _IGNORED
                and not k.startswith(_KUBEOP_PREFIX)
                and not any(k.startswith(f"{p}/") for p in prefixes)
            }
        if meta:
            essence["metadata"] = meta
        for spec in extra_fields or ():
            path = parse_field(spec)
            value = resolve_field(body, path, ABSENT)
            if path and value is not ABSENT:
                ensure(essence, path, copy_json(value))
        remove_empty_stanzas(essence)
        for spec in self.ignored_fields:
            remove(essence, parse_field(spec))
        return essence

    def fetch(self, *, body: Body) -> dict[str, Any] | None:
        """The essence stored on ``body`` when it was last handled, or None."""
        raise NotImplementedError

    def store(self, *, body: Body, patch: Patch, essence: Mapping[str, Any]) -> None:
        """Write ``essence`` as the last-handled state into ``patch``."""
        raise NotImplementedError

    @staticmethod
    def remove_annotations(essence: MutableMapping[str, Any], keys_to_remove: Collection[str]) -> None:
        """Remove the annotations ``keys_to_remove`` from ``essence`` (in place)."""
        remove_annotations(essence, keys_to_remove)

    @staticmethod
    def remove_empty_stanzas(essence: MutableMapping[str, Any]) -> None:
        """Remove the stanzas left empty in ``essence`` (in place)."""
        remove_empty_stanzas(essence)


def _decode(encoded: Any) -> dict[str, Any] | None:
    """The essence in ``encoded`` (None: there is none); ValueError naming what is wrong."""
    if encoded is None:
        return None
    if not isinstance(encoded, str):
        raise ValueError(f"not a JSON string but {type(encoded).__name__}")
    decoded = orjson.loads(encoded)
    if not isinstance(decoded, dict):
        raise ValueError(f"not a JSON object but {type(decoded).__name__}")
    return decoded


class AnnotationsDiffBaseStorage(StorageKeys, DiffBaseStorage):
    """The essence in the annotation ``<prefix>/<key>`` (kopf's default)."""

    def __init__(
        self,
        *,
        prefix: str = "kopf.zalando.org",
        key: str = "last-handled-configuration",
        ignored_fields: Iterable[FieldSpec] | None = None,
        v1: bool = True,
    ) -> None:
        DiffBaseStorage.__init__(self, ignored_fields)
        StorageKeys.__init__(self, prefix, v1)
        self.key = key

    def __repr__(self) -> str:
        return f"{type(self).__name__}(prefix={self.prefix!r}, key={self.key!r}, v1={self.v1!r})"

    def build(self, *, body: Body, extra_fields: Iterable[FieldSpec] | None = None) -> dict[str, Any]:
        """The essence of ``body``: what is compared to find changes, without kopf's own fields (and with
        ``extra_fields`` when given).
        """
        essence = super().build(body=body, extra_fields=extra_fields)
        self.remove_annotations(essence, set(self.make_keys(self.key, body=body)))
        self.remove_empty_stanzas(essence)
        return essence

    def fetch(self, *, body: Body) -> dict[str, Any] | None:
        """The essence stored on ``body`` when it was last handled, or None, in an annotation."""
        annotations = (body.get("metadata") or {}).get("annotations") or {}
        for full_key in self.make_keys(self.key, body=body):
            decoded = _decode(annotations.get(full_key))
            if decoded is not None:
                return decoded
        return None

    def store(self, *, body: Body, patch: Patch, essence: Mapping[str, Any]) -> None:
        """Write ``essence`` as the last-handled state into ``patch``, in an annotation."""
        encoded = orjson.dumps(essence).decode() + "\n"  # a newline as kubectl's own
        for full_key in self.make_keys(self.key, body=body):
            ensure(patch, ("metadata", "annotations", full_key), encoded)
        store_marker(self.prefix, patch, body)


class StatusDiffBaseStorage(DiffBaseStorage):
    """The essence as a JSON string in ``status.<name>.last-handled-configuration``."""

    def __init__(
        self,
        *,
        name: str = "kopf",
        field: FieldSpec = "status.{name}.last-handled-configuration",
        ignored_fields: Iterable[FieldSpec] | None = None,
    ) -> None:
        super().__init__(ignored_fields)
        self._name = name
        self._field = field_of(field, name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r}, field={'.'.join(self._field)!r})"

    @property
    def field(self) -> FieldPath:
        """Where in the status the last-handled essence lives (default
        ``status.kopf.last-handled-configuration``).
        """
        return self._field

    @field.setter
    def field(self, field: FieldSpec) -> None:
        self._field = field_of(field, self._name)

    def build(self, *, body: Body, extra_fields: Iterable[FieldSpec] | None = None) -> dict[str, Any]:
        """The essence of ``body``: what is compared to find changes, without kopf's own fields (and with
        ``extra_fields`` when given).
        """
        essence = super().build(body=body, extra_fields=extra_fields)
        remove(essence, self.field)
        return essence

    def fetch(self, *, body: Body) -> dict[str, Any] | None:
        """The essence stored on ``body`` when it was last handled, or None, in the status."""
        return _decode(resolve_field(body, self.field, None))

    def store(self, *, body: Body, patch: Patch, essence: Mapping[str, Any]) -> None:
        """Write ``essence`` as the last-handled state into ``patch``, in the status."""
        ensure(patch, self.field, orjson.dumps(essence).decode())


class MultiDiffBaseStorage(DiffBaseStorage):
    """Reads the first of ``storages`` that has an essence; writes all."""

    def __init__(self, storages: Collection[DiffBaseStorage]) -> None:
        super().__init__()
        self.storages = storages

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.storages)!r})"

    def build(self, *, body: Body, extra_fields: Iterable[FieldSpec] | None = None) -> dict[str, Any]:
        """The essence of ``body``: what is compared to find changes, without kopf's own fields (and with
        ``extra_fields`` when given).
        """
        essence = super().build(body=body, extra_fields=extra_fields)
        for storage in self.storages:
            essence = storage.build(body=essence, extra_fields=extra_fields)
        return essence

    def fetch(self, *, body: Body) -> dict[str, Any] | None:
        """The essence stored on ``body`` when it was last handled, or None, in every one of its storages
        (read from the first that has it).
        """
        for storage in self.storages:
            found = storage.fetch(body=body)
            if found is not None:
                return found
        return None

    def store(self, *, body: Body, patch: Patch, essence: Mapping[str, Any]) -> None:
        """Write ``essence`` as the last-handled state into ``patch``, in every one of its storages (read from
        the first that has it).
        """
        for storage in self.storages:
            storage.store(body=body, patch=patch, essence=essence)
