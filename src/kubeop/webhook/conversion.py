"""CRD conversion, hub and spoke: every version converts to and from one hub version.

::

    class CronTabV1Beta1(CustomResource, group=..., version="v1beta1", kind="CronTab"):
        spec: CronTabSpecV1Beta1

        def to_hub(self) -> CronTab: ...                          # v1beta1 -> v1

        @classmethod
        def from_hub(cls, hub: CronTab) -> CronTabV1Beta1: ...    # v1 -> v1beta1

    conversion = Conversion.of_models(CronTab, CronTabV1Beta1)    # CronTab (v1) is the hub

A conversion between two spokes goes through the hub. Functions over dicts work too, for kinds
without models: ``Conversion("example.com", "Widget", hub="v2", spokes={"v1": (to_hub, from_hub)})``.

Guarantees (what the API server demands of a conversion webhook): the converted object keeps the
input's ``metadata`` exactly (the converter's metadata is discarded), ``kind`` is unchanged and
``apiVersion`` is the desired one; an object already in the desired version is returned as it
came. A conversion that raises fails the whole review with the exception's message (the API
server then fails the read or write that needed it: there is no partial answer).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubeop.crd import CustomResource
from kubeop.webhook.review import ConversionRequest, conversion_response

__all__ = ["Conversion", "Spoke"]

Obj = dict[str, Any]
Convert = Callable[[Obj], Obj]


class Spoke(Protocol):
    """What a spoke model implements (checked by :meth:`Conversion.of_models`)."""

    def to_hub(self) -> CustomResource: ...

    @classmethod
    def from_hub(cls, hub: Any) -> Any: ...


@dataclass
class Conversion:
    """The conversions of one kind (``group``/``kind``), by version, through ``hub``."""

    group: str
    kind: str
    hub: str
    spokes: Mapping[str, tuple[Convert, Convert]] = field(default_factory=dict)
    plural: str = ""

    def __post_init__(self) -> None:
        if self.hub in self.spokes:
            raise ValueError(f"{self.kind}: version {self.hub} is the hub and cannot also be a spoke")

    @property
    def versions(self) -> list[str]:
        return [self.hub, *self.spokes]

    @property
    def path(self) -> str:
        """Where the server serves this conversion: ``/convert/<plural>.<group>``."""
        return f"/convert/{self.plural or self.kind.lower()}.{self.group}"

    @classmethod
    def of_models(
        cls,
        hub: type[CustomResource],
        *spokes: type[CustomResource],
        functions: Mapping[type[CustomResource], tuple[Callable[[Any], Any], Callable[[Any], Any]]]
        | None = None,
    ) -> Conversion:
        """Hub and spokes as CustomResource classes of one kind; each spoke has to_hub/from_hub,
        or ``functions`` maps it to ``(to_hub(spoke) -> hub, from_hub(hub) -> spoke)``."""
        if not hub.is_declared():
            raise TypeError(f"{hub.__name__} declares no kind")
        functions = dict(functions or {})
        table: dict[str, tuple[Convert, Convert]] = {}
        for spoke in [*spokes, *(s for s in functions if s not in spokes)]:
            decl = spoke.__crd__
            if (decl.group, decl.kind) != (hub.__crd__.group, hub.__crd__.kind):
                raise TypeError(
                    f"{spoke.__name__} is a {decl.kind}.{decl.group}, not a version of {hub.kind}"
                )
            if decl.version == hub.__crd__.version or decl.version in table:
                raise TypeError(f"{spoke.__name__}: version {decl.version} is declared twice")
            to_hub, from_hub = getattr(spoke, "to_hub", None), spoke.__dict__.get("from_hub")
            if spoke in functions:
                up, down = functions[spoke]
                table[decl.version] = (_typed_to_hub(spoke, hub, up), _typed_from_hub(spoke, hub, down))
                continue
            if not callable(to_hub) or from_hub is None:
                raise TypeError(
                    f"{spoke.__name__} is a spoke of {hub.__name__}: define to_hub(self) -> {hub.__name__} "
                    f"and a classmethod from_hub(cls, hub: {hub.__name__}) -> {spoke.__name__}"
                )
            table[decl.version] = (_typed_to_hub(spoke, hub), _typed_from_hub(spoke, hub))
        return cls(hub.__crd__.group, hub.kind, hub.__crd__.version, table, plural=hub.__crd__.plural)

    def convert(self, obj: Obj, desired_api_version: str) -> Obj:
        """``obj`` in ``desired_api_version`` (see the module docstring for what is kept)."""
        group, _, desired = desired_api_version.rpartition("/")
        source_api = obj.get("apiVersion")
        if not isinstance(source_api, str):
            raise ValueError("the object has no apiVersion")
        source_group, _, source = source_api.rpartition("/")
        if group != self.group or source_group != self.group:
            raise ValueError(
                f"cannot convert {source_api} to {desired_api_version}: this converts {self.group}"
            )
        if obj.get("kind") != self.kind:
            raise ValueError(f"cannot convert a {obj.get('kind')!r}: this converts {self.kind}")
        for version in (source, desired):
            if version != self.hub and version not in self.spokes:
                raise ValueError(
                    f"{self.kind} version {version!r} is unknown; known: {', '.join(self.versions)}"
                )
        if source == desired:
            return obj
        hub = obj if source == self.hub else self.spokes[source][0](obj)
        out = hub if desired == self.hub else self.spokes[desired][1](hub)
        converted = dict(out)
        converted["apiVersion"] = desired_api_version
        converted["kind"] = self.kind
        if "metadata" in obj:
            converted["metadata"] = obj["metadata"]
        return converted

    def review(self, request: ConversionRequest) -> bytes:
        """The ConversionReview response: every object converted, or a failure naming the first one."""
        converted = []
        for obj in request.objects:
            try:
                converted.append(self.convert(obj, request.desired_api_version))
            except Exception as exc:
                name = (obj.get("metadata") or {}).get("name", "?") if isinstance(obj, dict) else "?"
                return conversion_response(
                    request.uid,
                    failure=f"converting {self.kind} {name!r} to {request.desired_api_version}: {exc}",
                )
        return conversion_response(request.uid, converted=converted)


def _dump(model: Any) -> Obj:
    out: Obj = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


def _typed_to_hub(
    spoke: type[CustomResource], hub: type[CustomResource], fn: Callable[[Any], Any] | None = None
) -> Convert:
    def convert(obj: Obj) -> Obj:
        model = spoke.model_validate(obj)
        result = fn(model) if fn is not None else model.to_hub()  # type: ignore[attr-defined]
        if not isinstance(result, hub):
            raise TypeError(
                f"{spoke.__name__}.to_hub returned a {type(result).__name__}, not a {hub.__name__}"
            )
        return _dump(result)

    return convert


def _typed_from_hub(
    spoke: type[CustomResource], hub: type[CustomResource], fn: Callable[[Any], Any] | None = None
) -> Convert:
    def convert(obj: Obj) -> Obj:
        model = hub.model_validate(obj)
        result = fn(model) if fn is not None else spoke.from_hub(model)  # type: ignore[attr-defined]
        if not isinstance(result, spoke):
            raise TypeError(
                f"{spoke.__name__}.from_hub returned a {type(result).__name__}, not a {spoke.__name__}"
            )
        return _dump(result)

    return convert
