"""What every generated built-in model shares: the pydantic configuration, the kind's identity on
the class, and the scalar types (quantities, int-or-string, timestamps).

- Attributes are snake_case; the wire names (camelCase, exactly as the API spells them: ``podIPs``,
  ``hostIPC``) are their aliases. Both names validate; dumps use the wire names.
- Unknown fields are kept (``extra="allow"``): an object from a newer server survives a read and
  a write through these models unchanged.
- Validators are built on first use (``defer_build``), so importing a module costs class creation
  only.
- A top-level kind carries ``api_version``, ``kind`` and ``resource`` as class attributes (the
  :mod:`kubeop.core.model` protocol), so the class is a resource handle for every client verb.
  They are not fields: ``model_dump()`` gives the fields, and :func:`kubeop.core.model.to_dict`
  (what the client sends) puts ``apiVersion`` and ``kind`` first. A Python serializer adding them
  to every dump cost more than the rest of a ConfigMap's dump.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    model_validator,
)

from kubeop.core.resource import ApiResource
from kubeop.kinds._aliases import WIRE_NAMES

__all__ = ["IntOrString", "KubeObject", "KubeStruct", "Quantity", "Time", "wire_name"]


def wire_name(attribute: str) -> str:
    """The JSON name of a snake_case attribute (``pod_ips`` -> ``podIPs``, ``from_`` -> ``from``)."""
    known = WIRE_NAMES.get(attribute)
    if known is not None:
        return known
    head, *rest = attribute.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _quantity(value: Any) -> Any:
    # The server always sends strings ("500m", "1Gi"); callers may write numbers.
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return str(value)
    return value


#: A resource quantity as the server spells it ("500m", "1Gi"); numbers are accepted and kept as text.
Quantity = Annotated[str, BeforeValidator(_quantity)]
#: A port number or a port name ("80" stays a string, 80 an integer).
IntOrString = int | str
#: An RFC 3339 timestamp, kept as the server's text so a read-and-write round trip is exact.
Time = str


class KubeStruct(BaseModel):
    """A nested structure of a built-in kind (PodSpec, Container, ...)."""

    model_config = ConfigDict(
        alias_generator=wire_name,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="allow",
        defer_build=True,
        protected_namespaces=(),
    )


class KubeObject(KubeStruct):
    """A built-in kind: ``api_version``, ``kind`` and ``resource`` are class attributes."""

    api_version: ClassVar[str]
    kind: ClassVar[str]
    resource: ClassVar[ApiResource]

    @model_validator(mode="before")
    @classmethod
    def _check_type(cls, data: Any) -> Any:
        if isinstance(data, dict) and ("kind" in data or "apiVersion" in data):
            kind, api_version = data.get("kind"), data.get("apiVersion")
            if kind is not None and kind != cls.kind:
                raise ValueError(f"kind is {kind!r}, but {cls.__name__} is a {cls.kind}")
            if api_version is not None and api_version != cls.api_version:
                raise ValueError(f"apiVersion is {api_version!r}, but {cls.__name__} is {cls.api_version}")
            return {k: v for k, v in data.items() if k != "kind" and k != "apiVersion"}
        return data
