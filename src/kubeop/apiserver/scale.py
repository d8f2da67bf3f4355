"""The ``scale`` subresource of a kind that declares :class:`~kubeop.crd.Scale`: the object seen as
an ``autoscaling/v1`` Scale (what ``kubectl scale`` and a HorizontalPodAutoscaler read and write),
and a Scale written back into the object at the declared replica path.

As for a custom resource's scale: the desired count is read from ``spec_replicas_path`` and the
observed one from ``status_replicas_path`` (0 when absent), the selector from
``label_selector_path`` when declared; a write changes only the desired count, and a patch of
an object that has no count must set one (400, not a 0 nobody asked for).
"""

from __future__ import annotations

from typing import Any

from kubeop.apiserver.status import StatusError
from kubeop.core.model import copy_json
from kubeop.crd.declaration import Scale

__all__ = ["SCALE_KIND", "patch_base", "scale_of", "scale_request", "with_replicas"]

SCALE_KIND = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
"""The kind the subresource answers in (its discovery's ``responseKind``)."""

_API_VERSION = "autoscaling/v1"
_MAX_REPLICAS = 2**31 - 1  # an int32, as Scale's replicas
_UNSET = -(2**31)  # a patch's base when the object has no count (kube-apiserver's marker too)
_META = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")


def _steps(path: str) -> list[str]:
    return path.lstrip(".").split(".")


def _read(obj: dict[str, Any], path: str) -> Any:
    node: Any = obj
    for step in _steps(path):
        if not isinstance(node, dict) or step not in node:
            return None
        node = node[step]
    return node


def _count(obj: dict[str, Any], path: str) -> int:
    value = _read(obj, path)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def scale_of(scale: Scale, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as an ``autoscaling/v1`` Scale."""
    meta = obj.get("metadata") or {}
    status: dict[str, Any] = {"replicas": _count(obj, scale.status_replicas_path)}
    if scale.label_selector_path:
        selector = _read(obj, scale.label_selector_path)
        if isinstance(selector, str) and selector:
            status["selector"] = selector
    return {
        "kind": "Scale",
        "apiVersion": _API_VERSION,
        "metadata": {key: meta[key] for key in _META if key in meta},
        "spec": {"replicas": _count(obj, scale.spec_replicas_path)},
        "status": status,
    }


def patch_base(scale: Scale, obj: dict[str, Any]) -> dict[str, Any]:
    """The Scale a patch applies to: ``obj``'s, with a marker for a count the object does not have
    (a patch that leaves it so is refused: 0 was never asked for)."""
    out = scale_of(scale, obj)
    if _read(obj, scale.spec_replicas_path) is None:
        out["spec"]["replicas"] = _UNSET
    return out


def _invalid(name: str, message: str, field: str) -> StatusError:
    return StatusError(
        422,
        f'Scale "{name}" is invalid: {field}: {message}',
        reason="Invalid",
        kind="Scale",
        name=name,
        causes=[("FieldValueInvalid", message, field)],
    )


def scale_request(body: Any, name: str, namespace: str) -> tuple[int, str | None]:
    """The desired replicas of a Scale written to object ``name``, and its resourceVersion (a
    precondition when set). Refuses what is not a Scale of that object, naming the field."""
    if not isinstance(body, dict):
        raise StatusError(400, "a Scale must be a JSON object (apiVersion: autoscaling/v1, kind: Scale)")
    for field, want in (("apiVersion", _API_VERSION), ("kind", "Scale")):
        if body.get(field, want) != want:
            raise StatusError(
                400, f"{field} {body.get(field)!r}: the scale subresource takes {want}; send {field}: {want}"
            )
    meta = body.get("metadata", {})
    if not isinstance(meta, dict):
        raise StatusError(400, "metadata must be an object")
    for field, want in (("name", name), ("namespace", namespace)):
        if meta.get(field, want) != want and (field == "name" or meta.get(field)):
            raise StatusError(
                400,
                f"metadata.{field} {meta.get(field)!r} is not the {field} in the URL ({want!r}): "
                f"send the Scale of the object the URL names",
            )
    version = meta.get("resourceVersion")
    if version is not None and not isinstance(version, str):
        raise StatusError(400, "metadata.resourceVersion must be a string")
    spec = body.get("spec", {})
    if not isinstance(spec, dict):
        raise _invalid(name, "must be an object", "spec")
    replicas = spec.get("replicas", 0)
    if replicas == _UNSET:
        raise StatusError(
            400, f"spec.replicas: the object {name!r} has none, so the Scale written must set spec.replicas"
        )
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        raise _invalid(name, f"{replicas!r}: must be an integer", "spec.replicas")
    if replicas < 0:
        raise _invalid(name, f"{replicas}: must be greater than or equal to 0", "spec.replicas")
    if replicas > _MAX_REPLICAS:
        raise _invalid(name, f"{replicas}: must be at most {_MAX_REPLICAS}", "spec.replicas")
    return replicas, version or None


def with_replicas(scale: Scale, obj: dict[str, Any], replicas: int) -> dict[str, Any]:
    """A copy of ``obj`` with ``replicas`` at the declared desired-count path."""
    out: dict[str, Any] = copy_json(obj)
    node = out
    *parents, leaf = _steps(scale.spec_replicas_path)
    for i, step in enumerate(parents):
        child = node.setdefault(step, {})
        if not isinstance(child, dict):
            where = "." + ".".join(parents[: i + 1])
            raise StatusError(422, f"{where} is not an object, so {scale.spec_replicas_path} cannot be set")
        node = child
    node[leaf] = replicas
    return out
