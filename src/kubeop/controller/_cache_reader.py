"""CacheReader: which informer serves a reconciler client's reads, and the resource a read names.

One record of the informers: a controller registers the informer of each kind it watches
(:meth:`InformerRegistry.use`), and reads of that kind are served from it; a kind nobody watches
gets a cluster-wide informer from the shared factory on its first read. Resources are resolved
through the client (discovery) and made canonical by
:func:`~kubeop.client.restmapper.resource_key`, so however a kind is named, its reads, informers
and remembered writes live under one ApiResource.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from kubeop.client import ResourceLike
from kubeop.client.restmapper import ResourceKey
from kubeop.core.gvk import GroupVersionKind
from kubeop.core.model import is_model_class
from kubeop.core.resource import ApiResource

if TYPE_CHECKING:
    from kubeop.cache import SharedInformerFactory
    from kubeop.client import Client

Obj = dict[str, Any]


class CachedStore(Protocol):
    def get_by_key(self, key: str) -> Obj | None: ...
    def by_index(self, index_name: str, value: str) -> list[Obj]: ...
    def list(self) -> list[Obj]: ...


class CachedInformer(Protocol):
    """What a read needs of an informer: its store, whether it has synced, what it has applied."""

    @property
    def store(self) -> CachedStore: ...
    def has_synced(self) -> bool: ...
    async def wait_for_sync(self) -> bool: ...
    def has_applied(self, resource_version: str) -> bool: ...


class InformerRegistry:
    """Which informer serves the reads of each resource (and of a resource in one namespace)."""

    def __init__(self) -> None:
        self._primary: dict[ApiResource, CachedInformer] = {}
        # Informers limited to another namespace than the resource's first one (controllers of
        # one kind in several namespaces): reads in that namespace use them.
        self._scoped: dict[tuple[ApiResource, str], CachedInformer] = {}

    def use(self, res: ApiResource, informer: CachedInformer, namespace: str | None = None) -> None:
        """Serve reads of ``res`` from ``informer`` (limited to ``namespace`` if given). The first
        informer registered for a resource wins; a later one limited to another namespace
        serves the reads in that namespace."""
        first = self._primary.setdefault(res, informer)
        if first is not informer and namespace and res.namespaced:
            self._scoped.setdefault((res, namespace), informer)

    def get(self, res: ApiResource) -> CachedInformer | None:
        """The informer serving ``res``, or None when nothing was registered or started for it."""
        return self._primary.get(res)

    @property
    def lookup(self) -> Callable[[ApiResource], CachedInformer | None]:
        """:meth:`get` as the map's own ``get``: no Python-level call per use (the write
        ledger's sweep looks up every remembered write's informer)."""
        return self._primary.get

    def add(self, res: ApiResource, informer: CachedInformer) -> CachedInformer:
        """Register ``informer`` for ``res`` unless one is already; the one that serves it."""
        return self._primary.setdefault(res, informer)

    def in_namespace(self, res: ApiResource, namespace: str) -> CachedInformer | None:
        """The informer limited to ``namespace`` registered for ``res``, if any."""
        return self._scoped.get((res, namespace))

    @property
    def scoped(self) -> bool:
        """Whether any informer limited to one namespace is registered (reads check it first)."""
        return bool(self._scoped)


class CacheReader:
    """Resolves what a read names and finds the synced informer that answers it."""

    def __init__(self, api: Client, cache: SharedInformerFactory) -> None:
        self._api = api
        self._cache = cache
        self.informers = InformerRegistry()
        # The registry's maps, read directly on the hot path (a method call per read costs ~5 %
        # of a no-op reconcile).
        self._primary = self.informers._primary
        self._scoped = self.informers._scoped
        # How each naming seen resolved (model classes, names, (apiVersion, kind) of objects).
        self.resolved: dict[Any, ApiResource] = {}
        self._canonical: dict[ResourceKey, ApiResource] = {}

    def canonical(self, res: ApiResource) -> ApiResource:
        """The first ApiResource seen of ``res``'s resource (see
        :func:`~kubeop.client.restmapper.resource_key`)."""
        if res.kind:  # resource_key's answer for an ApiResource with a kind, without the call
            key: ResourceKey = (res.group, res.version, res.kind)
        else:
            key = self._api.resource_key(res)
        return self._canonical.setdefault(key, res)

    async def resolve(self, what: ResourceLike | Mapping[str, Any]) -> ApiResource:
        """The canonical ApiResource of a kind, a model (class or instance) or an object dict."""
        if isinstance(what, ApiResource):
            if what.kind:  # canonical(), inlined: the hot path's most common naming
                return self._canonical.setdefault((what.group, what.version, what.kind), what)
            return self.canonical(what)
        resolved = self.resolved
        res = resolved.get(type(what))  # a model instance of a kind resolved before
        if res is not None:
            return res
        if type(what) is dict or isinstance(what, Mapping):
            key: Any = (what.get("apiVersion"), what.get("kind"))
        elif isinstance(what, (type, str)):
            key = what
        elif is_model_class(type(what)):
            key = type(what)
        else:
            key = what
        res = resolved.get(key)
        if res is None:
            if isinstance(key, tuple):
                if not key[0] or not key[1]:
                    raise ValueError("the object has no apiVersion/kind: set them before writing it")
                res = await self._api.resource(GroupVersionKind.from_api_version(key[0], key[1]))
            else:
                res = await self._api.resource(key)
            res = resolved[key] = self.canonical(res)
        return res

    async def informer(self, res: ApiResource, namespace: str | None = None) -> CachedInformer:
        """The synced informer serving reads of ``res`` (in ``namespace``, when an informer
        limited to it is registered). The first read of a kind nobody watches starts a
        cluster-wide informer for it and waits for its first list, as controller-runtime's
        cache does."""
        informer = self._primary.get(res)
        if informer is None:
            # Started outside the reconcile that first reads the kind: the informer's tasks run
            # for the whole process and must not log as that reconcile.
            informer = self.informers.add(res, contextvars.Context().run(self._cache.informer, res))
        if namespace and self._scoped:
            informer = self._scoped.get((res, namespace)) or informer
        if not informer.has_synced():
            await informer.wait_for_sync()
        return informer
