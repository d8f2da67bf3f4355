"""WriteLedger: the results of a client's own writes, until the cache has caught up (read-your-writes).

A reconcile that runs right after a create or a status write must see what it wrote, instead of
writing again or meeting a conflict. The ledger keeps each write's answer under its resource and
key; a read prefers it while it is newer than the cached object and the cache has not applied its
resourceVersion, and forgets it as soon as the cache has.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kubeop.controller._cache_reader import CachedInformer
from kubeop.core.resource import ApiResource

Obj = dict[str, Any]
_SWEEP_MIN = 1024
_RECENT_MAX = 50_000


def object_key(res: ApiResource, name: Any, namespace: Any) -> Any:
    """The store key of an object: ``namespace/name``, or ``name`` for a cluster-scoped one."""
    return f"{namespace}/{name}" if (res.namespaced and namespace) else name


def _newer(a: Mapping[str, Any], b: Mapping[str, Any] | None) -> bool:
    """Is ``a`` a newer version than ``b``? resourceVersions are compared as integers when both
    are (etcd revisions); otherwise the cached one wins."""
    if b is None:
        return True
    ra = (a.get("metadata") or {}).get("resourceVersion") or ""
    rb = (b.get("metadata") or {}).get("resourceVersion") or ""
    if ra.isdigit() and rb.isdigit():
        return int(ra) > int(rb)
    return False


class WriteLedger:
    """Remembered write results, bounded; ``informer_of`` says which informer serves a resource."""

    def __init__(self, informer_of: Callable[[ApiResource], CachedInformer | None]) -> None:
        self._informer_of = informer_of
        self._recent: dict[tuple[ApiResource, str], Obj] = {}
        self.entries: Mapping[tuple[ApiResource, str], Obj] = self._recent
        """The remembered writes by (resource, key), read-only: the reconciler client looks a
        read's key up here and calls :meth:`newest` only when it is found."""
        self._sweep_at = _SWEEP_MIN

    def __len__(self) -> int:
        return len(self._recent)

    def remember(self, res: ApiResource, obj: Obj) -> None:
        """Keep ``obj`` (a write's answer) until the cache has it."""
        md = obj.get("metadata") or {}
        name, namespace = md.get("name"), md.get("namespace")
        key = f"{namespace}/{name}" if (res.namespaced and namespace) else name  # object_key, inlined
        if key:
            self._recent[(res, key)] = obj
            if len(self._recent) >= self._sweep_at:
                self._sweep()

    def read(self, res: ApiResource, key: str, cached: Obj | None, informer: CachedInformer) -> Obj | None:
        """What a read of ``key`` sees: the remembered write while the cache (``cached``, from
        ``informer``) is behind it, else the cached object (and the entry is forgotten)."""
        recent = self._recent.get((res, key))
        return cached if recent is None else self.newest(res, key, recent, cached, informer)

    def newest(
        self, res: ApiResource, key: str, recent: Obj, cached: Obj | None, informer: CachedInformer
    ) -> Obj | None:
        """:meth:`read` given the remembered write ``recent`` of ``key`` (from :attr:`entries`)."""
        rv = (recent.get("metadata") or {}).get("resourceVersion") or ""
        if _newer(recent, cached) and not informer.has_applied(rv):
            return recent
        # The cache has seen our write (or something after it, such as a delete): it is the
        # truth again.
        del self._recent[(res, key)]
        return cached

    def known(self, res: ApiResource, key: str) -> Obj | None:
        """The remembered write of ``key``, if any (not forgetting it)."""
        return self._recent.get((res, key))

    def _sweep(self) -> None:
        """Forget remembered writes the cache has caught up with.

        An entry is otherwise dropped only when its key is read again, so writes to keys that
        are never read back (objects created and later deleted, kinds nobody reads) would pile
        up. A write to a kind without an informer is forgotten too: a first read of that kind
        lists it from the server, which includes the write. Sweeping when the map has doubled
        since the last sweep keeps the cost at O(1) per write.
        """
        informer_of = self._informer_of
        stale = []
        for (res, key), obj in self._recent.items():
            informer = informer_of(res)
            rv = (obj.get("metadata") or {}).get("resourceVersion") or ""
            if informer is None or informer.has_applied(rv):
                stale.append((res, key))
        for entry in stale:
            del self._recent[entry]
        if len(self._recent) > _RECENT_MAX:  # the cache is far behind (or stopped): stay bounded
            self._recent.clear()
        self._sweep_at = max(_SWEEP_MIN, 2 * len(self._recent))
