"""``@kopf.index``: in-memory indices of a resource's objects, kept from kubeop's shared informer.

An indexing handler is called for each object of its resource as the informer sees it (listed,
added, changed) and returns ``{key: value}`` (anything else is stored under the key ``None``);
the index maps each key to the values of all objects that gave it (an object's values go when it
is deleted or stops giving the key). Other handlers get the index as a keyword argument named
after the indexing handler's id: ``def fn(is_running: kopf.Index, **_)``. Handlers of the
operator wait for the indices' first full listing before their first call (kopf's semantics).

An indexing handler's exception is logged and leaves the object out of the index until its next
change (kopf retries it; kubeop does not, as an informer callback cannot wait).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kubeop.cache import DeletedFinalStateUnknown, FuncHandler
from kubeop.core.resource import ApiResource
from kubeop.kopf import on
from kubeop.kopf.bodies import Body
from kubeop.kopf.diffs import FieldPath, resolve
from kubeop.kopf.handlers import MISSING, ErrorsMode, Filter, check, prematches
from kubeop.kopf.namespaces import Namespaces, filtered
from kubeop.kopf.registry import Registry, default_registry
from kubeop.kopf.resource import Resource, of_api_resource

if TYPE_CHECKING:
    from kubeop.cluster import Cluster

__all__ = ["Index", "IndexSet", "Indexers", "IndexingHandler", "Store", "index", "indexing_handlers"]

# How these kopf names behave on kubeop where it is not as in kopf (read by scripts/kopf_compat.py
# into the compatibility table of docs/migration/from-kopf.md; a name not listed behaves as kopf's).
_DIFFERS = {
    "index": "An indexing handler that raises leaves the object out of the index until the object "
    "changes again (kopf retries the handler). kubeop's extension: in a `kubeop.fleet.Fleet` each "
    "cluster has its own indices, seen by that cluster's handlers only.",
}

F = TypeVar("F", bound=Callable[..., Any])
K = TypeVar("K")
V = TypeVar("V")
ObjectKey = tuple[str | None, str | None, str | None]  # (namespace, name, uid), as kopf's
log = logging.getLogger("kubeop.kopf.objects")


@dataclass(frozen=True)
class IndexingHandler:
    fn: Callable[..., Any]
    id: str
    resource: str
    field: FieldPath = ()
    value: Filter = None
    labels: Mapping[str, Filter] | None = None
    annotations: Mapping[str, Filter] | None = None
    when: Callable[..., bool] | None = None
    errors: ErrorsMode = ErrorsMode.TEMPORARY
    timeout: float | None = None
    retries: int | None = None
    backoff: float | None = None
    param: Any = None

    def __str__(self) -> str:
        return f"Handler {self.id!r}"


def index(*args: Any, **options: Any) -> Callable[[F], F]:
    """``@kopf.index('pods')``: keep an index of the resource's objects (see the module)."""

    def register(fn: F) -> F:
        given = options.get("registry")
        registry = given if isinstance(given, Registry) else default_registry()
        scratch = Registry()
        on._register("index", args, {**options, "registry": scratch}, on._COMMON, None)(fn)
        (h,) = scratch.changing(next(iter(scratch.resources())))
        registry.add_index(
            IndexingHandler(
                fn=fn,
                id=h.id,
                resource=h.resource,
                field=h.field,
                value=h.value,
                labels=h.labels,
                annotations=h.annotations,
                when=h.when,
                errors=h.errors,
                timeout=h.timeout,
                retries=h.retries,
                backoff=h.backoff,
                param=h.param,
            )
        )
        return fn

    return register


def indexing_handlers(registry: Registry) -> list[IndexingHandler]:
    return registry.indexing()


class Store(Generic[V]):
    """The values one key of an index holds, one per object that gave it (read-only)."""

    def __init__(self) -> None:
        self._items: dict[ObjectKey, V] = {}

    def __repr__(self) -> str:
        return repr(list(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[V]:
        return iter(self._items.values())

    def __contains__(self, value: object) -> bool:
        return any(v == value for v in self._items.values())

    def __bool__(self) -> bool:
        return bool(self._items)


class Index(Mapping[K, Store[V]]):
    """``kopf.Index``: key -> :class:`Store` of the values of the objects that gave that key."""

    def __init__(self) -> None:
        self._items: dict[K, Store[V]] = {}
        self._reverse: dict[ObjectKey, set[K]] = {}
        self._released = ""  # why it holds nothing any more (a disengaged cluster's index)

    def __repr__(self) -> str:
        return repr(self._items)

    def __getitem__(self, key: K) -> Store[V]:
        self._check()
        return self._items[key]

    def __iter__(self) -> Iterator[K]:
        self._check()
        return iter(self._items)

    def __len__(self) -> int:
        self._check()
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        self._check()
        return key in self._items

    def _release(self, why: str) -> None:
        """Drop every value now (they are freed by reference counting, even when this index was
        frozen by a list: kubeop.cache.gcpause); a read from now on raises ``why``."""
        self._items, self._reverse, self._released = {}, {}, why

    def _check(self) -> None:
        if self._released:
            raise RuntimeError(self._released)

    def _discard(self, obj: ObjectKey, keys: set[K] | None = None) -> None:
        held = self._reverse.get(obj)
        if held is None:
            return
        for key in list(held if keys is None else keys):
            store = self._items[key]
            store._items.pop(obj, None)
            if not store:
                del self._items[key]
            held.discard(key)
        if not held:
            del self._reverse[obj]

    def _replace(self, obj: ObjectKey, values: Mapping[K, V]) -> None:
        held = self._reverse.setdefault(obj, set())
        for key, value in values.items():
            store = self._items.get(key)
            if store is None:
                store = self._items[key] = Store()
            store._items[obj] = value
            held.add(key)
        self._discard(obj, held - set(values))


class Indexers:
    """The indices of one resource's indexing handlers, fed by its shared informer."""

    def __init__(
        self,
        handlers: list[IndexingHandler],
        memo: Mapping[str, Any],
        indices: Mapping[str, Index[Any, Any]] | None = None,
    ) -> None:
        """``indices``: the handlers' indices when shared with other resources' (a selector of
        many resources feeds one index from all of them)."""
        self.handlers = handlers
        self.memo = memo
        self.indices: dict[str, Index[Any, Any]] = {
            h.id: indices[h.id] if indices is not None else Index() for h in handlers
        }
        self.resource: Resource | None = None  # the ``resource`` kwarg, once the informer's is known
        self._queue: asyncio.Queue[tuple[bool, Any]] = asyncio.Queue()

    def informer_handler(self) -> FuncHandler:
        put = self._queue.put_nowait

        def on_delete(obj: Any) -> None:
            if isinstance(obj, DeletedFinalStateUnknown):
                obj = obj.obj
            if obj is not None:
                put((False, obj))

        return FuncHandler(
            on_add=lambda obj, initial: put((True, obj)),
            on_update=lambda old, new: put((True, new)),
            on_delete=on_delete,
        )

    def pending(self) -> int:
        return self._queue.qsize()

    async def drained(self) -> None:
        """Return once every object queued so far is indexed (or discarded)."""
        await self._queue.join()

    async def run(self) -> None:
        while True:
            present, obj = await self._queue.get()
            try:
                if present:
                    await self.index(obj)
                else:
                    self.discard(obj)
            finally:
                self._queue.task_done()

    def discard(self, obj: Mapping[str, Any]) -> None:
        key = _key(obj)
        for index in self.indices.values():
            index._discard(key)

    async def index(self, obj: Mapping[str, Any]) -> None:
        """Call each indexing handler for ``obj`` and put (or drop) its values."""
        md = obj.get("metadata") or {}
        key = _key(obj)
        body = Body(obj)
        kwargs: dict[str, Any] = {
            "body": body,
            "spec": body.spec,
            "meta": body.meta,
            "status": body.status,
            "name": md.get("name"),
            "namespace": md.get("namespace"),
            "uid": md.get("uid"),
            "labels": body.meta.labels,
            "annotations": body.meta.annotations,
            "logger": logging.LoggerAdapter(
                log, {"object_namespace": md.get("namespace"), "object_name": md.get("name")}
            ),
            "memo": self.memo,
            "resource": self.resource,
        }
        for h in self.handlers:
            index = self.indices[h.id]
            if not prematches(h, obj, kwargs) or (
                h.field
                and not (
                    resolve(obj, h.field, MISSING) is not MISSING
                    if h.value is None
                    else check(h.value, resolve(obj, h.field, MISSING), kwargs)
                )
            ):
                index._discard(key)
                continue
            try:
                result = h.fn(**kwargs, param=h.param)
                if inspect.isawaitable(result):
                    result = await result
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                prefix = f"[{md.get('namespace')}/{md.get('name')}]"
                log.exception("%s %s failed with an exception; the object is not indexed: %s", prefix, h, exc)
                index._discard(key)
                continue
            index._replace(key, result if isinstance(result, Mapping) else {None: result})


def _key(obj: Mapping[str, Any]) -> ObjectKey:
    md = obj.get("metadata") or {}
    return (md.get("namespace"), md.get("name"), md.get("uid"))


class IndexSet:
    """All indices of an operator: given to its handlers as kwargs, ready after the first listing.
    ``resolved``: the served resources each handler's selector selects (kopf's resolution at start;
    without it, each handler names one resource); a handler selecting many resources keeps one
    index of the objects of all of them."""

    def __init__(
        self,
        handlers: list[IndexingHandler],
        memo: Mapping[str, Any],
        *,
        resolved: Mapping[str, Sequence[ApiResource]] | None = None,
    ) -> None:
        self._handlers = handlers
        self._memo = memo
        self._resolved = resolved
        self._clusters: dict[str, IndexSet] = {}
        self.indices: dict[str, Index[Any, Any]] = {h.id: Index() for h in handlers}
        by_resource: dict[str, list[IndexingHandler]] = {}
        for h in handlers:
            found = resolved.get(h.resource) if resolved is not None else None
            names = [h.resource] if found is None else [f"{r.plural}.{r.version}.{r.group}" for r in found]
            for name in names:
                by_resource.setdefault(name, []).append(h)
        self.indexers = {r: Indexers(hs, memo, self.indices) for r, hs in by_resource.items()}
        self.ready = asyncio.Event()

    def for_cluster(self, name: str) -> IndexSet:
        """The indices of a fleet's cluster ``name`` (kubeop's extension): the same handlers,
        their own indices fed from that cluster's informers alone (a fresh set each call)."""
        child = self._clusters[name] = IndexSet(self._handlers, self._memo, resolved=self._resolved)
        return child

    def forget(self, name: str, child: IndexSet) -> None:
        """Drop cluster ``name``'s indices ``child`` (the cluster was disengaged): their values go
        now, and a handler still running there that reads them gets an error naming the cluster."""
        if self._clusters.get(name) is child:
            del self._clusters[name]
        why = f"the kopf indices of cluster {name!r} are released: the cluster was disengaged"
        for index in child.indices.values():
            index._release(why)

    def of(self, cluster: str) -> IndexSet:
        """The indices the handlers of ``cluster`` see: these on one cluster (``""``), the
        cluster's own in a fleet; LookupError when that cluster's are not running."""
        if not cluster:
            return self
        child = self._clusters.get(cluster)
        if child is None:
            raise LookupError(
                f"the kopf indices of cluster {cluster!r} are not running: add the kopf manager's "
                "runnables to the fleet beside its controllers (kubeop.fleet.fleet_for does)"
            )
        return child

    async def run(self, cluster: Cluster, scope: Namespaces) -> None:
        """Feed the indices from the cluster's shared informers of the served namespaces; ``ready``
        is set once they synced and their first listing is indexed."""
        async with asyncio.TaskGroup() as tasks:
            for resource, indexers in self.indexers.items():
                res = await cluster.client.resource(resource)
                indexers.resource = of_api_resource(res)
                targets = scope.targets() if res.namespaced else [None]
                informers = [cluster.cache.informer(res, namespace=target) for target in targets]
                for informer, target in zip(informers, targets, strict=True):
                    informer.add_event_handler(filtered(indexers.informer_handler(), scope, target))
                tasks.create_task(indexers.run())
                for informer in informers:
                    await informer.wait_for_sync()
            for indexers in self.indexers.values():
                await indexers.drained()
            self.ready.set()
