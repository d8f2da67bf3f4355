"""The storage protocol behind an aggregated API: what every storage (in memory, SQLite, later
etcd) does, and the values that cross it.

A storage keeps the objects of several resources, each named by a key ``"<group>/<plural>"``,
and is the one source of ``metadata.resourceVersion``: every write takes the next number of one
counter shared by all its resources (monotonic, as etcd's revision), so a list's version orders
it against every watch event. Everything else in ``metadata`` (uid, generation,
creationTimestamp) is the server's, set before the object reaches the storage.

Semantics every storage keeps (the unit tests run one suite against each):

- ``create`` of an existing name is 409 AlreadyExists; ``update`` and ``delete`` of a missing one
  404 NotFound; ``update`` with ``resource_version`` set, and ``delete`` with a precondition,
  409 Conflict when the stored object has moved on (optimistic concurrency).
- ``list`` answers one consistent snapshot, in (namespace, name) order, filtered by namespace and
  selectors, at most ``limit`` items with a continue token that serves the next page *from the
  same snapshot*; a token older than the retained history is 410 Expired.
- ``watch`` from a resourceVersion replays every change after it, then follows live; one older
  than the retained history is 410 Expired (the client relists). Without a version it starts with
  the current objects as ADDED. A change that makes an object leave (or enter) the selectors is
  seen as DELETED (ADDED). BOOKMARK events carry the latest version when nothing else moves.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubeop.core.selectors import FieldSelector, LabelSelector

__all__ = ["ListOptions", "ListPage", "Storage", "StorageEvent", "WatchOptions"]


@dataclass(frozen=True, slots=True)
class ListOptions:
    """One list: ``namespace`` None for all namespaces (and for cluster-scoped resources);
    ``limit`` 0 for all; ``continue_token`` from the page before; ``resource_version`` the
    snapshot asked for (None: the latest; see :meth:`Storage.list`)."""

    namespace: str | None = None
    labels: LabelSelector = field(default_factory=LabelSelector)
    fields: FieldSelector = field(default_factory=FieldSelector)
    limit: int = 0
    continue_token: str | None = None
    resource_version: int | None = None
    exact: bool = False


@dataclass(frozen=True, slots=True)
class ListPage:
    items: list[dict[str, Any]]
    resource_version: int
    continue_token: str | None = None
    remaining: int | None = None


@dataclass(frozen=True, slots=True)
class WatchOptions:
    """One watch: ``resource_version`` None to start with the current objects as ADDED events,
    else the version after which changes are replayed; ``bookmarks`` to receive BOOKMARK events
    every ``bookmark_interval`` seconds of quiet. ``initial_events`` (a streaming list): the
    current objects as ADDED events whatever the version, then a BOOKMARK annotated
    ``k8s.io/initial-events-end``, then the changes."""

    namespace: str | None = None
    labels: LabelSelector = field(default_factory=LabelSelector)
    fields: FieldSelector = field(default_factory=FieldSelector)
    resource_version: int | None = None
    bookmarks: bool = False
    bookmark_interval: float = 10.0
    initial_events: bool = False


@dataclass(frozen=True, slots=True)
class StorageEvent:
    """``type`` ADDED, MODIFIED, DELETED or BOOKMARK (whose object holds only the version)."""

    type: str
    object: dict[str, Any]
    resource_version: int


class Storage(Protocol):
    """Where an aggregated API keeps its objects (see the module docstring). ``resource`` is
    ``"<group>/<plural>"``; ``namespace`` is ``""`` for a cluster-scoped resource. Objects given
    and returned are plain JSON dicts, never shared with the caller. Failures raise
    :class:`~kubeop.apiserver.status.StatusError`."""

    async def get(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        """The object ``namespace/name`` (a copy); StatusError 404 when there is none."""
        ...

    async def list(self, resource: str, options: ListOptions) -> ListPage:
        """One page of the objects matching ``options`` (selectors, limit, continue), at one version."""
        ...

    async def create(self, resource: str, namespace: str, name: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a new object and return it with its resourceVersion; StatusError 409 if it exists."""
        ...

    async def update(
        self, resource: str, namespace: str, name: str, obj: dict[str, Any], *, resource_version: int | None
    ) -> dict[str, Any]:
        """Replace the object; StatusError 404 if gone, 409 if ``resource_version`` is not current."""
        ...

    async def delete(
        self,
        resource: str,
        namespace: str,
        name: str,
        *,
        resource_version: int | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        """Remove the object, returning its last state; StatusError 404 if gone, 409 on a precondition."""
        ...

    def watch(self, resource: str, options: WatchOptions) -> AsyncGenerator[StorageEvent, None]:
        """The events; raises StatusError 410 (on the first iteration) when the version asked
        for is older than the retained history. Ends when the storage closes or the watcher
        falls too far behind (the client resumes from its last version)."""
        ...

    async def close(self) -> None:
        """End every watch and release what the storage holds."""
        ...
