"""ListerWatcher: the two calls a watcher makes (list a page, open a watch), and the client-backed one.

The watcher depends only on the :class:`ListerWatcher` protocol, so its state machine can be
tested against an in-memory fake and reused over any source of list/watch semantics.
:class:`ListWatch` implements it over a :class:`~kubeop.client.Client` for one resource, one
namespace (or all) and optional selectors, full objects or metadata only.

Metadata-only watches use the API server's content negotiation
(``Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`` for lists and
``as=PartialObjectMetadata`` for watches, with plain JSON as the fallback the server may pick):
the server drops spec and status before sending, which saves bandwidth, decoding and memory for
kinds a controller only needs to map to owners. Objects come back as ``PartialObjectMetadata``;
here they get the resource's own ``apiVersion`` and ``kind`` again (as controller-runtime's
metadata informers do), so handlers can treat them like the full objects they stand for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any, Protocol

from kubeop.cache.probe import ServerProbe, probe_for
from kubeop.client.client import Client, ObjectList, ResourceLike
from kubeop.client.watch import WatchEvent
from kubeop.core.request import (
    FieldSelectorLike,
    LabelSelectorLike,
    RequestBuilder,
    ResourceVersionMatch,
    field_selector_text,
    label_selector_text,
)
from kubeop.core.resource import ApiResource

__all__ = ["ListWatch", "ListerWatcher"]

Obj = dict[str, Any]

ACCEPT_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
_METADATA_KEYS = frozenset({"apiVersion", "kind", "metadata"})


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


class ListWatch:
    """List and watch ``resource`` through ``client``.

    ``namespace=None`` watches all namespaces (unlike the client's verbs, where None means the
    default namespace): an informer sees what it was asked for and nothing implicit. The resource
    is resolved (discovery) on first use, so constructing a ListWatch needs no I/O.
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
        self.label_selector = label_selector_text(label_selector)
        self.field_selector = field_selector_text(field_selector)
        self.metadata_only = metadata_only
        self.probe: ServerProbe | None = probe if probe is not None else probe_for(client)
        self._builder: RequestBuilder | None = None
        self._api_resource: ApiResource | None = resource if isinstance(resource, ApiResource) else None

    @property
    def description(self) -> str:
        res = self._api_resource
        what = res.display_name if res is not None else str(getattr(self.resource, "__name__", self.resource))
        if self.metadata_only:
            what += " (metadata)"
        if self.namespace:
            what += f' in namespace "{self.namespace}"'
        if self.label_selector:
            what += f" with labels {self.label_selector}"
        if self.field_selector:
            what += f" with fields {self.field_selector}"
        return what

    async def _requests(self) -> RequestBuilder:
        if self._builder is None:
            res = await self.client.resource(self.resource)
            self._api_resource = res
            self._builder = RequestBuilder(res, self.namespace)
        return self._builder

    async def list(
        self,
        *,
        limit: int | None,
        continue_: str | None,
        resource_version: str | None,
        resource_version_match: ResourceVersionMatch | None = None,
    ) -> ObjectList[Obj]:
        builder = await self._requests()
        req = builder.list(
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            limit=limit,
            continue_=continue_,
            resource_version=resource_version,
            resource_version_match=resource_version_match,
        )
        if self.metadata_only:
            req = dataclasses.replace(req, accept=ACCEPT_METADATA_LIST)
        doc = await self.client.request(req)
        meta = doc.get("metadata") or {}
        items: list[Obj] = doc.get("items") or []
        res = builder.resource
        api_version, kind = res.api_version, res.kind
        if self.metadata_only:
            for item in items:
                _as_metadata(item, api_version, kind)
        elif kind:
            for item in items:
                if "kind" not in item:  # lists of built-in kinds leave these out of their items
                    item["apiVersion"] = api_version
                    item["kind"] = kind
        return ObjectList(
            items=items,
            resource_version=meta.get("resourceVersion") or "",
            continue_=meta.get("continue") or None,
            remaining_item_count=meta.get("remainingItemCount"),
            kind=doc.get("kind") or "",
        )

    async def watch(
        self,
        *,
        resource_version: str | None,
        timeout_seconds: int | None,
        send_initial_events: bool = False,
        allow_bookmarks: bool = True,
    ) -> AsyncIterator[WatchEvent[Obj]]:
        builder = await self._requests()
        req = builder.watch(
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            resource_version=resource_version,
            allow_bookmarks=allow_bookmarks,
            send_initial_events=send_initial_events,
            timeout_seconds=timeout_seconds,
        )
        if not self.metadata_only:
            return self.client.transport.stream(req)
        req = dataclasses.replace(req, accept=ACCEPT_METADATA)
        res = builder.resource
        return _metadata_events(self.client.transport.stream(req), res.api_version, res.kind)


def _as_metadata(obj: Obj, api_version: str, kind: str) -> None:
    """Turn a PartialObjectMetadata (or, if the server ignored the Accept header, a full object)
    into ``{apiVersion, kind, metadata}`` of the watched kind, in place."""
    if len(obj) > 3 or not _METADATA_KEYS.issuperset(obj):
        for key in [k for k in obj if k not in _METADATA_KEYS]:
            del obj[key]
    if kind:
        obj["apiVersion"] = api_version
        obj["kind"] = kind


async def _metadata_events(
    events: AsyncIterator[WatchEvent[Obj]], api_version: str, kind: str
) -> AsyncIterator[WatchEvent[Obj]]:
    try:
        async for event in events:
            if event.type != "BOOKMARK":
                _as_metadata(event.object, api_version, kind)
            yield event
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
