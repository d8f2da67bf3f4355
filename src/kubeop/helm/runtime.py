"""What the controllers of one Helm operator share: the Helm engine, the release cache, and the
list of namespaced kinds the post-renderer needs. A runnable of the manager (in its caches
phase): the engine and the release cache are made when the manager starts, from its cluster, and
the engine's private files removed when it stops; building controllers needs no cluster."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kubeop.client import Client
from kubeop.controller import ReconcilerClient
from kubeop.core.errors import NotFound
from kubeop.helm.engine import Helm
from kubeop.helm.postrender import kind_key
from kubeop.helm.releases import RELEASE_SECRETS, Release, ReleaseStore, release_from_secret
from kubeop.manager import Phase

if TYPE_CHECKING:
    from kubeop.cluster import Cluster

__all__ = ["HelmRuntime", "storage_secret_name"]

log = logging.getLogger("kubeop.helm")


def storage_secret_name(release: str, version: int) -> str:
    """The Secret in which Helm stores one revision of a release."""
    return f"sh.helm.release.v1.{release}.v{version}"


class HelmRuntime:
    """Shared state of one operator process (see the module docstring); a
    :class:`~kubeop.manager.Runnable`.

    Args:
        helm: a ready :class:`~kubeop.helm.engine.Helm`; by default one is made at the manager's
            start with its credentials and ``helm_options`` (``max_concurrent``,
            ``openapi_validation``, ``binary``, ...).
        namespace: watch only this namespace (operator-sdk's ``WATCH_NAMESPACE``); None: all.
    """

    # Every replica, and stopped after the controllers (their in-flight reconciles use the engine).
    phase = Phase.CACHES
    needs_leader = False
    name = "helm runtime"

    def __init__(
        self, helm: Helm | None = None, *, namespace: str | None = None, **helm_options: Any
    ) -> None:
        self.namespace = namespace
        self._helm = helm
        self._owns_helm = helm is None
        self._helm_options = helm_options
        self._releases: ReleaseStore | None = None
        self._lock = asyncio.Lock()
        self._kinds: tuple[object, frozenset[str]] | None = None
        self._ready = asyncio.Event()

    @property
    def helm(self) -> Helm:
        if self._helm is None:
            raise RuntimeError("the Helm engine exists once the manager started")
        return self._helm

    @property
    def releases(self) -> ReleaseStore:
        if self._releases is None:
            raise RuntimeError("the release store exists once the manager started")
        return self._releases

    async def ready(self, client: ReconcilerClient) -> None:
        """Create the engine and start the release cache (once; later calls return at once)."""
        if self._releases is not None and self._helm is not None:
            return
        async with self._lock:
            if self._helm is None:
                self._helm = Helm(config=client.api.config, **self._helm_options)
            if self._releases is None:
                store = ReleaseStore(client.cache, namespace=self.namespace)
                await store.start()
                self._releases = store

    async def started(self) -> None:
        """Once the release cache listed the releases (the controllers start then)."""
        await self._ready.wait()

    async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
        """Make the engine and start the release cache; close the engine once stopped."""
        try:
            await self.ready(cluster.client)
            self._ready.set()
            await stop.wait()
        finally:
            self._ready.clear()
            self.close()

    def close(self) -> None:
        """Remove the engine's private files (one made here; a second call does nothing)."""
        if self._helm is not None and self._owns_helm:
            self._helm.close()
            self._helm = None

    async def namespaced_kinds(self, api: Client) -> frozenset[str]:
        """``group/Kind`` of every namespaced kind the server serves (from discovery)."""
        mapper = await api.discovery.mapper()
        if self._kinds is None or self._kinds[0] is not mapper:
            kinds = frozenset(
                kind_key(r.api_version, r.kind) for r in mapper.resources if r.namespaced and r.kind
            )
            self._kinds = (mapper, kinds)
        return self._kinds[1]

    async def stored_versions(self, api: Client, namespace: str, name: str) -> list[int]:
        """The revisions of a release in storage, read from the server (not the cache): used
        right after a failed helm command, to learn whether it recorded anything."""
        return [r.version for r in await self.stored_releases(api, namespace, name)]

    async def stored_releases(self, api: Client, namespace: str, name: str) -> list[Release]:
        """The revisions of a release in storage, read from the server, oldest first. A revision
        whose Secret does not decode is there with its version and status only."""
        found = await api.list(RELEASE_SECRETS, namespace=namespace, label_selector=f"owner=helm,name={name}")
        out = []
        for secret in found.items:
            labels = (secret.get("metadata") or {}).get("labels") or {}
            v = labels.get("version", "")
            if not v.isdigit():
                continue
            try:
                out.append(release_from_secret(secret))
            except (ValueError, KeyError, TypeError, OSError, EOFError):
                out.append(Release(name, namespace, int(v), str(labels.get("status") or ""), labels=labels))
        return sorted(out, key=lambda r: r.version)

    async def drop_revisions(self, api: Client, namespace: str, revisions: Iterable[Release]) -> None:
        """Delete stale revisions from Helm's storage (a pending operation that will never
        finish because the process running it died)."""
        for rel in revisions:
            log.warning(
                "release %s/%s: removing revision %d left in status %s by an interrupted helm operation",
                namespace,
                rel.name,
                rel.version,
                rel.status,
            )
            with contextlib.suppress(NotFound):
                await api.delete(
                    RELEASE_SECRETS, storage_secret_name(rel.name, rel.version), namespace=namespace
                )
