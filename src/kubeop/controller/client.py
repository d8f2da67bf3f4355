"""The client a reconciler gets: reads from the shared cache, writes to the API server.

Reads (``get``, ``list``) are answered from the informers' stores: no API call, no copy. The dicts
handed out are the cached objects themselves and must not be mutated (set
``KUBEOP_CACHE_MUTATION_DETECTOR=1`` in tests to catch it); build desired objects as new dicts,
or ask for a typed model, which is always a fresh instance: its typed fields are its own, but
values of free-form fields (typed ``Any`` or ``dict[str, Any]``, such as ``managedFields`` or an
untyped status) are the cache's, under the same rule (copying them on every read would cost
~7 us per typed read; the mutation detector catches a change to them too).

Writes go to the API server, and their results are remembered until the cache has caught up
(read-your-writes): a reconcile that runs right after a create or a status write sees what it
wrote, instead of writing again or meeting a conflict. The write helpers compare first and skip
the request when nothing would change, so a steady-state resync costs no API writes.

Every write follows the client's :class:`~kubeop.controller.write_policy.WritePolicy`, given
when it is built: a guard that fences writes (with the leader's or the shard's lease) and labels
for the objects written (``Sharding(labels=True)`` puts the shard label of a controller's
children on them as they are created, updated or applied, so that the replica owning their
owner caches them).

The client is a facade over small parts, one job each: the cache reader (which informer serves
a read, and the canonical resource a read names), the write ledger (read-your-writes), the write
policy, compare-before-write (:mod:`kubeop.controller.compare`) and the finalizer patches.

Every write that changes something is logged at INFO on ``kubeop.controller`` ("created
ConfigMap default/web"), tagged with the reconcile that made it; a write that changed nothing
(an apply or patch the server found identical) and a delete of an object already gone, at DEBUG.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from kubeop.cache import SharedInformerFactory
from kubeop.client import Client, ResourceLike
from kubeop.controller._cache_reader import CachedInformer, CacheReader
from kubeop.controller._finalizers import finalizers_patch, finalizers_verb
from kubeop.controller._write_ledger import WriteLedger, object_key
from kubeop.controller.compare import contains, merge_desired, without_status
from kubeop.controller.write_policy import WriteGuard, WriteLabels, WritePolicy
from kubeop.core import meta as m
from kubeop.core.errors import AlreadyExists, Conflict, NotFound
from kubeop.core.model import from_dict, is_model_class, to_dict
from kubeop.core.patch import PatchType
from kubeop.core.resource import ApiResource
from kubeop.core.selectors import LabelSelector

__all__ = ["ReconcilerClient", "contains", "merge_desired"]

log = logging.getLogger("kubeop.controller")

Obj = dict[str, Any]
M = TypeVar("M")
_NO_POLICY = WritePolicy()


class ReconcilerClient:
    """Cache-backed reads, API writes, and compare-before-write helpers (see module docstring).

    ``policy`` fences and labels every write (:class:`~kubeop.controller.write_policy.WritePolicy`;
    the Manager gives its lease's guard and sharding's labels).
    """

    def __init__(
        self,
        api: Client,
        cache: SharedInformerFactory,
        *,
        field_manager: str = "kubeop",
        policy: WritePolicy | None = None,
    ) -> None:
        self._api = api
        self._cache = cache
        self.field_manager = field_manager
        self._policy = policy if policy is not None else _NO_POLICY
        self._reader = CacheReader(api, cache)
        self._ledger = WriteLedger(self._reader.informers.lookup)
        self._remembered = self._ledger.entries
        self._resources = self._reader.resolved  # how namings resolved (tests and benches seed it)

    @property
    def api(self) -> Client:
        """The underlying API client, for uncached reads (``await client.api.get(...)``); fixed
        when the client is built, as the cache is (its reads and writes must meet one server)."""
        return self._api

    @property
    def cache(self) -> SharedInformerFactory:
        """The shared informers its reads are served from (read-only)."""
        return self._cache

    @property
    def policy(self) -> WritePolicy:
        """The rules every write follows (fixed when the client is built)."""
        return self._policy

    @property
    def write_guard(self) -> WriteGuard | None:
        """Deprecated: ``policy.guard``."""
        return self._policy.guard

    @write_guard.setter
    def write_guard(self, guard: WriteGuard | None) -> None:
        if self._policy.guard is not None and guard is not self._policy.guard:
            raise ValueError(
                "ReconcilerClient.write_guard: this client's writes are fenced by the guard of the "
                "policy it was built with (a Manager's lease); replacing it would drop that fence: "
                "build a client with ReconcilerClient(..., policy=WritePolicy(guard=...)) instead"
            )
        warnings.warn(
            "setting ReconcilerClient.write_guard is deprecated: pass "
            "ReconcilerClient(..., policy=WritePolicy(guard=...)) when building the client",
            DeprecationWarning,
            stacklevel=2,
        )
        self._policy = dataclasses.replace(self._policy, guard=guard)

    @property
    def write_labels(self) -> WriteLabels | None:
        """Deprecated: ``policy.labels``."""
        return self._policy.labels

    @write_labels.setter
    def write_labels(self, labels: WriteLabels | None) -> None:
        if self._policy.labels is not None and labels is not self._policy.labels:
            raise ValueError(
                "ReconcilerClient.write_labels: this client labels its writes by the policy it was "
                "built with (a Manager's shards); replacing them would move objects out of their "
                "shard: build a client with ReconcilerClient(..., policy=WritePolicy(labels=...)) instead"
            )
        warnings.warn(
            "setting ReconcilerClient.write_labels is deprecated: pass "
            "ReconcilerClient(..., policy=WritePolicy(labels=...)) when building the client",
            DeprecationWarning,
            stacklevel=2,
        )
        self._policy = dataclasses.replace(self._policy, labels=labels)

    # -- resolving -----------------------------------------------------------------------------
    async def resource(self, what: ResourceLike | Mapping[str, Any]) -> ApiResource:
        """The ApiResource of a kind or an object, canonical per resource
        (:func:`~kubeop.client.restmapper.resource_key`): however a kind is named (a constant, a
        model, a name, an object's apiVersion/kind), the remembered writes and cache bookkeeping
        of one resource live under one key."""
        return await self._reader.resolve(what)

    def use_informer(self, res: ApiResource, informer: Any) -> None:
        """Read ``res`` from ``informer`` (a controller's watch, possibly limited to a namespace or
        a label selector) instead of starting a cluster-wide one: one watch and one cache per
        kind, and reads that see exactly what the controller's events saw. The first informer
        registered for a resource wins; objects outside its scope read as absent, as with
        controller-runtime's namespaced caches, except in the namespace of a later informer
        limited to one namespace, which serves the reads in that namespace."""
        namespace = getattr(getattr(informer, "source", None), "namespace", None)
        self._reader.informers.use(self._reader.canonical(res), informer, namespace)

    # -- reads (cache) -------------------------------------------------------------------------
    async def get(self, what: ResourceLike, name: str, *, namespace: str | None = None) -> Any:
        """The cached object (a dict, or a fresh model instance for a model class), or None.

        The first read of a kind nobody watches yet starts an informer for it and waits for its
        first list, as controller-runtime's cache does.
        """
        reader = self._reader
        res = await reader.resolve(what)
        key = f"{namespace}/{name}" if (res.namespaced and namespace) else name
        informer = await reader.informer(res, namespace)
        obj = informer.store.get_by_key(key)
        remembered = self._remembered
        if remembered:  # the ledger's entries, looked up here: one call saved on every read
            recent = remembered.get((res, key))
            if recent is not None:
                obj = self._ledger.newest(res, key, recent, obj, informer)
        if obj is None:
            return None
        if isinstance(what, type) and is_model_class(what):
            return from_dict(what, obj)
        return obj

    async def list(
        self,
        what: ResourceLike,
        *,
        namespace: str | None = None,
        labels: str | Mapping[str, str] | LabelSelector | None = None,
    ) -> list[Any]:
        """Cached objects of a kind, optionally in one namespace and matching a label selector."""
        reader = self._reader
        res = await reader.resolve(what)
        informer = await reader.informer(res, namespace)
        store = informer.store
        items = store.by_index("namespace", namespace) if (namespace and res.namespaced) else store.list()
        if labels is not None:
            if isinstance(labels, LabelSelector):
                sel = labels
            elif isinstance(labels, str):
                sel = LabelSelector.parse(labels)
            else:
                sel = LabelSelector.from_labels(labels)
            items = [o for o in items if sel.matches((o.get("metadata") or {}).get("labels") or {})]
        if isinstance(what, type) and is_model_class(what):
            return [from_dict(what, o) for o in items]
        return list(items)

    @property
    def remembered_writes(self) -> int:
        """How many write results are kept for read-your-writes (exported as a gauge)."""
        return len(self._ledger)

    def _known_version(self, res: ApiResource, name: Any, namespace: Any) -> str | None:
        """The resourceVersion this client last saw of an object (its own last write, else the
        cache's), taken before a write so the change log can tell whether the write changed it.
        None when the kind has no informer or the object is not known."""
        informer: CachedInformer | None = self._reader.informers.get(res)
        if informer is None or not name:
            return None
        key = object_key(res, name, namespace)
        known = self._ledger.known(res, key) or informer.store.get_by_key(key)
        return m.resource_version(known) if known is not None else None

    # -- writes (API) --------------------------------------------------------------------------
    async def create(self, obj: Any, **kwargs: Any) -> Any:
        """Create an object and return it as stored (a model when ``obj`` is one); the client remembers the
        write until its cache has it. Raises AlreadyExists when it exists.
        """
        res = await self._reader.resolve(obj)
        self._policy.fence()
        out: Obj = await self._api.create(self._policy.labelled(res, to_dict(obj)), resource=res, **kwargs)
        if not kwargs.get("dry_run"):
            self._ledger.remember(res, out)
            _changed("created", res, out)
        return _like(obj, out)

    async def update(self, obj: Any, **kwargs: Any) -> Any:
        """Replace an object (PUT; Conflict when ``obj``'s resourceVersion is stale) and return it as stored;
        the client remembers the write until its cache has it.
        """
        res = await self._reader.resolve(obj)
        self._policy.fence()
        out: Obj = await self._api.update(self._policy.labelled(res, to_dict(obj)), resource=res, **kwargs)
        if not kwargs.get("dry_run"):
            self._ledger.remember(res, out)
            _changed("updated", res, out, before=obj)
        return _like(obj, out)

    async def update_status(self, obj: Any) -> Any:
        """PUT the status subresource (optimistic concurrency: Conflict on a stale object)."""
        res = await self._reader.resolve(obj)
        self._policy.fence()
        out: Obj = await self._api.update_status(to_dict(obj), resource=res)
        self._ledger.remember(res, out)
        _changed("updated status of", res, out, before=obj)
        return _like(obj, out)

    async def patch(self, what: ResourceLike, name: str, patch: Any, **kwargs: Any) -> Any:
        """Patch the object ``name`` of ``what`` with ``patch`` (a JSON merge patch unless ``patch_type=``
        says otherwise) and return it as stored; the client remembers the write until its cache has it.
        """
        res = await self._reader.resolve(what)
        self._policy.fence()
        before = (
            self._known_version(res, name, kwargs.get("namespace"))
            if log.isEnabledFor(logging.INFO)
            else None
        )
        out: Obj = await self._api.patch(res, name, patch, **kwargs)
        self._ledger.remember(res, out)
        _changed("patched", res, out, before=before)
        return out  # the server's dict, whatever names the kind (a patch is not an object)

    async def apply(self, obj: Any, *, force: bool = True, field_manager: str | None = None) -> Any:
        """Server-side apply ``obj`` (always one request; prefer :meth:`create_or_patch` in hot paths)."""
        res = await self._reader.resolve(obj)
        self._policy.fence()
        body = self._policy.labelled(res, to_dict(obj))
        before = None
        if log.isEnabledFor(logging.INFO):
            md = body.get("metadata") or {}
            before = self._known_version(res, md.get("name"), md.get("namespace"))
        out: Obj = await self._api.apply(
            body, field_manager=field_manager or self.field_manager, force=force, resource=res
        )
        self._ledger.remember(res, out)
        _changed("applied", res, out, before=before)
        return _like(obj, out)

    async def delete(
        self, what: Any, name: str | None = None, *, namespace: str | None = None, **kwargs: Any
    ) -> bool:
        """Delete; returns False when it was already gone."""
        if name is None:
            d = to_dict(what)
            name, namespace = m.name(d), m.namespace(d) or namespace
        res = await self._reader.resolve(what)
        self._policy.fence()
        try:
            await self._api.delete(res, name, namespace=namespace, **kwargs)
        except NotFound:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s %s was already gone", res.kind, _ref(res, name, namespace))
            return False
        if not kwargs.get("dry_run") and log.isEnabledFor(logging.INFO):
            log.info("deleted %s %s", res.kind, _ref(res, name, namespace))
        return True

    # -- compare-before-write helpers ----------------------------------------------------------
    async def create_or_update(self, desired: M) -> tuple[str, M]:
        """Make the object match ``desired``: create it, update it, or do nothing.

        Returns ``("created" | "updated" | "unchanged", object)``: the object as the server has
        it, a model of ``desired``'s class when ``desired`` is a model, else a dict. Only the
        fields ``desired`` sets are compared (server defaults are not a difference). A create
        that meets AlreadyExists (the cache had not seen the object yet) reads it from the server
        and continues as an update instead of failing.
        """
        return await self._ensure(desired, patch=False)

    async def create_or_patch(self, desired: M) -> tuple[str, M]:
        """Like :meth:`create_or_update`, but sends a JSON merge patch (no resourceVersion
        conflicts; lists in ``desired`` replace the server's)."""
        return await self._ensure(desired, patch=True)

    async def _ensure(self, desired: Any, *, patch: bool) -> tuple[str, Any]:
        want = to_dict(desired)
        res = await self._reader.resolve(want if type(desired) is dict else desired)
        want = self._policy.labelled(res, want)
        md = want.get("metadata") or {}
        name, namespace = md.get("name"), md.get("namespace")
        if not name:
            raise ValueError(f"{want.get('kind') or 'object'} has no metadata.name")
        current = await self.get(res, name, namespace=namespace)
        state, out = await self._write_desired(res, name, namespace, want, current, patch=patch)
        return state, _like(desired, out)

    async def _write_desired(
        self,
        res: ApiResource,
        name: str,
        namespace: str | None,
        want: Obj,
        current: Obj | None,
        *,
        patch: bool,
    ) -> tuple[str, Obj]:
        """Create, update or patch the object to contain ``want``; nothing when it already does."""
        if current is None:
            self._policy.fence()
            try:
                created: Obj = await self._api.create(want, resource=res)
            except AlreadyExists:
                current = await self._api.get(res, name, namespace=namespace)
            else:
                self._ledger.remember(res, created)
                _changed("created", res, created)
                return "created", created
        assert current is not None
        if contains(current, without_status(want)):
            return "unchanged", current
        self._policy.fence()
        if patch:
            body = {k: v for k, v in want.items() if k not in ("status", "apiVersion", "kind")}
            out: Obj = await self._api.patch(res, name, body, namespace=namespace, type=PatchType.MERGE)
        else:
            merged = merge_desired(current, want)
            try:
                out = await self._api.update(merged, resource=res)
            except Conflict:
                fresh = await self._api.get(res, name, namespace=namespace)
                if contains(fresh, without_status(want)):
                    self._ledger.remember(res, fresh)
                    return "unchanged", fresh
                self._policy.fence()
                out = await self._api.update(merge_desired(fresh, want), resource=res)
        self._ledger.remember(res, out)
        _changed("patched" if patch else "updated", res, out, before=current)
        return "updated", out

    async def patch_status(self, obj: Any, status: Mapping[str, Any]) -> bool:
        """Merge ``status`` into the object's status; no request when it already matches.

        Returns True when a write was made. Uses a merge patch on the status subresource, so it
        never conflicts with spec writers.
        """
        current, md = _status_and_meta(obj)
        if contains(current, status):
            return False
        res = await self._reader.resolve(obj)
        self._policy.fence()
        out = await self._api.patch(
            res,
            md["name"],
            {"status": dict(status)},
            namespace=md.get("namespace"),
            type=PatchType.MERGE,
            subresource="status",
        )
        self._ledger.remember(res, out)
        _changed("patched status of", res, out, before=md.get("resourceVersion") or None)
        return True

    # -- finalizers ----------------------------------------------------------------------------
    async def add_finalizer(self, obj: Any, finalizer: str) -> bool:
        """Add ``finalizer`` (no request when present). The JSON patch tests the current list,
        so a concurrent change makes it fail with a Conflict-like error instead of losing data."""
        current = to_dict(obj)
        if m.has_finalizer(current, finalizer):
            return False
        await self._patch_finalizers(current, [*m.finalizers(current), finalizer])
        return True

    async def remove_finalizer(self, obj: Any, finalizer: str) -> bool:
        """Remove ``finalizer`` from the object; True when it was there (and a write was made)."""
        current = to_dict(obj)
        if not m.has_finalizer(current, finalizer):
            return False
        await self._patch_finalizers(current, [f for f in m.finalizers(current) if f != finalizer])
        return True

    async def _patch_finalizers(self, current: Obj, new: Sequence[str]) -> None:
        res = await self._reader.resolve(current)
        old = (current.get("metadata") or {}).get("finalizers")
        self._policy.fence()
        try:
            out = await self._api.patch(
                res,
                m.name(current),
                finalizers_patch(old, new),
                namespace=m.namespace(current) or None,
                type=PatchType.JSON,
            )
        except NotFound:
            return
        self._ledger.remember(res, out)
        if log.isEnabledFor(logging.INFO):
            _changed(finalizers_verb(old, new), res, out, before=current)

    async def finalize(
        self,
        obj: Any,
        finalizer: str,
        cleanup: Callable[[Any], Awaitable[None]],
    ) -> bool:
        """The finalizer pattern in one call.

        While the object lives, make sure it carries ``finalizer`` and return False (go on
        reconciling). Once it is being deleted, run ``cleanup(obj)`` and then remove the
        finalizer, and return True (stop: the object is going away). If ``cleanup`` raises, the
        finalizer stays and the reconcile is retried::

            async def reconcile(req: Request, ctx: Context) -> None:
                memcached = await ctx.client.get(Memcached, req.name, namespace=req.namespace)
                if memcached is None:
                    return  # deleted and finalized already

                async def cleanup(obj: Memcached) -> None:
                    ctx.recorder.event(obj, "Normal", "Finalizing", "cleaning up")
                    ...  # release what the object holds outside the cluster

                if await ctx.client.finalize(memcached, "cache.example.com/finalizer", cleanup):
                    return
                ...  # the object lives: reconcile it

        The finalizer name should be qualified with your domain (``<group>/finalizer``).
        """
        current = to_dict(obj)
        if m.is_being_deleted(current):
            if m.has_finalizer(current, finalizer):
                await cleanup(obj)
                await self.remove_finalizer(current, finalizer)
            return True
        await self.add_finalizer(current, finalizer)
        return False


def _like(given: Any, out: Obj) -> Any:
    """A write's answer the way the object was given: a model of its class when it was a model
    (built when first used: callers often ignore the answer), else the dict."""
    cls = type(given)
    # ``out`` is also remembered for read-your-writes: the model must not share its values.
    return out if cls is dict or not is_model_class(cls) else from_dict(cls, out, lazy=True, shared=True)


def _ref(res: ApiResource, name: Any, namespace: Any) -> str:
    return f"{namespace}/{name}" if (res.namespaced and namespace) else str(name)


def _changed(verb: str, res: ApiResource, out: Mapping[str, Any], *, before: Any = None) -> None:
    """Log a write at INFO ("updated ConfigMap default/web"), at DEBUG when the server's answer
    has the resourceVersion of ``before`` (the object as it was before the write, or its
    resourceVersion): nothing changed. Only kind, namespace and name reach the log."""
    if not log.isEnabledFor(logging.INFO):
        return
    md = out.get("metadata") or {}
    rv = md.get("resourceVersion")
    if before is not None and not isinstance(before, str):
        before = m.resource_version(to_dict(before))
    if rv and rv == before:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s %s %s: unchanged", verb, res.kind, _ref(res, md.get("name"), md.get("namespace")))
        return
    log.info("%s %s %s", verb, res.kind, _ref(res, md.get("name"), md.get("namespace")))


def _status_and_meta(obj: Any) -> tuple[Any, Mapping[str, Any]]:
    """An object's status and the metadata a status write needs. A model's are read from its
    attributes: dumping the whole model on every status write is the typed path's biggest cost."""
    if type(obj) is dict:
        return obj.get("status") or {}, obj.get("metadata") or {}
    meta = getattr(obj, "metadata", None)
    if meta is None or type(meta) is dict or isinstance(meta, Mapping):
        d = to_dict(obj)
        return d.get("status") or {}, d.get("metadata") or {}
    status = getattr(obj, "status", None)
    if status is None:
        status = {}
    elif type(status) is not dict and hasattr(status, "model_dump"):
        status = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    md = {
        "name": getattr(meta, "name", None),
        "namespace": getattr(meta, "namespace", None),
        "resourceVersion": getattr(meta, "resource_version", None),
    }
    return status, md
