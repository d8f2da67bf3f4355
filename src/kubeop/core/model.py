"""Typed models: how a model class plugs into the same verbs as plain dicts.

Plain dicts are the default everywhere (decoded once, no conversion cost). A class becomes usable
as a typed model by declaring its type and offering a conversion, with no base class to inherit:

- type: class attributes ``api_version`` and ``kind`` (``ClassVar[str]``), or pydantic fields
  ``apiVersion``/``kind`` with defaults; optionally ``resource: ClassVar[ApiResource]`` (or
  ``__kube_resource__``, which generated models use) so the client needs no discovery for it;
- conversion: a pydantic v2 model (``model_validate`` / ``model_dump``), or any class with a
  ``from_dict`` classmethod and a ``to_dict`` method (the shape generated model packages use).

Conversion happens only at the edge, when the caller passed a model class or instance.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from kubeop.core.gvk import GroupVersionKind
from kubeop.core.resource import ApiResource

__all__ = [
    "Model",
    "ModelMismatch",
    "from_dict",
    "is_model_class",
    "model_gvk",
    "model_resource",
    "to_dict",
]

M = TypeVar("M")


@runtime_checkable
class Model(Protocol):
    """The structural type of a model class (see the module docstring for the accepted forms)."""

    api_version: ClassVar[str]
    kind: ClassVar[str]


def _class_value(cls: type, attr: str, field: str) -> str | None:
    value = cls.__dict__.get(attr)
    if value is None:
        for base in cls.__mro__[1:]:
            if attr in base.__dict__:
                value = base.__dict__[attr]
                break
    if isinstance(value, str) and value:
        return value
    fields = getattr(cls, "model_fields", None)  # pydantic v2 keeps field defaults here
    if isinstance(fields, Mapping) and field in fields:
        default = getattr(fields[field], "default", None)
        if isinstance(default, str) and default:
            return default
    return None


_MODEL_CLASSES: dict[type, bool] = {}


def is_model_class(obj: object) -> bool:
    """True for a class that declares its apiVersion and kind and can convert from a dict
    (looked up once per class: the typed path asks on every read and write)."""
    if not isinstance(obj, type):
        return False
    known = _MODEL_CLASSES.get(obj)
    if known is None:
        known = _MODEL_CLASSES[obj] = _is_model_class(obj)
    return known


def _is_model_class(obj: type) -> bool:
    convertible = hasattr(obj, "model_validate") or hasattr(obj, "from_dict")
    return (
        convertible
        and _class_value(obj, "kind", "kind") is not None
        and (_class_value(obj, "api_version", "apiVersion") is not None)
    )


_GVKS: dict[type, GroupVersionKind] = {}


def model_gvk(cls: type) -> GroupVersionKind:
    """The group/version/kind a model class declares (looked up once per class)."""
    gvk = _GVKS.get(cls)
    if gvk is None:
        gvk = _GVKS[cls] = _model_gvk(cls)
    return gvk


def _model_gvk(cls: type) -> GroupVersionKind:
    api_version = _class_value(cls, "api_version", "apiVersion")
    kind = _class_value(cls, "kind", "kind")
    if not api_version or not kind:
        raise TypeError(
            f"{cls.__qualname__} is not a model class: it needs class attributes api_version and kind "
            "(or pydantic fields apiVersion/kind with defaults)"
        )
    return GroupVersionKind.from_api_version(api_version, kind)


def model_resource(cls: type) -> ApiResource | None:
    """The explicit ApiResource a model class declares, if any (then no discovery is needed)."""
    for attr in ("__kube_resource__", "resource"):
        res = getattr(cls, attr, None)
        if isinstance(res, ApiResource):
            return res
    return None


def to_dict(obj: Any) -> dict[str, Any]:
    """An object dict for the wire: dicts pass through unchanged, models are dumped.

    apiVersion/kind are filled from the model class when the dump lacks them (a ClassVar is
    not a pydantic field, so it is not dumped).
    """
    if isinstance(obj, dict):
        return obj
    dump = getattr(obj, "model_dump", None)  # before the Mapping check: an ABC check is slow
    if dump is not None:
        data: dict[str, Any] = dump(mode="json", by_alias=True, exclude_none=True)
    elif isinstance(obj, Mapping):
        return dict(obj)
    else:
        to = getattr(obj, "to_dict", None)
        if to is None:
            raise TypeError(f"cannot send a {type(obj).__qualname__}: expected a dict or a model instance")
        data = to()
    if "apiVersion" not in data or "kind" not in data:
        gvk = model_gvk(type(obj))
        data = {"apiVersion": gvk.api_version, "kind": gvk.kind, **data}
    return data


class ModelMismatch(ValueError):
    """An object from the server does not fit the model class it was read into.

    Names the kind, the object and every field that did not fit, with the fix. The controller
    treats it as terminal (no retries: the next change to the object reconciles it again).
    """

    def __init__(self, model: type, data: Mapping[str, Any], errors: list[tuple[str, str]]) -> None:
        md = data.get("metadata") if isinstance(data.get("metadata"), Mapping) else {}
        self.model = model
        self.kind = str(data.get("kind") or _class_value(model, "kind", "kind") or model.__qualname__)
        self.name = str((md or {}).get("name") or "")
        self.namespace = str((md or {}).get("namespace") or "")
        self.errors = errors
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name or "<unnamed>"
        fields = "; ".join(f"{field}: {msg}" for field, msg in errors[:5])
        more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
        super().__init__(
            f"{self.kind} {where} does not fit the model {model.__qualname__}: {fields}{more}. "
            f"{_fix(model, errors)}"
        )


def _fix(model: type, errors: list[tuple[str, str]]) -> str:
    text = " ".join(msg for _, msg in errors).lower()
    if "extra" in text and "not permitted" in text:
        return (
            f"The server sent a field {model.__qualname__} does not declare: declare it, or keep unknown "
            "fields with model_config = ConfigDict(extra='allow')."
        )
    if "required" in text:
        return (
            f"The server's object lacks a field {model.__qualname__} requires: make it optional "
            "(a default, or `| None = None`), or set it on the object."
        )
    return f"Make {model.__qualname__}'s field types accept what the server sends."


def _validation_errors(exc: Exception) -> list[tuple[str, str]] | None:
    errors = getattr(exc, "errors", None)
    if type(exc).__name__ != "ValidationError" or not callable(errors):
        return None
    out = []
    for err in errors():
        loc = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in err.get("loc", ()))
        out.append((loc.replace(".[", "[") or "<object>", str(err.get("msg", ""))))
    return out


def from_dict(cls: type[M], data: dict[str, Any], *, lazy: bool = False, shared: bool = False) -> M:
    """Build a model instance from an object dict; :class:`ModelMismatch` when it does not fit.

    ``lazy=True`` defers the work to the first use of the instance (any attribute, a dump, a
    comparison, a copy): for server data a caller may never read, such as the object a write
    returns. Until then ``type(obj)`` is a private subclass of ``cls`` (``isinstance`` holds),
    afterwards ``cls`` itself; a :class:`ModelMismatch` is raised at that first use. ``data``
    is read then, so it must not change in between (the cache's and the server's dicts do not).
    Classes other than pydantic models are built at once.

    ``shared=True``: ``data`` is also kept elsewhere (a cache): the model is built from a copy of
    it, since a field typed ``Any`` or ``dict[str, Any]`` holds its value as given and changing
    the model would change ``data`` too (with ``lazy``, the copy is made at the first use).
    """
    if lazy:
        lazy_cls = _LAZY_CLASSES.get(cls)
        if lazy_cls is None:
            lazy_cls = _LAZY_CLASSES[cls] = _lazy_class(cls)
        if lazy_cls is not None:
            obj: Any = object.__new__(lazy_cls)
            object.__setattr__(obj, "__pydantic_private__", _Pending(data, shared))  # until validated
            return obj  # type: ignore[no-any-return]
    if shared:
        data = copy_json(data)
    validate = _validator(cls)
    if validate is not None:
        try:
            return validate(data)  # type: ignore[no-any-return]
        except ValueError as exc:
            raise _mismatch(cls, data, exc) from exc
    build = getattr(cls, "from_dict", None)
    if build is None:
        raise TypeError(f"{cls.__qualname__} has neither model_validate nor from_dict")
    return build(data)  # type: ignore[no-any-return]


def _mismatch(cls: type, data: Any, exc: ValueError) -> ValueError:
    errors = _validation_errors(exc)
    if errors is None or not isinstance(data, Mapping):
        return exc
    return ModelMismatch(cls, data, errors)


_VALIDATORS: dict[type, Any] = {}


def _validator(cls: type) -> Any:
    """How to validate a dict into ``cls`` (looked up once per class): pydantic's validator
    itself when the class keeps pydantic's ``model_validate`` (that method only adds Python
    around it), else the class's own ``model_validate``; None for a class without one."""
    try:
        return _VALIDATORS[cls]
    except KeyError:
        pass
    validate = getattr(cls, "model_validate", None)
    if validate is not None:
        owner = next(k for k in cls.__mro__ if "model_validate" in vars(k))
        if owner.__module__.startswith("pydantic.") and hasattr(cls, "__pydantic_validator__"):

            def validate(data: Any, cls: Any = cls) -> Any:
                # Looked up per call: a class with a deferred build replaces its validator.
                return cls.__pydantic_validator__.validate_python(data)

    _VALIDATORS[cls] = validate
    return validate


_LAZY_CLASSES: dict[type, type | None] = {}


class _Pending:
    """The source of a lazy model that has not been built yet."""

    __slots__ = ("data", "shared")

    def __init__(self, data: Any, shared: bool) -> None:
        self.data = data
        self.shared = shared


def copy_json(value: Any) -> Any:
    """A deep copy of decoded JSON (dicts, lists, scalars): several times faster than deepcopy."""
    t = type(value)
    if t is dict:
        return {k: copy_json(v) for k, v in value.items()}
    if t is list:
        return [copy_json(v) for v in value]
    if t is str or t is int or t is float or t is bool or value is None:
        return value
    return copy.deepcopy(value)


def _lazy_class(cls: type) -> type | None:
    """The subclass of a pydantic model class whose instances validate their source on first
    use, then become instances of ``cls`` (same layout: ``__class__`` can be swapped)."""
    if _validator(cls) is None or not hasattr(cls, "__pydantic_validator__"):
        return None

    def __getattribute__(self: Any, name: str) -> Any:
        if name == "__class__":
            return object.__getattribute__(self, name)
        state = object.__getattribute__(self, "__pydantic_private__")
        object.__setattr__(self, "__class__", cls)
        if type(state) is _Pending:  # else a copy made by copy.copy of one: built already
            object.__setattr__(self, "__pydantic_private__", None)
            try:
                data = copy_json(state.data) if state.shared else state.data
                cls.__pydantic_validator__.validate_python(data, self_instance=self)
            except BaseException as exc:
                object.__setattr__(self, "__class__", lazy)  # stay unbuilt: each use raises
                object.__setattr__(self, "__pydantic_private__", state)
                if isinstance(exc, ValueError):
                    raise _mismatch(cls, state.data, exc) from exc
                raise
        return getattr(self, name)

    namespace = {
        "__slots__": (),
        "__getattribute__": __getattribute__,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__,
    }
    # type.__new__, not the model metaclass: no second pydantic model is built for it.
    lazy: type = type.__new__(type(cls), cls.__name__, (cls,), namespace)
    return lazy
