"""kopf's progress storages: each handler's progress within the current cause, as kopf 1.45.2
keeps it (kopf/_cogs/configs/progress.py), so that an object handled by either kopf or
kubeop.kopf continues under the other.

A handler's record (:class:`ProgressRecord`) holds ISO 8601 times (``started``, ``stopped``,
``delayed``), ``purpose`` (the cause: create, update, delete, resume), ``retries`` (attempts so
far), ``success``/``failure``, the last error's ``message`` and ``subrefs`` (its sub-handlers' ids).
:class:`AnnotationsProgressStorage` keeps it as compact JSON in the annotation
``kopf.zalando.org/<handler id>`` (names formed by :mod:`kubeop.kopf.storagekeys`);
:class:`StatusProgressStorage` in ``status.kopf.progress.<handler id>``;
:class:`SmartProgressStorage` (kopf's default) writes the annotations and reads both;
:class:`MultiProgressStorage` reads the first that has a record and writes all. The records are
purged (set to null) once the cause is handled. ``touch`` writes a dummy value kopf uses to
wake itself up; kubeop.kopf requeues instead, and only clears a dummy kopf left.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, MutableMapping
from typing import Any, TypedDict, cast

import orjson

from kubeop.core.model import copy_json
from kubeop.kopf.diffs import FieldPath, FieldSpec
from kubeop.kopf.nested import (
    ABSENT,
    ensure,
    field_of,
    remove,
    remove_annotations,
    remove_empty_stanzas,
    resolve_field,
)
from kubeop.kopf.storagekeys import StorageKeys, store_marker

__all__ = [
    "AnnotationsProgressStorage",
    "MultiProgressStorage",
    "ProgressRecord",
    "ProgressStorage",
    "SmartProgressStorage",
    "StatusProgressStorage",
]


class ProgressRecord(TypedDict, total=False):
    """One handler's progress as kopf stores it (``kopf.ProgressRecord``)."""

    started: str | None
    stopped: str | None
    delayed: str | None
    purpose: str | None
    retries: int | None
    success: bool | None
    failure: bool | None
    message: str | None
    subrefs: Collection[str] | None


Body = Mapping[str, Any]
Patch = MutableMapping[str, Any]


class ProgressStorage:
    """The interface of kopf's progress storages (subclass it for a storage of your own)."""

    def fetch(self, *, key: str, body: Body) -> ProgressRecord | None:
        """The progress record of handler ``key`` on ``body``, or None."""
        raise NotImplementedError

    def store(self, *, key: str, record: ProgressRecord, body: Body, patch: Patch) -> None:
        """Write handler ``key``'s progress ``record`` into ``patch``."""
        raise NotImplementedError

    def purge(self, *, key: str, body: Body, patch: Patch) -> None:
        """Remove handler ``key``'s progress record through ``patch``."""
        raise NotImplementedError

    def touch(self, *, body: Body, patch: Patch, value: str | None) -> None:
        """Set kopf's wake-up marker to ``value`` through ``patch`` when it differs (kubeop.kopf requeues
        instead, and uses this to clear a marker kopf left).
        """
        raise NotImplementedError

    def clear(self, *, essence: dict[str, Any]) -> dict[str, Any]:
        """``essence`` without this storage's own fields."""
        return copy_json(essence)  # type: ignore[no-any-return]

    def flush(self) -> None:
        """Write out what is pending (nothing: records go out with the handlers' patch)."""
        pass

    @staticmethod
    def remove_annotations(essence: MutableMapping[str, Any], keys_to_remove: Collection[str]) -> None:
        """Remove the annotations ``keys_to_remove`` from ``essence`` (in place)."""
        remove_annotations(essence, keys_to_remove)

    @staticmethod
    def remove_empty_stanzas(essence: MutableMapping[str, Any]) -> None:
        """Remove the stanzas left empty in ``essence`` (in place)."""
        remove_empty_stanzas(essence)


def _purge(body: Body, patch: Patch, path: FieldPath) -> None:
    """Null the field if the object has it; else drop what this cycle's patch put there."""
    if resolve_field(body, path, ABSENT) is not ABSENT:
        ensure(patch, path, None)
    elif resolve_field(patch, path, ABSENT) is not ABSENT:
        remove(patch, path)


class AnnotationsProgressStorage(StorageKeys, ProgressStorage):
    """Progress as JSON in annotations ``<prefix>/<handler id>`` (kopf's default place)."""

    def __init__(
        self,
        *,
        prefix: str = "kopf.zalando.org",
        verbose: bool = False,
        touch_key: str = "touch-dummy",
        v1: bool = True,
    ) -> None:
        StorageKeys.__init__(self, prefix, v1)
        self.verbose = verbose
        self.touch_key = touch_key

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(prefix={self.prefix!r}, verbose={self.verbose!r}, "
            f"touch_key={self.touch_key!r}, v1={self.v1!r})"
        )

    def fetch(self, *, key: str, body: Body) -> ProgressRecord | None:
        """The progress record of handler ``key`` on ``body``, or None, in the object's annotations."""
        annotations = (body.get("metadata") or {}).get("annotations") or {}
        for full_key in self.make_keys(key, body=body):
            encoded = annotations.get(full_key)
            decoded = orjson.loads(encoded) if encoded is not None else None
            if decoded is not None:
                return cast(ProgressRecord, decoded)
        return None

    def store(self, *, key: str, record: ProgressRecord, body: Body, patch: Patch) -> None:
        """Write handler ``key``'s progress ``record`` into ``patch``, in the object's annotations."""
        decoded = {k: v for k, v in record.items() if self.verbose or v is not None}
        encoded = orjson.dumps(decoded).decode()
        for full_key in self.make_keys(key, body=body):
            ensure(patch, ("metadata", "annotations", full_key), encoded)
        store_marker(self.prefix, patch, body)

    def purge(self, *, key: str, body: Body, patch: Patch) -> None:
        """Remove handler ``key``'s progress record through ``patch``, in the object's annotations."""
        for full_key in self.make_keys(key, body=body):
            _purge(body, patch, ("metadata", "annotations", full_key))

    def touch(self, *, body: Body, patch: Patch, value: str | None) -> None:
        """Set kopf's wake-up marker to ``value`` through ``patch`` when it differs (kubeop.kopf requeues
        instead, and uses this to clear a marker kopf left), in the object's annotations.
        """
        for full_key in self.make_keys(self.touch_key, body=body):
            path = ("metadata", "annotations", full_key)
            if resolve_field(body, path, None) != value:
                ensure(patch, path, value)
                store_marker(self.prefix, patch, body)

    def clear(self, *, essence: dict[str, Any]) -> dict[str, Any]:
        """``essence`` without this storage's own fields."""
        essence = super().clear(essence=essence)
        annotations = (essence.get("metadata") or {}).get("annotations") or {}
        self.remove_annotations(essence, {k for k in annotations if k.startswith(f"{self.prefix}/")})
        self.remove_empty_stanzas(essence)
        return essence


class StatusProgressStorage(ProgressStorage):
    """Progress as a mapping per handler in ``status.<name>.progress`` (kopf's first place)."""

    def __init__(
        self,
        *,
        name: str = "kopf",
        field: FieldSpec = "status.{name}.progress",
        touch_field: FieldSpec = "status.{name}.dummy",
    ) -> None:
        self._name = name
        self._field = field_of(field, name)
        self._touch_field = field_of(touch_field, name)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self._name!r}, field={'.'.join(self._field)!r}, "
            f"touch_field={'.'.join(self._touch_field)!r})"
        )

    @property
    def field(self) -> FieldPath:
        """Where in the status the progress records live (default ``status.kopf.progress``)."""
        return self._field

    @field.setter
    def field(self, field: FieldSpec) -> None:
        self._field = field_of(field, self._name)

    @property
    def touch_field(self) -> FieldPath:
        """Where the touch marker lives (default ``status.kopf.dummy``)."""
        return self._touch_field

    @touch_field.setter
    def touch_field(self, field: FieldSpec) -> None:
        self._touch_field = field_of(field, self._name)

    def fetch(self, *, key: str, body: Body) -> ProgressRecord | None:
        """The progress record of handler ``key`` on ``body``, or None, in the object's status."""
        container = resolve_field(body, self.field, None)
        found = container.get(key) if isinstance(container, Mapping) else None
        return cast(ProgressRecord, found) if found is not None else None

    def store(self, *, key: str, record: ProgressRecord, body: Body, patch: Patch) -> None:
        """Write handler ``key``'s progress ``record`` into ``patch``, in the object's status."""
        ensure(patch, (*self.field, key), dict(record))  # the API server drops the nulls

    def purge(self, *, key: str, body: Body, patch: Patch) -> None:
        """Remove handler ``key``'s progress record through ``patch``, in the object's status."""
        _purge(body, patch, (*self.field, key))

    def touch(self, *, body: Body, patch: Patch, value: str | None) -> None:
        """Set kopf's wake-up marker to ``value`` through ``patch`` when it differs (kubeop.kopf requeues
        instead, and uses this to clear a marker kopf left), in the object's status.
        """
        if resolve_field(body, self.touch_field, None) != value:
            ensure(patch, self.touch_field, value)

    def clear(self, *, essence: dict[str, Any]) -> dict[str, Any]:
        """``essence`` without this storage's own fields."""
        essence = super().clear(essence=essence)
        remove(essence, self.field)
        self.remove_empty_stanzas(essence)
        return essence


class NoWriteStatusProgressStorage(StatusProgressStorage):
    """The status part of kopf's smart storage: read (records from kopf before 1.29), never written."""

    def store(self, **_: Any) -> None:
        pass

    def touch(self, **_: Any) -> None:
        pass


class MultiProgressStorage(ProgressStorage):
    """Reads the first of ``storages`` that has a handler's record; writes and purges all."""

    def __init__(self, storages: Collection[ProgressStorage]) -> None:
        self.storages = storages

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.storages)!r})"

    def fetch(self, *, key: str, body: Body) -> ProgressRecord | None:
        """The progress record of handler ``key`` on ``body``, or None, in every one of its storages (read
        from the first that has it).
        """
        for storage in self.storages:
            found = storage.fetch(key=key, body=body)
            if found is not None:
                return found
        return None

    def store(self, *, key: str, record: ProgressRecord, body: Body, patch: Patch) -> None:
        """Write handler ``key``'s progress ``record`` into ``patch``, in every one of its storages (read from
        the first that has it).
        """
        for storage in self.storages:
            storage.store(key=key, record=record, body=body, patch=patch)

    def purge(self, *, key: str, body: Body, patch: Patch) -> None:
        """Remove handler ``key``'s progress record through ``patch``, in every one of its storages (read from
        the first that has it).
        """
        for storage in self.storages:
            storage.purge(key=key, body=body, patch=patch)

    def touch(self, *, body: Body, patch: Patch, value: str | None) -> None:
        """Set kopf's wake-up marker to ``value`` through ``patch`` when it differs (kubeop.kopf requeues
        instead, and uses this to clear a marker kopf left), in every one of its storages (read from the first
        that has it).
        """
        for storage in self.storages:
            storage.touch(body=body, patch=patch, value=value)

    def clear(self, *, essence: dict[str, Any]) -> dict[str, Any]:
        """``essence`` without this storage's own fields."""
        for storage in self.storages:
            essence = storage.clear(essence=essence)
        return essence

    def flush(self) -> None:
        """Write out what is pending (nothing: records go out with the handlers' patch)."""
        for storage in self.storages:
            storage.flush()


class SmartProgressStorage(MultiProgressStorage):
    """kopf's default: annotations, and ``status.kopf.progress`` read (and purged) but not written."""

    def __init__(
        self,
        *,
        name: str = "kopf",
        field: FieldSpec = "status.{name}.progress",
        touch_key: str = "touch-dummy",
        touch_field: FieldSpec = "status.{name}.dummy",
        prefix: str = "kopf.zalando.org",
        v1: bool = True,
        verbose: bool = False,
    ) -> None:
        super().__init__(
            [
                AnnotationsProgressStorage(v1=v1, prefix=prefix, verbose=verbose, touch_key=touch_key),
                NoWriteStatusProgressStorage(name=name, field=field, touch_field=touch_field),
            ]
        )
