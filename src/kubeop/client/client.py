"""Client: every verb on every resource, with plain dicts by default and typed models on request.

A resource is named in one of four ways, from fastest to most convenient:

- an :class:`~kubeop.core.resource.ApiResource` (no discovery at all: the hot-path form);
- a model class (its ``resource`` class attribute, or its apiVersion/kind through discovery);
- a :class:`~kubeop.core.gvk.GroupVersionKind` (discovery, cached; an empty version means the
  preferred one);
- a kubectl-style name: ``"configmaps"``, ``"deploy"``, ``"deployments.apps"`` (discovery).

Objects are the dicts the server sent, decoded once. Passing a model class (reads) or a model
instance (writes) converts at the edge and returns model instances instead.

Metadata only: ``list``/``watch`` with ``metadata_only=True`` ask the server for
``PartialObjectMetadata`` (content negotiation, with plain JSON as the fallback it may pick): it
drops spec and status before sending, which saves bandwidth, decoding and memory for kinds a
caller only needs to map to owners. Objects come back as ``{apiVersion, kind, metadata}`` of the
listed kind (as controller-runtime's metadata informers see them), so they read like the full
objects they stand for.

Namespaces: ``namespace=None`` means the client's default namespace (from the kubeconfig context
or the pod's service account) for namespaced resources; list/watch take ``all_namespaces=True``
to span the cluster. For writes the object's own ``metadata.namespace`` wins over the default.

Selectors: the collection verbs (``list``, ``list_stream``, ``pages``, ``list_all``, ``watch``,
``delete_collection``) take ``label_selector=`` and ``field_selector=`` (a string, a mapping or a
selector object), or both as one value, ``selectors=Selectors.of(...)``
(:class:`~kubeop.core.selectors.Selectors`); given both ways, an object must match both.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar, Unpack, overload

from kubeop.client.config import ClientConfig, load_config
from kubeop.client.discovery import Discovery
from kubeop.client.restmapper import ResourceKey
from kubeop.client.transport import HttpTransport, Transport
from kubeop.client.watch import WatchEvent
from kubeop.core.errors import NotFound
from kubeop.core.gvk import GroupVersionKind
from kubeop.core.model import from_dict, is_model_class, model_gvk, model_resource, to_dict
from kubeop.core.patch import PatchType
from kubeop.core.request import (
    ApiRequest,
    FieldValidation,
    PropagationPolicy,
    RequestBuilder,
    ResourceVersionMatch,
)
from kubeop.core.resource import ApiResource
from kubeop.core.selectors import Selection, Selectors

if TYPE_CHECKING:
    from kubeop.client.openapi import OpenAPIModels
    from kubeop.core.openapi import KubeModel

__all__ = ["ACCEPT_METADATA", "ACCEPT_METADATA_LIST", "Client", "ObjectList", "ResourceLike"]

M = TypeVar("M")
O = TypeVar("O")  # noqa: E741 - an object: a dict or a model instance
T = TypeVar("T")
Obj = dict[str, Any]
_Items = list[Obj]  # ("list" is a method name inside Client)
ResourceLike = ApiResource | GroupVersionKind | str | type[Any]

#: Accept headers of metadata-only lists and watches (plain JSON is the fallback the server may pick).
ACCEPT_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
_METADATA_KEYS = frozenset({"apiVersion", "kind", "metadata"})


@dataclass(slots=True)
class ObjectList(Generic[T]):
    """One list response: the items plus the collection's resourceVersion and continue token.

    ``resource_version`` is what a following watch starts from; ``continue_`` is set while more
    pages remain. Iterating the list iterates the items.
    """

    items: list[T]
    resource_version: str
    continue_: str | None = None
    remaining_item_count: int | None = None
    kind: str = field(default="")

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


_MANAGED_FIELDS_STRINGS = ("manager", "operation", "apiVersion", "time", "fieldsType")


def _fill_and_share(items: list[Any], api_version: str, kind: str) -> None:
    """Fill in each item's apiVersion and kind, and make equal metadata strings one object.

    A JSON decoder makes a new string for every value, so the namespace, creationTimestamp and
    managedFields' manager/operation/apiVersion/time/fieldsType of 10,000 items are 10,000 copies
    each (~0.4 KB per item; ~12 % of a 1 KB ConfigMap). Strings are immutable, so sharing them
    changes nothing for the caller; it costs ~1 us per item.
    """
    memo: dict[str, str] = {}
    share = memo.setdefault
    for item in items:
        if kind and "kind" not in item:
            item["apiVersion"] = api_version
            item["kind"] = kind
        meta = item.get("metadata")
        if not meta:
            continue
        value = meta.get("namespace")
        if value is not None:
            meta["namespace"] = share(value, value)
        value = meta.get("creationTimestamp")
        if value is not None:
            meta["creationTimestamp"] = share(value, value)
        managed = meta.get("managedFields")
        if managed:
            for entry in managed:
                for key in _MANAGED_FIELDS_STRINGS:
                    value = entry.get(key)
                    if value is not None:
                        entry[key] = share(value, value)


def _as_metadata(obj: Obj, api_version: str, kind: str) -> None:
    """Turn a PartialObjectMetadata (or, if the server ignored the Accept header, a full object)
    into ``{apiVersion, kind, metadata}`` of the listed kind, in place."""
    if len(obj) > 3 or not _METADATA_KEYS.issuperset(obj):
        for key in [k for k in obj if k not in _METADATA_KEYS]:
            del obj[key]
    if kind:
        obj["apiVersion"] = api_version
        obj["kind"] = kind


def _no_model(what: ResourceLike) -> None:
    if is_model_class(what):
        raise TypeError(
            f"metadata_only=True gives {{apiVersion, kind, metadata}} dicts, not {what.__name__} "  # type: ignore[union-attr]
            "instances: name the resource by its ApiResource, GroupVersionKind or name instead"
        )


class Client:
    """An async Kubernetes client. Use ``async with Client(config) as client:`` or ``await close()``.

    One client holds one connection pool, one TLS context, one rate limiter and one discovery
    cache; share it across all tasks of a program.
    """

    def __init__(
        self,
        config: ClientConfig | None = None,
        *,
        transport: Transport | None = None,
        discovery: Discovery | None = None,
    ) -> None:
        if transport is None:
            transport = HttpTransport(config if config is not None else load_config())
        self.transport = transport
        self.config = transport.config
        self.discovery = discovery if discovery is not None else Discovery(transport)
        self._openapi: OpenAPIModels | None = None  # built on first use: pydantic costs ~9 MB
        self._model_resources: dict[type, ApiResource] = {}

    @classmethod
    def from_kubeconfig(
        cls, path: str | Sequence[str] | None = None, *, context: str | None = None, **overrides: Any
    ) -> Client:
        """A client for a kubeconfig's cluster: ``path`` (default ``$KUBECONFIG``, then ``~/.kube/config``),
        its ``context`` (default: the current one), and ``overrides`` of the :class:`ClientConfig` fields.
        """
        from kubeop.client.kubeconfig import load_kubeconfig

        return cls(load_kubeconfig(path, context=context, **overrides))

    @property
    def namespace(self) -> str:
        """The default namespace for namespaced resources."""
        return self.config.namespace

    async def close(self) -> None:
        """Close the client's connections; in-flight requests fail. ``async with Client(...)`` closes it for
        you.
        """
        await self.transport.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- resolving --------------------------------------------------------------------------------

    async def resource(self, what: ResourceLike) -> ApiResource:
        """The ApiResource for any accepted way of naming one (see the module docstring).

        Two namings are the same resource when :meth:`resource_key` says so; an ApiResource is
        used as given (no discovery)."""
        if isinstance(what, ApiResource):
            return what
        if isinstance(what, GroupVersionKind):
            return await self.discovery.resource_for(what)
        if isinstance(what, str):
            return await self.discovery.find(what)
        if isinstance(what, type):
            cached = self._model_resources.get(what)
            if cached is None:
                cached = model_resource(what) or await self.discovery.resource_for(model_gvk(what))
                self._model_resources[what] = cached
            return cached
        raise TypeError(f"cannot name a resource with {type(what).__name__}: {what!r}")

    def resource_key(self, what: ResourceLike | Mapping[str, Any]) -> ResourceKey:
        """Which resource ``what`` names, without I/O (:func:`~kubeop.client.restmapper.resource_key`
        against the discovery loaded so far): equal keys share one informer and one cache."""
        return self.discovery.key(what)

    async def model(self, what: ResourceLike) -> type[KubeModel]:
        """A typed pydantic model for a served kind, generated from the server's OpenAPI v3.

        ``Deployment = await client.model("deployments.apps")``; then ``await client.get(
        Deployment, "web")`` returns a ``Deployment`` and ``client.create(Deployment(...))``
        sends one. Built once per kind and cached; see :mod:`kubeop.core.openapi` for how.
        """
        if self._openapi is None:
            from kubeop.client.openapi import OpenAPIModels

            self._openapi = OpenAPIModels(self.transport)
        return await self._openapi.model_for(await self.resource(what))

    async def _resource_of(self, obj: Any, body: Obj, resource: ApiResource | None) -> ApiResource:
        if resource is not None:
            if not isinstance(obj, Mapping) and is_model_class(type(obj)):
                _check_kind(type(obj), resource)
            return resource
        if not isinstance(obj, Mapping) and is_model_class(type(obj)):
            return await self.resource(type(obj))
        return await self.discovery.resource_for(GroupVersionKind.of(body))

    def _namespace(self, res: ApiResource, namespace: str | None, obj: Obj | None = None) -> str | None:
        if not res.namespaced:
            return None
        if namespace:
            return namespace
        if obj is not None:
            ns = (obj.get("metadata") or {}).get("namespace")
            if ns:
                return str(ns)
        return self.config.namespace

    @staticmethod
    def _out(what: Any, data: Any, *, lazy: bool = False) -> Any:
        return from_dict(what, data, lazy=lazy) if is_model_class(what) else data

    @staticmethod
    def _out_like(obj: Any, data: Any) -> Any:
        # The server's answer to a write: a model is built when the caller first uses it.
        return data if isinstance(obj, Mapping) else from_dict(type(obj), data, lazy=True)

    async def request(self, req: ApiRequest) -> Any:
        """Send a prebuilt request (from :class:`~kubeop.core.request.RequestBuilder`)."""
        return await self.transport.request(req)

    # -- reads --------------------------------------------------------------------------------------

    @overload
    async def get(
        self, what: type[M], name: str, *, namespace: str | None = ..., subresource: str | None = ...
    ) -> M: ...
    @overload
    async def get(
        self,
        what: ApiResource | GroupVersionKind | str,
        name: str,
        *,
        namespace: str | None = ...,
        subresource: str | None = ...,
    ) -> Obj: ...
    async def get(
        self, what: ResourceLike, name: str, *, namespace: str | None = None, subresource: str | None = None
    ) -> Any:
        """Read one object; raises :class:`~kubeop.core.errors.NotFound` if it does not exist."""
        res = await self.resource(what)
        req = RequestBuilder(res, self._namespace(res, namespace)).get(name, subresource=subresource)
        return self._out(what, await self.transport.request(req))

    @overload
    async def get_or_none(self, what: type[M], name: str, *, namespace: str | None = ...) -> M | None: ...
    @overload
    async def get_or_none(
        self, what: ApiResource | GroupVersionKind | str, name: str, *, namespace: str | None = ...
    ) -> Obj | None: ...
    async def get_or_none(self, what: ResourceLike, name: str, *, namespace: str | None = None) -> Any:
        """Like :meth:`get`, but ``None`` when the object does not exist."""
        try:
            return await self.get(what, name, namespace=namespace)
        except NotFound:
            return None

    @overload
    async def list(
        self,
        what: type[M],
        *,
        namespace: str | None = ...,
        all_namespaces: bool = ...,
        limit: int | None = ...,
        continue_: str | None = ...,
        resource_version: str | None = ...,
        resource_version_match: ResourceVersionMatch | None = ...,
        metadata_only: bool = ...,
        share_strings: bool = ...,
        **selection: Unpack[Selection],
    ) -> ObjectList[M]: ...
    @overload
    async def list(
        self,
        what: ApiResource | GroupVersionKind | str,
        *,
        namespace: str | None = ...,
        all_namespaces: bool = ...,
        limit: int | None = ...,
        continue_: str | None = ...,
        resource_version: str | None = ...,
        resource_version_match: ResourceVersionMatch | None = ...,
        metadata_only: bool = ...,
        share_strings: bool = ...,
        **selection: Unpack[Selection],
    ) -> ObjectList[Obj]: ...
    async def list(
        self,
        what: ResourceLike,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        limit: int | None = None,
        continue_: str | None = None,
        resource_version: str | None = None,
        resource_version_match: ResourceVersionMatch | None = None,
        metadata_only: bool = False,
        share_strings: bool = True,
        **selection: Unpack[Selection],
    ) -> ObjectList[Any]:
        """One list call (one page when ``limit`` is set). Items get ``apiVersion`` and ``kind``
        filled in (the server omits them inside lists) so they can be sent back as they are.
        ``metadata_only=True``: items are ``{apiVersion, kind, metadata}`` (see the module docstring).
        Equal metadata strings of the items are made one object (~0.4 KB less per kept item, ~1 us
        per item); ``share_strings=False`` skips that for callers that drop managedFields anyway
        (informers: their default transform strips them)."""
        res, req = await self._list_request(
            what,
            namespace=namespace,
            all_namespaces=all_namespaces,
            selectors=Selectors.of_selection(selection, call="Client.list"),
            limit=limit,
            continue_=continue_,
            resource_version=resource_version,
            resource_version_match=resource_version_match,
            metadata_only=metadata_only,
        )
        doc = await self.transport.request(req)
        meta = doc.get("metadata") or {}
        items = doc.get("items") or []
        if metadata_only:
            for item in items:
                _as_metadata(item, res.api_version, res.kind)
        if share_strings:
            _fill_and_share(items, res.api_version, res.kind)
        elif res.kind and not metadata_only:
            for item in items:
                if "kind" not in item:
                    item["apiVersion"] = res.api_version
                    item["kind"] = res.kind
        if is_model_class(what):
            items = [from_dict(what, item) for item in items]  # type: ignore[arg-type]
        return ObjectList(
            items=items,
            resource_version=meta.get("resourceVersion") or "",
            continue_=meta.get("continue") or None,
            remaining_item_count=meta.get("remainingItemCount"),
            kind=doc.get("kind") or "",
        )

    async def list_stream(
        self,
        what: ApiResource | GroupVersionKind | str,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        limit: int | None = None,
        continue_: str | None = None,
        resource_version: str | None = None,
        resource_version_match: ResourceVersionMatch | None = None,
        metadata_only: bool = False,
        **selection: Unpack[Selection],
    ) -> AsyncIterator[ObjectList[Obj]]:
        """One list call like :meth:`list` (dicts only), read as it arrives: yields the items in
        parts as soon as each is decoded, so a caller can use a large list while the rest is
        still coming (informers do). Every part carries the list's ``resource_version`` and
        ``continue_`` (the server sends them before the items); the parts' items together are
        the page. Items get ``apiVersion`` and ``kind``, strings are not shared."""
        res, req = await self._list_request(
            what,
            namespace=namespace,
            all_namespaces=all_namespaces,
            selectors=Selectors.of_selection(selection, call="Client.list_stream"),
            limit=limit,
            continue_=continue_,
            resource_version=resource_version,
            resource_version_match=resource_version_match,
            metadata_only=metadata_only,
        )
        api_version, kind = res.api_version, res.kind
        async for head, items in self._list_parts(req):
            if metadata_only:
                for item in items:
                    _as_metadata(item, api_version, kind)
            elif kind:
                for item in items:
                    if "kind" not in item:
                        item["apiVersion"] = api_version
                        item["kind"] = kind
            meta = head.get("metadata") or {}
            yield ObjectList(
                items=items,
                resource_version=meta.get("resourceVersion") or "",
                continue_=meta.get("continue") or None,
                remaining_item_count=meta.get("remainingItemCount"),
                kind=head.get("kind") or "",
            )

    async def _list_request(
        self,
        what: ResourceLike,
        *,
        namespace: str | None,
        all_namespaces: bool,
        selectors: Selectors,
        limit: int | None,
        continue_: str | None,
        resource_version: str | None,
        resource_version_match: ResourceVersionMatch | None,
        metadata_only: bool,
    ) -> tuple[ApiResource, ApiRequest]:
        """The resource and the request of one list call (:meth:`list`, :meth:`list_stream`)."""
        if metadata_only:
            _no_model(what)
        res = await self.resource(what)
        ns = None if all_namespaces else self._namespace(res, namespace)
        req = RequestBuilder(res, ns).list(
            selectors=selectors,
            limit=limit,
            continue_=continue_,
            resource_version=resource_version,
            resource_version_match=resource_version_match,
        )
        if metadata_only:
            req = replace(req, accept=ACCEPT_METADATA_LIST)
        return res, req

    async def _list_parts(self, req: ApiRequest) -> AsyncIterator[tuple[Obj, _Items]]:
        stream_list = getattr(self.transport, "stream_list", None)
        if stream_list is None:  # a transport written before stream_list: the whole page at once
            doc = dict(await self.transport.request(req) or {})
            yield doc, doc.pop("items", None) or []
            return
        async for part in stream_list(req):
            yield part

    async def pages(
        self,
        what: ResourceLike,
        *,
        page_size: int = 500,
        namespace: str | None = None,
        all_namespaces: bool = False,
        **selection: Unpack[Selection],
    ) -> AsyncIterator[ObjectList[Any]]:
        """Yield pages of ``page_size`` until the collection is exhausted.

        All pages come from the snapshot of the first (the continue token pins it), so every
        object appears exactly once. If the token expires mid-way the server answers 410 and
        :class:`~kubeop.core.errors.Expired` is raised: start over.
        """
        scope = Selectors.of_selection(selection, call="Client.pages")
        token: str | None = None
        while True:
            page = await self.list(
                what,
                namespace=namespace,
                all_namespaces=all_namespaces,
                selectors=scope,
                limit=page_size,
                continue_=token,
            )
            yield page
            token = page.continue_
            if not token:
                return

    async def list_all(
        self,
        what: ResourceLike,
        *,
        page_size: int = 500,
        namespace: str | None = None,
        all_namespaces: bool = False,
        **selection: Unpack[Selection],
    ) -> ObjectList[Any]:
        """All pages joined; ``resource_version`` is the snapshot's (the first page's)."""
        items: list[Any] = []
        rv = ""
        kind = ""
        async for page in self.pages(
            what,
            page_size=page_size,
            namespace=namespace,
            all_namespaces=all_namespaces,
            selectors=Selectors.of_selection(selection, call="Client.list_all"),
        ):
            rv = rv or page.resource_version
            kind = kind or page.kind
            items.extend(page.items)
        return ObjectList(items=items, resource_version=rv, kind=kind)

    async def watch(
        self,
        what: ResourceLike,
        *,
        namespace: str | None = None,
        all_namespaces: bool = False,
        name: str | None = None,
        resource_version: str | None = None,
        resource_version_match: ResourceVersionMatch | None = None,
        allow_bookmarks: bool = True,
        send_initial_events: bool = False,
        timeout_seconds: int | None = None,
        metadata_only: bool = False,
        **selection: Unpack[Selection],
    ) -> AsyncGenerator[WatchEvent[Any], None]:
        """Stream ADDED/MODIFIED/DELETED/BOOKMARK events until the server ends the watch.

        Start from the ``resource_version`` of a list to see every change after it. An ERROR
        event raises its typed error: :class:`~kubeop.core.errors.Gone` when the version is too
        old (relist, then watch again). This is one watch call; restarting, relisting and
        backoff belong to the watcher in kubeop.cache. ``metadata_only=True``: objects are
        ``{apiVersion, kind, metadata}`` (see the module docstring); bookmarks stay as sent.
        """
        if metadata_only:
            _no_model(what)
        res = await self.resource(what)
        ns = None if all_namespaces else self._namespace(res, namespace)
        req = RequestBuilder(res, ns).watch(
            name=name,
            selectors=Selectors.of_selection(selection, call="Client.watch"),
            resource_version=resource_version,
            resource_version_match=resource_version_match,
            allow_bookmarks=allow_bookmarks,
            send_initial_events=send_initial_events,
            timeout_seconds=timeout_seconds,
        )
        if metadata_only:
            req = replace(req, accept=ACCEPT_METADATA)
        typed = is_model_class(what)
        events = self.transport.stream(req)
        try:
            if metadata_only:
                api_version, kind = res.api_version, res.kind
                async for event in events:
                    if event.type != "BOOKMARK":
                        _as_metadata(event.object, api_version, kind)
                    yield event
            elif typed:
                async for event in events:
                    if event.type != "BOOKMARK":
                        event = WatchEvent(event.type, from_dict(what, event.object))  # type: ignore[arg-type]
                    yield event
            else:
                async for event in events:
                    yield event
        finally:
            await events.aclose()

    # -- writes -------------------------------------------------------------------------------------

    async def create(
        self,
        obj: O,
        *,
        namespace: str | None = None,
        resource: ApiResource | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: FieldValidation | None = None,
    ) -> O:
        """Create ``obj``; raises :class:`~kubeop.core.errors.AlreadyExists` if the name is taken."""
        body = to_dict(obj)
        res = await self._resource_of(obj, body, resource)
        req = RequestBuilder(res, self._namespace(res, namespace, body)).create(
            body, dry_run=dry_run, field_manager=field_manager, field_validation=field_validation
        )
        return self._out_like(obj, await self.transport.request(req))  # type: ignore[no-any-return]

    async def update(
        self,
        obj: O,
        *,
        subresource: str | None = None,
        resource: ApiResource | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        field_validation: FieldValidation | None = None,
    ) -> O:
        """Replace ``obj`` (PUT). With ``metadata.resourceVersion`` set, a concurrent change makes
        the server answer :class:`~kubeop.core.errors.Conflict`: read again and redo the change."""
        body = to_dict(obj)
        res = await self._resource_of(obj, body, resource)
        name = (body.get("metadata") or {}).get("name") or ""
        req = RequestBuilder(res, self._namespace(res, None, body)).replace(
            name,
            body,
            subresource=subresource,
            dry_run=dry_run,
            field_manager=field_manager,
            field_validation=field_validation,
        )
        return self._out_like(obj, await self.transport.request(req))  # type: ignore[no-any-return]

    replace = update

    async def update_status(self, obj: O, *, resource: ApiResource | None = None, dry_run: bool = False) -> O:
        """PUT the ``status`` subresource (the main resource ignores status changes when the
        status subresource is enabled, and the status endpoint ignores everything else)."""
        return await self.update(obj, subresource="status", resource=resource, dry_run=dry_run)

    @overload
    async def patch(
        self,
        what: type[M],
        name: str,
        patch: Any,
        *,
        type: PatchType = ...,
        namespace: str | None = ...,
        subresource: str | None = ...,
        dry_run: bool = ...,
        field_manager: str | None = ...,
        force: bool = ...,
    ) -> M: ...
    @overload
    async def patch(
        self,
        what: ApiResource | GroupVersionKind | str,
        name: str,
        patch: Any,
        *,
        type: PatchType = ...,
        namespace: str | None = ...,
        subresource: str | None = ...,
        dry_run: bool = ...,
        field_manager: str | None = ...,
        force: bool = ...,
    ) -> Obj: ...
    async def patch(
        self,
        what: ResourceLike,
        name: str,
        patch: Any,
        *,
        type: PatchType = PatchType.MERGE,
        namespace: str | None = None,
        subresource: str | None = None,
        dry_run: bool = False,
        field_manager: str | None = None,
        force: bool = False,
    ) -> Any:
        """Patch one object: merge (default), JSON patch (a list of ops), strategic merge
        (built-in kinds only) or server-side apply (see :meth:`apply`). A model instance as
        ``patch`` is sent as its dump and must be of the kind ``what`` names."""
        res = await self.resource(what)
        if not isinstance(patch, Mapping | list | str | bytes) and is_model_class(patch.__class__):
            _check_kind(patch.__class__, res)
            patch = to_dict(patch)
        req = RequestBuilder(res, self._namespace(res, namespace)).patch(
            name,
            patch,
            type,
            subresource=subresource,
            dry_run=dry_run,
            field_manager=field_manager,
            force=force,
        )
        return self._out(what, await self.transport.request(req), lazy=True)

    async def apply(
        self,
        obj: O,
        *,
        field_manager: str,
        force: bool = False,
        subresource: str | None = None,
        namespace: str | None = None,
        resource: ApiResource | None = None,
        dry_run: bool = False,
    ) -> O:
        """Server-side apply: ``obj`` is the full intent of ``field_manager``.

        Fields this manager set before and left out now are removed; fields another manager owns
        with a different value raise :class:`~kubeop.core.errors.Conflict` unless ``force``,
        which takes them over. Creates the object if it does not exist.
        """
        body = to_dict(obj)
        res = await self._resource_of(obj, body, resource)
        name = (body.get("metadata") or {}).get("name") or ""
        req = RequestBuilder(res, self._namespace(res, namespace, body)).patch(
            name,
            body,
            PatchType.APPLY,
            subresource=subresource,
            dry_run=dry_run,
            field_manager=field_manager,
            force=force,
        )
        return self._out_like(obj, await self.transport.request(req))  # type: ignore[no-any-return]

    async def apply_status(
        self, obj: O, *, field_manager: str, force: bool = False, dry_run: bool = False
    ) -> O:
        """Server-side apply ``obj``'s status (the status subresource) as ``field_manager``; see
        :meth:`apply`.
        """
        return await self.apply(
            obj, field_manager=field_manager, force=force, subresource="status", dry_run=dry_run
        )

    async def delete(
        self,
        what: ResourceLike,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: PropagationPolicy | None = None,
        grace_period_seconds: int | None = None,
        precondition_uid: str | None = None,
        precondition_resource_version: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """Delete one object. Returns what the server returns: the object (still present while
        finalizers run, with deletionTimestamp set) or a Status. Preconditions turn a delete of
        a replaced or changed object into :class:`~kubeop.core.errors.Conflict`."""
        res = await self.resource(what)
        req = RequestBuilder(res, self._namespace(res, namespace)).delete(
            name,
            propagation_policy=propagation_policy,
            grace_period_seconds=grace_period_seconds,
            precondition_uid=precondition_uid,
            precondition_resource_version=precondition_resource_version,
            dry_run=dry_run,
        )
        return await self.transport.request(req)  # type: ignore[no-any-return]

    async def delete_collection(
        self,
        what: ResourceLike,
        *,
        namespace: str | None = None,
        propagation_policy: PropagationPolicy | None = None,
        dry_run: bool = False,
        **selection: Unpack[Selection],
    ) -> Obj:
        """Delete every object in the namespace that matches the selectors (all if none given)."""
        res = await self.resource(what)
        req = RequestBuilder(res, self._namespace(res, namespace)).delete_collection(
            selectors=Selectors.of_selection(selection, call="Client.delete_collection"),
            propagation_policy=propagation_policy,
            dry_run=dry_run,
        )
        return await self.transport.request(req)  # type: ignore[no-any-return]

    # -- scale ------------------------------------------------------------------------------------

    async def get_scale(self, what: ResourceLike, name: str, *, namespace: str | None = None) -> Obj:
        """The ``scale`` subresource (an autoscaling/v1 Scale: spec.replicas, status.replicas)."""
        return await self.get(await self.resource(what), name, namespace=namespace, subresource="scale")

    async def scale(
        self,
        what: ResourceLike,
        name: str,
        replicas: int,
        *,
        namespace: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """Set ``spec.replicas`` through the scale subresource (works for any scalable kind)."""
        res = await self.resource(what)
        return await self.patch(
            res,
            name,
            {"spec": {"replicas": replicas}},
            namespace=namespace,
            subresource="scale",
            dry_run=dry_run,
        )


def _check_kind(cls: type, res: ApiResource) -> None:
    """A model written through a handle of another kind is a bug at the call, not a 404 later."""
    gvk = model_gvk(cls)
    if (gvk.group, gvk.version) != (res.group, res.version) or (res.kind and gvk.kind != res.kind):
        raise TypeError(
            f"cannot write a {cls.__qualname__} ({gvk.api_version} {gvk.kind}) as "
            f"{res.kind or res.plural} ({res.api_version}): pass an object of that kind, "
            "or name the resource of the object's own kind"
        )
