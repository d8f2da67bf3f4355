"""Declaration: what a custom resource class says about itself (names, scope, version, columns).

A :class:`~kubeop.crd.resource.CustomResource` subclass is declared with class keywords::

    class CronTab(CustomResource, group="stable.example.com", version="v1", short_names=["ct"],
                  printer_columns=[PrinterColumn("Spec", ".spec.cronSpec")],
                  subresources=("status", "scale")):
        ...

and :func:`declare` turns those keywords into a checked, frozen :class:`Declaration`. Errors are
raised while the class statement runs, naming the class and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from kubeop.core.gvk import GroupVersionKind, join_api_version
from kubeop.core.resource import ApiResource
from kubeop.crd import names
from kubeop.crd.errors import DeclarationError
from kubeop.crd.markers import ValidationRule

__all__ = ["Declaration", "PrinterColumn", "Scale", "declare"]

Scope = Literal["Namespaced", "Cluster"]
ColumnType = Literal["integer", "number", "string", "boolean", "date"]

_COLUMN_TYPES = ("integer", "number", "string", "boolean", "date")
_COLUMN_FORMATS = ("int32", "int64", "float", "double", "byte", "date", "date-time", "password")
_SIMPLE_PATH = re.compile(r"^(\.[A-Za-z_$][A-Za-z0-9_$-]*)+$")


@dataclass(frozen=True)
class PrinterColumn:
    """A column of ``kubectl get`` (``additionalPrinterColumns``).

    ``json_path`` is a JSONPath into the object (``.spec.replicas``). ``type`` is inferred from
    the schema when left out (string for paths the schema cannot resolve, such as filters);
    ``priority`` > 0 shows the column only with ``-o wide``.
    """

    name: str
    json_path: str
    type: ColumnType | None = None
    description: str | None = None
    format: str | None = None
    priority: int = 0

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise DeclarationError("PrinterColumn needs a name")
        if not self.json_path.startswith("."):
            raise DeclarationError(
                f"PrinterColumn {self.name!r}: json_path {self.json_path!r} must start with '.' "
                "(for example '.spec.replicas')"
            )
        if self.type is not None and self.type not in _COLUMN_TYPES:
            raise DeclarationError(
                f"PrinterColumn {self.name!r}: type {self.type!r} must be one of {', '.join(_COLUMN_TYPES)}"
            )
        if self.format is not None and self.format not in _COLUMN_FORMATS:
            raise DeclarationError(
                f"PrinterColumn {self.name!r}: format {self.format!r} must be one of "
                f"{', '.join(_COLUMN_FORMATS)}"
            )
        if self.priority < 0:
            raise DeclarationError(f"PrinterColumn {self.name!r}: priority must be >= 0")

    @classmethod
    def age(cls) -> PrinterColumn:
        """The ``AGE`` column kubectl shows by default (it is dropped once any column is declared)."""
        return cls("Age", ".metadata.creationTimestamp", "date")


@dataclass(frozen=True)
class Scale:
    """The ``scale`` subresource: where the desired and observed replica counts live.

    ``label_selector_path`` (a string field under ``.spec`` or ``.status`` holding a serialized
    label selector) lets a HorizontalPodAutoscaler find the pods.
    """

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = None

    def __post_init__(self) -> None:
        for what, path, prefixes in (
            ("spec_replicas_path", self.spec_replicas_path, (".spec.",)),
            ("status_replicas_path", self.status_replicas_path, (".status.",)),
            ("label_selector_path", self.label_selector_path, (".spec.", ".status.")),
        ):
            if path is None:
                continue
            if not _SIMPLE_PATH.match(path) or not path.startswith(prefixes):
                raise DeclarationError(
                    f"Scale {what} {path!r} must be a dotted path under "
                    f"{' or '.join(p[:-1] for p in prefixes)} "
                    f"(for example '{prefixes[0]}replicas')"
                )

    def to_dict(self) -> dict[str, Any]:
        """The CRD's ``subresources.scale`` stanza."""
        out = {"specReplicasPath": self.spec_replicas_path, "statusReplicasPath": self.status_replicas_path}
        if self.label_selector_path:
            out["labelSelectorPath"] = self.label_selector_path
        return out


@dataclass(frozen=True)
class Declaration:
    """One served version of one kind, as declared by a CustomResource subclass.

    The identity (group, kind, names, scope) is shared by every version of a kind; ``served``,
    ``storage``, ``deprecated`` and ``deprecation_warning`` describe this version. ``storage``
    is ``None`` when not given: a kind with a single version stores it, a kind with several
    must mark exactly one.
    """

    group: str
    version: str
    kind: str
    plural: str
    singular: str
    scope: Scope = "Namespaced"
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    printer_columns: tuple[PrinterColumn, ...] = ()
    status_subresource: bool = False
    scale: Scale | None = None
    validations: tuple[ValidationRule, ...] = ()
    selectable_fields: tuple[str, ...] = ()
    served: bool = True
    storage: bool | None = None
    deprecated: bool = False
    deprecation_warning: str | None = None
    owner: str = field(default="", compare=False)  # the class that declared it, for messages

    @property
    def api_version(self) -> str:
        """``group/version`` of the kind."""
        return join_api_version(self.group, self.version)

    @property
    def gvk(self) -> GroupVersionKind:
        """The kind's group, version and kind."""
        return GroupVersionKind(self.group, self.version, self.kind)

    @property
    def namespaced(self) -> bool:
        """Whether the kind is namespaced (scope ``Namespaced``)."""
        return self.scope == "Namespaced"

    @property
    def crd_name(self) -> str:
        """``<plural>.<group>``: the name of the CustomResourceDefinition object."""
        return f"{self.plural}.{self.group}"

    @property
    def list_kind(self) -> str:
        """The kind of its lists (``<Kind>List``)."""
        return f"{self.kind}List"

    @property
    def subresources(self) -> tuple[str, ...]:
        """The subresources the CRD serves: ``status`` and/or ``scale``."""
        return (*(("status",) if self.status_subresource else ()), *(("scale",) if self.scale else ()))

    def resource(self) -> ApiResource:
        """The ApiResource of this version, so clients need no discovery for it."""
        return ApiResource(
            self.group,
            self.version,
            self.plural,
            kind=self.kind,
            namespaced=self.namespaced,
            singular=self.singular,
            short_names=self.short_names,
            subresources=self.subresources,
        )


def _strings(what: str, owner: str, value: str | Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        raise DeclarationError(f"{owner}: {what} must be a list of strings, not the string {value!r}")
    return tuple(value)


def _subresources(owner: str, value: Iterable[str | Scale] | None) -> tuple[bool, Scale | None]:
    status, scale = False, None
    for item in _iter_subresources(owner, value):
        if item == "status":
            status = True
        elif item == "scale":
            scale = Scale()
        elif isinstance(item, Scale):
            scale = item
        else:
            raise DeclarationError(
                f"{owner}: unknown subresource {item!r}; "
                "use 'status', 'scale' or Scale(spec_replicas_path=...)"
            )
    return status, scale


def _iter_subresources(owner: str, value: Iterable[str | Scale] | None) -> Iterable[str | Scale]:
    if value is None:
        return ()
    if isinstance(value, str):
        raise DeclarationError(f"{owner}: subresources must be a tuple, e.g. ('status',), not {value!r}")
    return value


def declare(
    owner: str,
    *,
    base: Declaration | None = None,
    group: str | None = None,
    version: str | None = None,
    kind: str | None = None,
    scope: str | None = None,
    plural: str | None = None,
    singular: str | None = None,
    short_names: Sequence[str] | None = None,
    categories: Sequence[str] | None = None,
    printer_columns: Sequence[PrinterColumn] | None = None,
    subresources: Iterable[str | Scale] | None = None,
    validations: Sequence[ValidationRule] | None = None,
    selectable_fields: Sequence[str] | None = None,
    served: bool = True,
    storage: bool | None = None,
    deprecated: bool = False,
    deprecation_warning: str | None = None,
) -> Declaration:
    """Check a declaration's keywords and build it.

    ``owner`` is the declaring class's name: the default kind, and the subject of messages.
    With ``base`` (the declaration inherited from a parent class), identity and presentation
    (group, kind, names, scope, columns, subresources, rules, selectable fields) are inherited
    unless given, while the version-specific flags (served, storage, deprecated) start afresh.
    """
    try:
        group = names.check_group(group if group is not None else _need(base, "group", owner))
        version = names.check_version(version if version is not None else _need(base, "version", owner))
        kind = names.check_kind(kind if kind is not None else (base.kind if base else owner))
        plural = names.check_plural(plural or (base.plural if base else names.guess_plural(kind)))
        singular = names.check_singular(singular or (base.singular if base else kind.lower()))
        scope = scope if scope is not None else (base.scope if base else "Namespaced")
        if scope not in ("Namespaced", "Cluster"):
            raise DeclarationError(f"scope {scope!r} must be 'Namespaced' or 'Cluster'")
        shorts = tuple(names.check_short_name(s) for s in _strings("short_names", owner, short_names))
        cats = tuple(names.check_category(c) for c in _strings("categories", owner, categories))
        if plural == singular:
            raise DeclarationError(f"plural and singular are both {plural!r}; give plural= explicitly")
        if len(f"{plural}.{group}") > 253:
            raise DeclarationError(f"the CRD name '{plural}.{group}' is longer than 253 characters")
        if deprecation_warning is not None and not deprecated:
            raise DeclarationError("deprecation_warning needs deprecated=True")
        if deprecation_warning is not None and (
            not deprecation_warning.strip() or len(deprecation_warning) > 256
        ):
            raise DeclarationError("deprecation_warning must be a non-empty line of at most 256 characters")
        if subresources is None and base is not None:
            status, scale = base.status_subresource, base.scale
        else:
            status, scale = _subresources(owner, subresources)
        fields = _strings("selectable_fields", owner, selectable_fields)
        for path in fields:
            if not _SIMPLE_PATH.match(path) or path.startswith(".metadata."):
                raise DeclarationError(
                    f"selectable field {path!r} must be a dotted path outside metadata "
                    "(for example '.spec.color')"
                )
    except DeclarationError as e:
        raise DeclarationError(f"{owner}: {e}") from None
    return Declaration(
        group=group,
        version=version,
        kind=kind,
        plural=plural,
        singular=singular,
        scope=scope,  # type: ignore[arg-type]  # checked above
        short_names=shorts if short_names is not None else (base.short_names if base else ()),
        categories=cats if categories is not None else (base.categories if base else ()),
        printer_columns=tuple(printer_columns)
        if printer_columns is not None
        else (base.printer_columns if base else ()),
        status_subresource=status,
        scale=scale,
        validations=tuple(validations) if validations is not None else (base.validations if base else ()),
        selectable_fields=fields
        if selectable_fields is not None
        else (base.selectable_fields if base else ()),
        served=served,
        storage=storage,
        deprecated=deprecated,
        deprecation_warning=deprecation_warning,
        owner=owner,
    )


def _need(base: Declaration | None, what: str, owner: str) -> str:
    if base is None:
        raise DeclarationError(f"{what}= is required (class {owner}(CustomResource, {what}=...))")
    value: str = getattr(base, what)
    return value


def with_owner(decl: Declaration, owner: str) -> Declaration:
    """The same declaration attributed to a subclass (used when a subclass adds no keywords)."""
    return replace(decl, owner=owner)
