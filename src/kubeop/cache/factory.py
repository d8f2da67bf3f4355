"""SharedInformerFactory: one informer per watched collection, shared by everyone who asks.

Controllers ask for informers by what they watch; asking twice for the same resource,
namespace, selectors and metadata-only flag returns the same :class:`~kubeop.cache.informer.Informer`,
so every handler of a kind shares one watch and one cache (client-go's
``SharedInformerFactory``, controller-runtime's informer cache). ``start()`` starts every
informer created so far, and informers created after it start immediately.

Resources are compared by :func:`~kubeop.client.restmapper.resource_key`, the one rule the client
and the controllers use too: an ApiResource, a GVK, a model and a kubectl-style name
(``"deployments"``, ``"deploy"``, ``"Deployment.apps"``) naming one kind are one informer and one
watch. A name is resolved against the discovery the client has loaded (any resolve loads it,
including an informer's start); an informer asked for by a name before that is re-keyed once
discovery knows the name, so a later request by another naming finds it.
"""

from __future__ import annotations

import asyncio
import dataclasses

from kubeop.cache.informer import Informer
from kubeop.cache.listwatch import ListWatch
from kubeop.cache.probe import ServerProbe
from kubeop.cache.transform import Transform, compact
from kubeop.cache.watcher import Config
from kubeop.client.client import Client, ResourceLike
from kubeop.client.restmapper import ResourceKey
from kubeop.core.selectors import FieldSelectorLike, LabelSelectorLike, Selectors

__all__ = ["SharedInformerFactory"]

# What makes two informers one: the resource's key, namespace, selectors, metadata-only.
_Key = tuple[ResourceKey, str, Selectors, bool]


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
        self._informers: dict[_Key, Informer] = {}
        self._by_name: dict[_Key, str] = {}  # informers asked for by a name not yet resolved
        self._started = False
        self._stopped = False

    @property
    def informers(self) -> list[Informer]:
        """Every informer the factory has made."""
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
        key: _Key = (self.client.resource_key(resource), namespace or "", selectors, metadata_only)
        informer = self._informers.get(key)
        if informer is None and self._by_name:
            self._rekey_names()
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
        if isinstance(resource, str) and key[0][0] == "name":
            self._by_name[key] = resource
        if self._started:
            informer.start()
        return informer

    def _rekey_names(self) -> None:
        """File informers asked for by a name under the name's resource, once discovery knows it
        (two names asked for before discovery was loaded stay two informers)."""
        for key, name in list(self._by_name.items()):
            resource_key = self.client.resource_key(name)
            if resource_key[0] == "name":
                continue
            del self._by_name[key]
            resolved: _Key = (resource_key, key[1], key[2], key[3])
            if resolved not in self._informers:
                self._informers[resolved] = self._informers.pop(key)

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
