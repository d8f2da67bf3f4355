"""The NamespaceUsage kind and the storage that computes it from informer caches."""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
from collections.abc import AsyncGenerator, Iterable
from typing import Any

from kubeop.apiserver import ListOptions, ListPage, StatusError, StorageEvent, WatchOptions
from kubeop.cache import FuncHandler, SharedInformerFactory
from kubeop.client import Client
from kubeop.core.resource import ApiResource
from kubeop.crd import CustomResource, PrinterColumn
from kubeop.crd.resource import CamelModel

__all__ = ["COUNTED", "NamespaceUsage", "Usage", "UsageStorage"]

NAMESPACES = ApiResource("", "v1", "namespaces", kind="Namespace", namespaced=False)
COUNTED = {
    "configMaps": ApiResource("", "v1", "configmaps", kind="ConfigMap"),
    "secrets": ApiResource("", "v1", "secrets", kind="Secret"),
    "pods": ApiResource("", "v1", "pods", kind="Pod"),
}
_HISTORY = 1000
_QUEUE = 10_000
_INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class Usage(CamelModel):
    config_maps: int = 0
    secrets: int = 0
    pods: int = 0


class NamespaceUsage(
    CustomResource,
    group="usage.kubeop.dev",
    version="v1alpha1",
    scope="Cluster",
    short_names=["nsu"],
    printer_columns=[
        PrinterColumn("ConfigMaps", ".usage.configMaps", "integer"),
        PrinterColumn("Secrets", ".usage.secrets", "integer"),
        PrinterColumn("Pods", ".usage.pods", "integer"),
    ],
):
    """What one namespace holds, named as the namespace (computed on request)."""

    usage: Usage = Usage()


def _meta(obj: Any) -> dict[str, Any]:
    return dict(obj["metadata"]) if isinstance(obj, dict) else obj.metadata.model_dump(by_alias=True)


class UsageStorage:
    """A read-only Storage of NamespaceUsage objects over the caches of namespaces, ConfigMaps,
    Secrets and Pods. resourceVersions count the changes this process has seen; a watch may
    resume from the last ``history`` of them (older: 410, the client lists again)."""

    def __init__(self, client: Client, *, history: int = _HISTORY) -> None:
        self._factory = SharedInformerFactory(client)
        self._counts: dict[str, collections.Counter[str]] = {}
        self._changed: dict[str, int] = {}  # namespace -> the version its usage last changed at
        self._created: dict[str, str] = {}
        self._version = 0
        self._history: collections.deque[StorageEvent] = collections.deque(maxlen=history)
        self._watchers: set[asyncio.Queue[StorageEvent | None]] = set()
        namespaces = self._factory.informer(NAMESPACES)
        namespaces.add_event_handler(
            FuncHandler(
                on_add=lambda o, _: self._namespace(o, True), on_delete=lambda o: self._namespace(o, False)
            )
        )
        for field, resource in COUNTED.items():
            # counted, never read: metadata only (a Secret's data is never held here)
            informer = self._factory.informer(resource, metadata_only=True)
            informer.add_event_handler(self._counter(field))

    async def start(self, timeout: float = 60.0) -> None:
        """Start the informers and wait until their caches have synced."""
        self._factory.start()
        if not await self._factory.wait_for_cache_sync(timeout=timeout):
            raise TimeoutError("the caches of namespaces, configmaps, secrets and pods did not sync")

    # -- what the caches tell ---------------------------------------------------------------

    def _namespace(self, obj: Any, added: bool) -> None:
        meta = _meta(obj)
        name = str(meta["name"])
        if added:
            self._counts.setdefault(name, collections.Counter())
            self._created[name] = str(meta.get("creationTimestamp") or "")
            self._announce("ADDED", name)
        elif name in self._counts:
            self._announce("DELETED", name)
            self._counts.pop(name, None)
            self._changed.pop(name, None)

    def _counter(self, field: str) -> FuncHandler:
        def added(obj: Any, _initial: bool) -> None:
            self._count(obj, field, 1)

        def deleted(obj: Any) -> None:
            self._count(obj, field, -1)

        return FuncHandler(on_add=added, on_delete=deleted)

    def _count(self, obj: Any, field: str, delta: int) -> None:
        namespace = str(_meta(obj).get("namespace") or "")
        self._counts.setdefault(namespace, collections.Counter())[field] += delta
        self._announce("MODIFIED", namespace)

    def _announce(self, kind: str, namespace: str) -> None:
        self._version += 1
        self._changed[namespace] = self._version
        event = StorageEvent(kind, self._object(namespace), self._version)
        self._history.append(event)
        for queue in list(self._watchers):
            if queue.qsize() >= _QUEUE:  # too far behind: the watch ends, the client resumes
                self._watchers.discard(queue)
                while not queue.empty():
                    queue.get_nowait()
                queue.put_nowait(None)
            else:
                queue.put_nowait(event)

    def _object(self, namespace: str) -> dict[str, Any]:
        counts = self._counts.get(namespace, collections.Counter())
        return {
            "apiVersion": NamespaceUsage.__crd__.api_version,
            "kind": "NamespaceUsage",
            "metadata": {
                "name": namespace,
                "uid": f"usage-{namespace}",
                "resourceVersion": str(self._changed.get(namespace, self._version)),
                "creationTimestamp": self._created.get(namespace)
                or dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            },
            "usage": {field: max(0, counts[field]) for field in COUNTED},
        }

    def _objects(self, options: ListOptions | WatchOptions) -> Iterable[dict[str, Any]]:
        for namespace in sorted(self._counts):
            obj = self._object(namespace)
            if options.labels.matches({}) and options.fields.matches_object(obj):
                yield obj

    # -- the Storage protocol ---------------------------------------------------------------

    async def get(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        if name not in self._counts:
            raise StatusError(
                404,
                f'namespaceusages.usage.kubeop.dev "{name}" not found',
                group="usage.kubeop.dev",
                kind="namespaceusages",
                name=name,
            )
        return self._object(name)

    async def list(self, resource: str, options: ListOptions) -> ListPage:
        return ListPage(list(self._objects(options)), self._version)

    async def create(self, resource: str, namespace: str, name: str, obj: dict[str, Any]) -> dict[str, Any]:
        raise _read_only()

    async def update(
        self, resource: str, namespace: str, name: str, obj: dict[str, Any], *, resource_version: int | None
    ) -> dict[str, Any]:
        raise _read_only()

    async def delete(
        self,
        resource: str,
        namespace: str,
        name: str,
        *,
        resource_version: int | None = None,
        uid: str | None = None,
    ) -> dict[str, Any]:
        raise _read_only()

    async def watch(self, resource: str, options: WatchOptions) -> AsyncGenerator[StorageEvent, None]:
        start = options.resource_version
        oldest = self._history[0].resource_version - 1 if self._history else self._version
        if start is not None and not options.initial_events and start < oldest:
            raise StatusError(410, f"too old resource version: {start}; list again", reason="Expired")
        queue: asyncio.Queue[StorageEvent | None] = asyncio.Queue()
        if start is None or options.initial_events:
            first = [StorageEvent("ADDED", obj, self._version) for obj in self._objects(options)]
            if options.initial_events:
                meta = {"resourceVersion": str(self._version), "annotations": {_INITIAL_EVENTS_END: "true"}}
                first.append(StorageEvent("BOOKMARK", {"metadata": meta}, self._version))
        else:
            first = [e for e in self._history if e.resource_version > start]
        self._watchers.add(queue)  # no await since the snapshot: nothing is missed or repeated
        try:
            for event in first:
                yield event
            while True:
                try:
                    async with asyncio.timeout(options.bookmark_interval if options.bookmarks else None):
                        item = await queue.get()
                except TimeoutError:
                    meta = {"resourceVersion": str(self._version)}
                    yield StorageEvent("BOOKMARK", {"metadata": meta}, self._version)
                    continue
                if item is None:
                    return
                if item.type == "DELETED" or options.fields.matches_object(item.object):
                    yield item
        finally:
            self._watchers.discard(queue)

    async def close(self) -> None:
        """End every watch and stop the informers (APIServer.stop calls this)."""
        for queue in list(self._watchers):
            queue.put_nowait(None)
        self._watchers.clear()
        await self._factory.stop()


def _read_only() -> StatusError:
    return StatusError(
        405,
        "namespaceusages are computed from the cluster and cannot be written; change the namespace's "
        "objects instead",
    )
