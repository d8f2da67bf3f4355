"""Field paths checked against the built-in kinds: ``field='spec.replica'`` on Deployments is an
error at import time (it would never match), naming the part that does not exist.

Only kinds kubeop has models of (:mod:`kubeop.kinds`) are checked, and only down to the first
free-form part (a map such as ``metadata.labels``, a list, an object the model keeps open):
a custom resource's schema is the API server's, unknown when the decorators run. The kind's
module is loaded only when a handler on it has ``field=``.
"""

from __future__ import annotations

import re
import types
import typing
from typing import Any

from kubeop.kopf.diffs import FieldPath

__all__ = ["missing_part"]

_VERSION = re.compile(r"^v\d+((alpha|beta)\d+)?$")


def _plural(kind: str) -> str:
    low = kind.lower()
    if low.endswith("s"):
        return low if low.endswith("endpoints") else f"{low}es"
    if low.endswith("y"):
        return f"{low[:-1]}ies"
    return f"{low}s"


def _builtin_model(resource: str) -> Any:
    """The kubeop.kinds model of a resource named as kopf names it, if it is a built-in kind."""
    from kubeop import kinds  # its names only: a model loads when first looked up

    parts = resource.split(".")
    name, rest = parts[0], parts[1:]
    group: str | None = None
    if rest:
        group = ".".join(rest[1:] if _VERSION.match(rest[0]) else rest).rstrip(".")
    for kind in kinds.__all__:
        if name not in (_plural(kind), kind, kind.lower()):
            continue
        model = getattr(kinds, kind)
        handle = model.resource
        if handle.plural == _plural(kind) and (group is None or group == handle.group):
            return model
    return None


def _unwrap(t: Any) -> Any:
    """``X | None`` -> ``X``; anything else as it is."""
    if isinstance(t, types.UnionType) or typing.get_origin(t) is typing.Union:
        args = [a for a in typing.get_args(t) if a is not type(None)]
        return args[0] if len(args) == 1 else Any
    return t


def missing_part(resource: str, path: FieldPath) -> str | None:
    """The first prefix of ``path`` a built-in kind does not have (None: it exists, or the kind
    or the part is not checked)."""
    if not path:
        return None
    model = _builtin_model(resource)
    if model is None:
        return None
    t: Any = model
    for i, part in enumerate(path):
        if i == 0 and part in ("apiVersion", "kind"):
            return None
        t = _unwrap(t)
        if not (isinstance(t, type) and hasattr(t, "model_fields")):
            return None  # a map, a list, a scalar or an open object: not checked below
        by_wire = {(f.alias or n): n for n, f in t.model_fields.items()}
        if part not in by_wire:
            return ".".join(path[: i + 1])
        t = typing.get_type_hints(t)[by_wire[part]]
    return None
