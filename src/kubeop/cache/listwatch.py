"""ListerWatcher: the two calls a watcher makes (list a page, open a watch), and the client-backed one.

The watcher depends only on the :class:`ListerWatcher` protocol, so its state machine can be
tested against an in-memory fake and reused over any source of list/watch semantics.
:class:`ListWatch` implements it over a :class:`~kubeop.client.Client` for one resource, one
namespace (or all) and optional selectors, full objects or metadata only.

``metadata_only=True`` lists and watches ``PartialObjectMetadata`` through the client's
metadata-only mode (see :mod:`kubeop.client.client`): objects are ``{apiVersion, kind, metadata}``
of the watched kind, for kinds a controller only needs to map to owners.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Protocol, TypedDict, runtime_checkable

from kubeop.cache.probe import ServerProbe
from kubeop.client.client import Client, ObjectList, ResourceLike
from kubeop.client.watch import WatchEvent
from kubeop.core.request import ResourceVersionMatch
from kubeop.core.resource import ApiResource
from kubeop.core.selectors import FieldSelectorLike, LabelSelectorLike, Selectors

__all__ = ["ListWatch", "ListerWatcher", "StreamingListerWatcher"]

Obj = dict[str, Any]


class ListerWatcher(Protocol):
    """Lists pages and opens watches of one collection (client-go ``ListerWatcher``)."""

    #: Readiness probe shared by the watchers of one server, or None (plain backoff).
    probe: ServerProbe | None

    @property
    def description(self) -> str:
        """What is being watched, for logs (``configmaps in namespace "x"``)."""
        ...

    async def list(
        self,
        *,
        limit: int | None,
        continue_: str | None,
        resource_version: str | None,
        resource_version_match: ResourceVersionMatch | None = None,
    ) -> ObjectList[Obj]:
        """One page; items carry ``apiVersion`` and ``kind``."""
        ...

    async def watch(
        self,
        *,
        resource_version: str | None,
        timeout_seconds: int | None,
        send_initial_events: bool = False,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent[Obj]]:
        """Open a watch; the request is sent when the returned iterator is first advanced.

        The iterator raises the typed :class:`~kubeop.core.errors.ApiError` of a failed request
        or of an ERROR event, and :class:`~kubeop.client.ApiConnectionError` when the connection
        fails; closing it closes the connection.
        """
        ...


@runtime_checkable
class StreamingListerWatcher(ListerWatcher, Protocol):
    """A ListerWatcher that can also hand out a page's items as they arrive: the watcher then
    fills the cache while the rest of a large list is still on the wire."""

    def list_stream(
        self,
        *,
        limit: int | None,
        continue_: str | None,
        resource_version: str | None,
        resource_version_match: ResourceVersionMatch | None = None,
    ) -> AsyncIterator[ObjectList[Obj]]:
        """One page in parts (each with the page's resourceVersion and continue token)."""
        ...


class _Scope(TypedDict):
    """The arguments of every client call of a :class:`ListWatch`: what it lists and watches."""

    namespace: str | None
    all_namespaces: bool
    selectors: Selectors
    metadata_only: bool


class ListWatch:
    """List and watch ``resource`` through ``client``.

    ``namespace=None`` watches all namespaces (unlike the client's verbs, where None means the
    default namespace): an informer sees what it was asked for and nothing implicit. The resource
    is resolved (discovery) on first use, so constructing a ListWatch needs no I/O.

    ``probe``: the readiness probe of the API server, shared by its watchers (see
    :mod:`kubeop.cache.probe`); without one the ListWatch makes its own.
    """

    def __init__(
        self,
        client: Client,
        resource: ResourceLike,
        *,
        namespace: str | None = None,
        label_selector: LabelSelectorLike | None = None,
        field_selector: FieldSelectorLike | None = None,
        metadata_only: bool = False,
        probe: ServerProbe | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace or None
        self.selectors = Selectors.of(label_selector, field_selector)
        self.metadata_only = metadata_only
        self.probe: ServerProbe | None = probe if probe is not None else ServerProbe.for_client(client)
        self._api_resource: ApiResource | None = resource if isinstance(resource, ApiResource) else None

    @property
    def label_selector(self) -> str | None:
        """The label selector, in the query-string form (None: none)."""
        return self.selectors.labels

    @property
    def field_selector(self) -> str | None:
        """The field selector, in the query-string form (None: none)."""
        return self.selectors.fields

    @property
    def description(self) -> str:
        """What is listed and watched, for logs: the resource, namespace and selectors."""
        res = self._api_resource
        what = res.display_name if res is not None else str(getattr(self.resource, "__name__", self.resource))
        if self.metadata_only:
            what += " (metadata)"
        if self.namespace:
            what += f' in namespace "{self.namespace}"'
        return what + self.selectors.describe()

    def _scope(self) -> _Scope:
        return {
            "namespace": self.namespace,
            "all_namespaces": self.namespace is None,
            "selectors": self.selectors,
            "metadata_only": self.metadata_only,
        }

    async def _resolved(self) -> ApiResource:
        res = self._api_resource
        if res is None:
            res = self._api_resource = await self.client.resource(self.resource)
        return res

    async def list(
        self,
        *,
        limit: int | None,
        continue_: str | None,
        resource_version: str | None,
        resource_version_match: ResourceVersionMatch | None = None,
    ) -> ObjectList[Obj]:
        """One page of the list (with the source's namespace and selectors)."""
        return await self.client.list(
            await self._resolved(),
            **self._scope(),
            limit=limit,
            continue_=continue_,
            resource_version=resource_version,
            resource_version_match=resource_version_match,
            share_strings=False,  # the informer's transform strips managedFields, the bulk of them
        )

    async def list_stream(
        self,
        *,
        limit: int | None,
        continue_: str | None,
        resource_version: str | None,
        resource_version_match: ResourceVersionMatch | None = None,
    ) -> AsyncIterator[ObjectList[Obj]]:
        """The list, in parts as they arrive (with the source's namespace and selectors)."""
        async for part in self.client.list_stream(
            await self._resolved(),
            **self._scope(),
            limit=limit,
            continue_=continue_,
            resource_version=resource_version,
            resource_version_match=resource_version_match,
        ):
            yield part

    async def watch(
        self,
        *,
        resource_version: str | None,
        timeout_seconds: int | None,
        send_initial_events: bool = False,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent[Obj]]:
        """A watch from ``resource_version`` (with the source's namespace and selectors)."""
        return self.client.watch(
            await self._resolved(),
            **self._scope(),
            resource_version=resource_version,
            allow_bookmarks=allow_bookmarks,
            send_initial_events=send_initial_events,
            timeout_seconds=timeout_seconds,
        )
