"""CustomResource: a pydantic model that is also a Kubernetes kind.

::

    class CronTabSpec(CamelModel):
        cron_spec: str = Field(pattern=r"^(\\S+\\s+){4}\\S+$")     # "cronSpec" on the wire
        image: str
        replicas: int = Field(default=1, ge=0, le=10)

    class CronTab(CustomResource, group="stable.example.com", version="v1", short_names=["ct"]):
        spec: CronTabSpec
        status: CronTabStatus | None = None

    crontab = await client.get(CronTab, "nightly", namespace="jobs")   # a CronTab instance

A subclass declared with ``group=`` and ``version=`` (see :func:`~kubeop.crd.declaration.declare`
for every keyword) carries its identity on the class: ``CronTab.api_version``, ``CronTab.kind``,
``CronTab.resource`` (an :class:`~kubeop.core.resource.ApiResource`, so the client needs no
discovery) and ``CronTab.__crd__`` (the :class:`~kubeop.crd.declaration.Declaration`). That is
the typed-model protocol of :mod:`kubeop.core.model`, so every client verb accepts the class
and its instances.

Instances validate from the dicts the server returns (``CronTab.model_validate(obj)``) and dump
back with ``apiVersion`` and ``kind`` first, by alias. The client dumps with ``exclude_none``,
so an unset optional field is left out of the request rather than sent as null.

Later versions of a kind subclass an earlier one and change the version::

    class CronTabV2(CronTab, version="v2", storage=True): ...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Unpack

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.alias_generators import to_camel

from kubeop.core.resource import ApiResource
from kubeop.crd.declaration import Declaration, PrinterColumn, Scale, declare, with_owner
from kubeop.crd.markers import ValidationRule
from kubeop.crd.names import class_name

__all__ = ["CamelModel", "CustomResource", "ObjectMeta"]


class CamelModel(BaseModel):
    """A model whose snake_case fields are camelCase on the wire (``cron_spec`` <-> ``cronSpec``).

    Both names are accepted when validating; dumps and generated schemas use the camelCase one.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )


class ObjectMeta(CamelModel):
    """The metadata of an object: the common fields typed, any other field kept as it came.

    Timestamps stay strings so an object read and written back is unchanged.
    """

    model_config = ConfigDict(extra="allow")

    name: str | None = None
    generate_name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    finalizers: list[str] | None = None
    owner_references: list[dict[str, Any]] | None = None


class CustomResource(CamelModel):
    """Base class of custom resource models; see the module docstring.

    A subclass without ``group``/``version`` keywords is an abstract base (shared fields); a
    subclass of a declared resource without keywords keeps its parent's declaration.
    """

    api_version: ClassVar[str]
    kind: ClassVar[str]
    resource: ClassVar[ApiResource]
    __crd__: ClassVar[Declaration]

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    def __init_subclass__(
        cls,
        *,
        group: str | None = None,
        version: str | None = None,
        kind: str | None = None,
        scope: str | None = None,
        plural: str | None = None,
        singular: str | None = None,
        short_names: Sequence[str] | None = None,
        categories: Sequence[str] | None = None,
        printer_columns: Sequence[PrinterColumn] | None = None,
        subresources: Sequence[str | Scale] | None = None,
        validations: Sequence[ValidationRule] | None = None,
        selectable_fields: Sequence[str] | None = None,
        served: bool = True,
        storage: bool | None = None,
        deprecated: bool = False,
        deprecation_warning: str | None = None,
        **kwargs: Unpack[ConfigDict],
    ) -> None:
        super().__init_subclass__(**kwargs)
        base: Declaration | None = getattr(cls, "__crd__", None)
        given = {
            "group": group,
            "version": version,
            "kind": kind,
            "scope": scope,
            "plural": plural,
            "singular": singular,
            "short_names": short_names,
            "categories": categories,
            "printer_columns": printer_columns,
            "subresources": subresources,
            "validations": validations,
            "selectable_fields": selectable_fields,
            "storage": storage,
            "deprecation_warning": deprecation_warning,
        }
        explicit = any(v is not None for v in given.values()) or not served or deprecated
        if not explicit:
            if base is not None:
                cls.__crd__ = with_owner(base, class_name(cls))
            return
        decl = declare(
            class_name(cls),
            base=base,
            group=group,
            version=version,
            kind=kind,
            scope=scope,
            plural=plural,
            singular=singular,
            short_names=short_names,
            categories=categories,
            printer_columns=printer_columns,
            subresources=subresources,
            validations=validations,
            selectable_fields=selectable_fields,
            served=served,
            storage=storage,
            deprecated=deprecated,
            deprecation_warning=deprecation_warning,
        )
        cls.__crd__ = decl
        cls.api_version = decl.api_version
        cls.kind = decl.kind
        cls.resource = decl.resource()

    @classmethod
    def is_declared(cls) -> bool:
        """True for a class that names a kind (not an abstract base)."""
        return isinstance(getattr(cls, "__crd__", None), Declaration)

    @model_validator(mode="before")
    @classmethod
    def _check_type(cls, data: Any) -> Any:
        # Reading a v1 object into the v2 class (or a Foo into a Bar) is a bug, not a conversion.
        if isinstance(data, dict) and cls.is_declared():
            kind, api_version = data.get("kind"), data.get("apiVersion")
            if kind is not None and kind != cls.kind:
                raise ValueError(f"kind is {kind!r}, but {class_name(cls)} is a {cls.kind}")
            if api_version is not None and api_version != cls.api_version:
                raise ValueError(
                    f"apiVersion is {api_version!r}, but {class_name(cls)} is {cls.api_version}; "
                    "read the object through the class of that version"
                )
        return data

    @model_serializer(mode="wrap")
    def _with_type(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        cls = type(self)
        if not cls.is_declared():
            return data
        return {"apiVersion": cls.api_version, "kind": cls.kind, **data}
