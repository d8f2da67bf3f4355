"""SharedInformerFactory: one informer per watched collection, shared by everyone who asks.

Controllers ask for informers by what they watch; asking twice for the same resource,
namespace, selectors and metadata-only flag returns the same :class:`~kubeop.cache.informer.Informer`,
so every handler of a kind shares one watch and one cache (client-go's
``SharedInformerFactory``, controller-runtime's informer cache). ``start()`` starts every
informer created so far, and informers created after it start immediately.

Resources are compared by what can be known without discovery: an ApiResource and a GVK (or a
model) naming the same group, version and kind are one informer; a kubectl-style string is only
equal to the same string. Use one form per kind to share.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Hashable
from typing import Any

from kubeop.cache.informer import Informer
from kubeop.cache.listwatch import ListWatch
from kubeop.cache.probe import ServerProbe
from kubeop.cache.transform import Transform, compact
from kubeop.cache.watcher import Config
from kubeop.client.client import Client, ResourceLike
from kubeop.core.gvk import GroupVersionKind
from kubeop.core.model import is_model_class, model_gvk, model_resource
from kubeop.core.resource import ApiResource
from kubeop.core.selectors import FieldSelectorLike, LabelSelectorLike, Selectors

__all__ = ["SharedInformerFactory"]


class SharedInformerFactory:
    """Creates and runs the informers of one client.

    Args:
        client: the client every informer lists and watches with (not closed by the factory).
        resync_period: default resync period of every informer's handlers (0: none).
        transform: applied to every object before caching (``compact`` by default).
        page_size: objects per list page when a paged list is used.
        config: further watcher settings for all informers (page_size overrides its own).
        detect_mutations: see :class:`~kubeop.cache.informer.Informer`.
        probe: the API server's readiness probe, shared by every informer (and by whoever else
            waits for that server: ``factory.probe``); one is made for ``client`` if not given.
    """

    def __init__(
        self,
        client: Client,
        *,
        resync_period: float = 0.0,
        transform: Transform | None = compact,
        page_size: int = 500,
        config: Config | None = None,
        detect_mutations: bool | None = None,
        probe: ServerProbe | None = None,
    ) -> None:
        self.client = client
        self.probe = probe if probe is not None else ServerProbe.for_client(client)
        self.resync_period = resync_period
        self.transform = transform
        self.config = dataclasses.replace(config if config is not None else Config(), page_size=page_size)
        self.detect_mutations = detect_mutations
        self._informers: dict[Hashable, Informer] = {}
        self._started = False
        self._stopped = False

    @property
    def informers(self) -> list[Informer]:
        return list(self._informers.values())

    def informer(
        self,
        resource: ResourceLike,
        *,
        namespace: str | None = None,
        label_selector: LabelSelectorLike | None = None,
        field_selector: FieldSelectorLike | None = None,
        metadata_only: bool = False,
    ) -> Informer:
        """The informer for ``resource`` in ``namespace`` (None: all namespaces) with these
        selectors, created on first request (no I/O: the resource is resolved when it starts)."""
        if self._stopped:
            raise RuntimeError("the informer factory is stopped")
        selectors = Selectors.of(label_selector, field_selector)
        key = (_resource_identity(resource), namespace or "", selectors, metadata_only)
        informer = self._informers.get(key)
        if informer is not None:
            return informer
        source = ListWatch(
            self.client,
            resource,
            namespace=namespace,
            label_selector=selectors.labels,
            field_selector=selectors.fields,
            metadata_only=metadata_only,
            probe=self.probe,
        )
        informer = Informer(
            source,
            resync_period=self.resync_period,
            transform=self.transform,
            config=self.config,
            detect_mutations=self.detect_mutations,
        )
        self._informers[key] = informer
        if self._started:
            informer.start()
        return informer

    def start(self) -> None:
        """Start every informer (on the running loop); later ones start when created."""
        if self._stopped:
            raise RuntimeError("the informer factory is stopped")
        self._started = True
        for informer in self._informers.values():
            informer.start()

    async def wait_for_cache_sync(self, timeout: float | None = None) -> bool:
        """Wait until every started informer has synced; False if ``timeout`` passed first."""
        informers = [i for i in self._informers.values() if i.started]
        if all(i.has_synced() for i in informers):
            return True
        try:
            async with asyncio.timeout(timeout):
                for informer in informers:
                    await informer.wait_for_sync()
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        """Stop every informer; raises CacheMutationError if mutation detection found any."""
        self._stopped = True
        errors: list[BaseException] = []
        for informer in self._informers.values():
            try:
                await informer.stop()
            except AssertionError as e:  # CacheMutationError: report after stopping everything
                errors.append(e)
        if errors:
            raise errors[0]

    async def __aenter__(self) -> SharedInformerFactory:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def _resource_identity(resource: ResourceLike) -> Hashable:
    """What makes two ways of naming a resource the same informer, without asking the server."""
    if isinstance(resource, ApiResource):
        if resource.kind:
            return ("gvk", resource.group, resource.version, resource.kind)
        return ("gvr", resource.group, resource.version, resource.plural)
    if isinstance(resource, GroupVersionKind):
        return ("gvk", resource.group, resource.version, resource.kind)
    if isinstance(resource, type) and is_model_class(resource):
        res = model_resource(resource)
        if res is not None:
            return _resource_identity(res)
        gvk = model_gvk(resource)
        return ("gvk", gvk.group, gvk.version, gvk.kind)
    if isinstance(resource, str):
        return ("name", resource.lower())
    ident: Any = resource
    return ("other", ident)
