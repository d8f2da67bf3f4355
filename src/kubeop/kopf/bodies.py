"""The views a handler gets: ``body``/``meta``/``spec``/``status`` and the ``patch`` it fills.

``body`` is the object as the cache holds it (read-only: a handler changes the object through
``patch``). ``meta`` has kopf's attribute shortcuts (``meta.name``, ``meta.labels`` ...).
``patch`` is a merge patch: ``patch.status["x"] = 1`` or ``patch.metadata.labels["a"] = "b"``;
``None`` deletes a key. Every handler of one cycle shares one patch, written in one request.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, TypedDict, cast

__all__ = [
    "Body",
    "BodyEssence",
    "Meta",
    "ObjectReference",
    "OwnerReference",
    "Patch",
    "PatchFn",
    "RawBody",
    "RawEventType",
    "RawMeta",
    "Spec",
    "Status",
    "build_object_reference",
    "build_owner_reference",
]

RawEventType = Literal[None, "ADDED", "MODIFIED", "DELETED", "BOOKMARK"]
"""The ``type`` of a watch event (``kopf.RawEventType``; None for the initial listing)."""


class RawMeta(TypedDict, total=False):
    """An object's ``metadata`` as the API server sends it."""

    uid: str
    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    finalizers: list[str]
    resourceVersion: str
    deletionTimestamp: str
    creationTimestamp: str
    selfLink: str


class RawBody(TypedDict, total=False):
    """An object as the API server sends it (``kopf.RawBody``)."""

    apiVersion: str
    kind: str
    metadata: RawMeta
    spec: dict[str, Any]
    status: dict[str, Any]


class BodyEssence(TypedDict, total=False):
    """The part of an object whose change is a change (``kopf.BodyEssence``: no status,
    no system metadata)."""

    metadata: dict[str, Any]
    spec: dict[str, Any]


class ObjectReference(TypedDict, total=False):
    """A reference to an object, as in events (``kopf.ObjectReference``)."""

    apiVersion: str
    kind: str
    namespace: str | None
    name: str
    uid: str


class OwnerReference(TypedDict, total=False):
    """An entry of ``metadata.ownerReferences`` (``kopf.OwnerReference``)."""

    controller: bool
    blockOwnerDeletion: bool
    apiVersion: str
    kind: str
    name: str
    uid: str


def build_object_reference(body: Mapping[str, Any]) -> ObjectReference:
    """``body``'s reference for events: the fields it has of apiVersion, kind, name, uid, namespace."""
    md = body.get("metadata") or {}
    ref = {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "name": md.get("name"),
        "uid": md.get("uid"),
        "namespace": md.get("namespace"),
    }
    return cast(ObjectReference, {k: v for k, v in ref.items() if v})


def build_owner_reference(
    body: Mapping[str, Any], *, controller: bool | None = True, block_owner_deletion: bool | None = True
) -> OwnerReference:
    """The ``ownerReferences`` entry making ``body`` the owner (None leaves a flag out)."""
    md = body.get("metadata") or {}
    ref = {
        "controller": controller,
        "blockOwnerDeletion": block_owner_deletion,
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "name": md.get("name"),
        "uid": md.get("uid"),
    }
    return cast(OwnerReference, {k: v for k, v in ref.items() if v is not None})


class _View(Mapping[str, Any]):
    """A read-only mapping over a part of the object (empty if the part is absent)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None) -> None:
        self._data: Mapping[str, Any] = data if data is not None else {}

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return repr(dict(self._data))

    def __eq__(self, other: object) -> bool:
        return dict(self._data) == other

    __hash__ = None  # type: ignore[assignment]


class Meta(_View):
    """A read-only view of an object's metadata, as kopf's handlers get it (``meta``)."""

    @property
    def name(self) -> str | None:
        """The object's name."""
        return self._data.get("name")

    @property
    def namespace(self) -> str | None:
        """The object's namespace (None when cluster-scoped)."""
        return self._data.get("namespace")

    @property
    def uid(self) -> str | None:
        """The object's uid."""
        return self._data.get("uid")

    @property
    def labels(self) -> Mapping[str, str]:
        """The object's labels (empty when none)."""
        return _View(self._data.get("labels"))

    @property
    def annotations(self) -> Mapping[str, str]:
        """The object's annotations (empty when none)."""
        return _View(self._data.get("annotations"))

    @property
    def creation_timestamp(self) -> str | None:
        """When the object was created (RFC 3339 text)."""
        return self._data.get("creationTimestamp")

    @property
    def deletion_timestamp(self) -> str | None:
        """When the object's deletion was requested (None while it lives)."""
        return self._data.get("deletionTimestamp")


class Body(_View):
    """A read-only view of a whole object, as kopf's handlers get it (``body``)."""

    @property
    def metadata(self) -> Meta:
        """The object's metadata (also as ``meta``)."""
        return Meta(self._data.get("metadata"))

    meta = metadata

    @property
    def spec(self) -> Mapping[str, Any]:
        """The object's spec (empty when none)."""
        return _View(self._data.get("spec"))

    @property
    def status(self) -> Mapping[str, Any]:
        """The object's status (empty when none)."""
        return _View(self._data.get("status"))


Spec = Mapping[str, Any]
"""The type of the ``spec`` kwarg (for annotations, as ``kopf.Spec``)."""
Status = Mapping[str, Any]
"""The type of the ``status`` kwarg (``kopf.Status``)."""


class Patch(dict[str, Any]):
    """A merge patch with kopf's stanza shortcuts (``patch.spec``, ``patch.status``, ``patch.meta``)."""

    def _stanza(self, key: str) -> Any:
        value = self.get(key)
        if not isinstance(value, dict):
            value = self[key] = _Stanza()
        return value

    @property
    def metadata(self) -> _Stanza:
        """The patch's metadata stanza (also as ``meta``), created on first write."""
        return self._stanza("metadata")  # type: ignore[no-any-return]

    meta = metadata

    @property
    def spec(self) -> _Stanza:
        """The patch's spec stanza, created on first write."""
        return self._stanza("spec")  # type: ignore[no-any-return]

    @property
    def status(self) -> _Stanza:
        """The patch's status stanza, created on first write."""
        return self._stanza("status")  # type: ignore[no-any-return]


class _Stanza(dict[str, Any]):
    """A dict whose ``labels``/``annotations``/``finalizers``-like sub-dicts appear on first use."""

    @property
    def labels(self) -> dict[str, Any]:
        return self.setdefault("labels", {})  # type: ignore[no-any-return]

    @property
    def annotations(self) -> dict[str, Any]:
        return self.setdefault("annotations", {})  # type: ignore[no-any-return]


PatchFn = Callable[[RawBody], None]
"""A function changing an object in place (``kopf.PatchFn``)."""
