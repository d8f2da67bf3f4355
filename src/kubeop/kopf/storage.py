"""kopf's progress and diff-base storage classes, constructible as in kopf.

kubeop.kopf keeps the handling state in one record of its own (:mod:`kubeop.kopf.state`: the
annotation ``kopf.kubeop.dev/state`` or ``status.kopfState``, written with the handlers' patch),
not in kopf's annotations. These classes exist so that an operator naming them imports and
builds them; setting one as ``settings.persistence.progress_storage`` or ``diffbase_storage``
is an error naming that record (:class:`~kubeop.kopf.settings.PersistenceSettings`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, TypedDict

__all__ = [
    "AnnotationsDiffBaseStorage",
    "AnnotationsProgressStorage",
    "DiffBaseStorage",
    "MultiDiffBaseStorage",
    "MultiProgressStorage",
    "ProgressRecord",
    "ProgressStorage",
    "SmartProgressStorage",
    "StatusDiffBaseStorage",
    "StatusProgressStorage",
    "unsupported_storage",
]

FieldSpec = str | tuple[str, ...] | list[str] | None


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


class _Storage:
    """A storage's options, kept as given (for ``repr`` and the error naming it)."""

    def __init__(self, **options: Any) -> None:
        self.options = options

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.options.items())
        return f"{type(self).__name__}({args})"


class ProgressStorage(_Storage):
    """The base of kopf's progress storages."""


class AnnotationsProgressStorage(ProgressStorage):
    def __init__(
        self,
        *,
        prefix: str = "kopf.zalando.org",
        verbose: bool = False,
        touch_key: str = "touch-dummy",
        v1: bool = True,
    ) -> None:
        super().__init__(prefix=prefix, verbose=verbose, touch_key=touch_key, v1=v1)


class StatusProgressStorage(ProgressStorage):
    def __init__(
        self,
        *,
        name: str = "kopf",
        field: FieldSpec = "status.{name}.progress",
        touch_field: FieldSpec = "status.{name}.dummy",
    ) -> None:
        super().__init__(name=name, field=field, touch_field=touch_field)


class MultiProgressStorage(ProgressStorage):
    def __init__(self, storages: Collection[ProgressStorage]) -> None:
        super().__init__(storages=list(storages))
        self.storages = storages


class SmartProgressStorage(MultiProgressStorage):
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
                AnnotationsProgressStorage(prefix=prefix, verbose=verbose, touch_key=touch_key, v1=v1),
                StatusProgressStorage(name=name, field=field, touch_field=touch_field),
            ]
        )


class DiffBaseStorage(_Storage):
    """The base of kopf's diff-base (last-handled configuration) storages."""

    def __init__(self, ignored_fields: Iterable[FieldSpec] | None = None, **options: Any) -> None:
        super().__init__(**options, ignored_fields=list(ignored_fields or ()))


class AnnotationsDiffBaseStorage(DiffBaseStorage):
    def __init__(
        self,
        *,
        prefix: str = "kopf.zalando.org",
        key: str = "last-handled-configuration",
        ignored_fields: Iterable[FieldSpec] | None = None,
        v1: bool = True,
    ) -> None:
        super().__init__(ignored_fields, prefix=prefix, key=key, v1=v1)


class StatusDiffBaseStorage(DiffBaseStorage):
    def __init__(
        self,
        *,
        name: str = "kopf",
        field: FieldSpec = "status.{name}.last-handled-configuration",
        ignored_fields: Iterable[FieldSpec] | None = None,
    ) -> None:
        super().__init__(ignored_fields, name=name, field=field)


class MultiDiffBaseStorage(DiffBaseStorage):
    def __init__(self, storages: Collection[DiffBaseStorage]) -> None:
        super().__init__(storages=list(storages))
        self.storages = storages


def unsupported_storage(setting: str, value: Any) -> Exception:
    """The error for ``settings.persistence.<setting> = value``."""
    return NotImplementedError(
        f"settings.persistence.{setting} = {value!r} is not supported by kubeop.kopf: kubeop records "
        "the handling state (progress and last-handled essence) in one record of its own, the "
        "annotation 'kopf.kubeop.dev/state' or 'status.kopfState', written with the handlers' patch; "
        "remove this setting (the record needs no configuration)"
    )
