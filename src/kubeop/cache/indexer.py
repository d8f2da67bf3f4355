"""Indexer: the in-memory store of an informer, keyed by ``namespace/name`` and indexed.

Objects are kept exactly as they were decoded from the API server (after the informer's
transform): no copies are made when they are stored or handed out. That is what keeps a cache
of tens of thousands of objects cheap, and it comes with one rule for every reader:

**never mutate an object obtained from a cache** (from ``get``, ``list``, ``by_index`` or an
event handler). Other handlers, reconcilers and later events see the same dict. Copy first
(``copy.deepcopy(obj)``, or build the desired object from scratch) when you need a changed
version. The mutation detector (:mod:`kubeop.cache.mutation`, ``KUBEOP_CACHE_MUTATION_DETECTOR=1``)
catches violations in tests.

An index function maps an object to the values it is found under (``obj -> ["value", ...]``);
:meth:`Indexer.by_index` answers "all objects with value v". The namespace index
(:data:`NAMESPACE_INDEX`) is always present; while every stored object is in one namespace (the
store of a namespace-scoped informer) it keeps no set of keys of its own: the store's keys are
that namespace's (~40 bytes per object less).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

from kubeop.cache.keys import KeyFunc, object_key
from kubeop.cache.tombstone import DeletedFinalStateUnknown

__all__ = ["NAMESPACE_INDEX", "IndexFunc", "Indexer", "label_index", "namespace_index"]

Obj = dict[str, Any]
_Objs = list[Obj]  # "list" is also a method name below
_Keys = list[str]

#: An index function: the values an object is indexed under (may be empty).
IndexFunc = Callable[[Obj], list[str]]

#: The name of the built-in index by ``metadata.namespace`` (``""`` for cluster-scoped objects).
NAMESPACE_INDEX = "namespace"


def namespace_index(obj: Obj) -> list[str]:
    """Index function of :data:`NAMESPACE_INDEX` (client-go ``MetaNamespaceIndexFunc``)."""
    return [obj["metadata"].get("namespace") or ""]


def label_index(label: str) -> IndexFunc:
    """An index function by the value of one label; objects without the label are not indexed."""

    def index(obj: Obj) -> list[str]:
        labels = obj["metadata"].get("labels")
        if labels:
            value = labels.get(label)
            if value is not None:
                return [value]
        return []

    return index


class Indexer:
    """A keyed store of objects with secondary indices (client-go ``cache.Indexer``).

    Reads (``get``, ``list``, ``list_keys``, ``by_index``, ``index_keys``, ``index``) are for
    everyone; writes (``add``, ``update``, ``delete``, ``replace``) belong to whoever feeds the
    store, normally one informer. Everything runs on one event loop: no locks, and no method
    awaits, so each call is atomic with respect to other tasks.

    Guarantees:
        - ``get``/``list``/``by_index`` return the stored objects themselves, never copies.
        - Indices always agree with the stored objects, including after ``add_indexers`` on a
          filled store.
        - Lists are new lists each call; mutating the list is fine, mutating its objects is not.
    """

    __slots__ = ("_index_values", "_indexers", "_indices", "_items", "_key_func", "_one_namespace")

    def __init__(self, indexers: Mapping[str, IndexFunc] | None = None, *, key_func: KeyFunc = object_key):
        self._key_func = key_func
        self._items: dict[str, Obj] = {}
        self._indexers: dict[str, IndexFunc] = {NAMESPACE_INDEX: namespace_index}
        self._indices: dict[str, dict[str, set[str]]] = {NAMESPACE_INDEX: {}}
        # The namespace every stored object is in, while there is one: the namespace index then
        # stays empty (its one bucket would be every key). None: the index holds the keys.
        self._one_namespace: str | None = None
        # (name, function, index) triples of the indices other than the namespace's, rebuilt
        # when indexers change: the write path loops over this instead of doing two dict
        # lookups per index per write.
        self._index_values: tuple[tuple[str, IndexFunc, dict[str, set[str]]], ...] = ()
        self._rebuild_index_list()
        if indexers:
            self.add_indexers(indexers)

    # -- reads ------------------------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        """The object stored under ``key`` (``"ns/name"`` or ``"name"``), or None."""
        return self._items.get(key)

    get_by_key = get

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Obj]:
        """Iterate over a snapshot of the stored objects."""
        return iter(list(self._items.values()))

    def list(self) -> _Objs:
        """All stored objects (in no particular order)."""
        return list(self._items.values())

    def list_keys(self) -> _Keys:
        """The keys of every object in the store."""
        return list(self._items)

    def by_index(self, index_name: str, value: str) -> _Objs:
        """Objects whose index function ``index_name`` returned ``value``."""
        if index_name == NAMESPACE_INDEX and self._one_namespace is not None:
            return list(self._items.values()) if value == self._one_namespace else []
        keys = self._index(index_name).get(value)
        if not keys:
            return []
        items = self._items
        return [items[k] for k in keys]

    def index_keys(self, index_name: str, value: str) -> _Keys:
        """Keys of the objects whose index function ``index_name`` returned ``value``."""
        keys = self._bucket(index_name, value)
        return list(keys) if keys else []

    def index(self, index_name: str, obj: Obj) -> _Objs:
        """Objects that share at least one ``index_name`` value with ``obj``."""
        self._index(index_name)
        values = self._indexers[index_name](obj)
        if len(values) == 1:
            return self.by_index(index_name, values[0])
        keys: set[str] = set()
        for value in values:
            keys.update(self._bucket(index_name, value) or ())
        return [self._items[k] for k in keys]

    def list_index_values(self, index_name: str) -> _Keys:
        """Every value that currently has objects in index ``index_name``."""
        if index_name == NAMESPACE_INDEX and self._one_namespace is not None:
            return [self._one_namespace]
        return list(self._index(index_name))

    def get_indexers(self) -> dict[str, IndexFunc]:
        """The index functions by index name (a copy)."""
        return dict(self._indexers)

    def _bucket(self, index_name: str, value: str) -> Collection[str] | None:
        if index_name == NAMESPACE_INDEX and self._one_namespace is not None:
            return self._items.keys() if value == self._one_namespace else None
        return self._index(index_name).get(value)

    def _index(self, index_name: str) -> dict[str, set[str]]:
        try:
            return self._indices[index_name]
        except KeyError:
            raise KeyError(f"no index named {index_name!r} (have: {', '.join(self._indices)})") from None

    # -- indexers ---------------------------------------------------------------------------------

    def add_indexers(self, indexers: Mapping[str, IndexFunc]) -> None:
        """Add index functions; objects already stored are indexed right away.

        Raises ValueError when a name is already taken (index functions cannot be replaced:
        readers may be relying on the existing one).
        """
        taken = [name for name in indexers if name in self._indexers]
        if taken:
            raise ValueError(f"indexer(s) already present: {', '.join(sorted(taken))}")
        for name, fn in indexers.items():
            self._indexers[name] = fn
            index: dict[str, set[str]] = {}
            self._indices[name] = index
            for key, obj in self._items.items():
                for value in fn(obj):
                    bucket = index.get(value)
                    if bucket is None:
                        index[value] = {key}
                    else:
                        bucket.add(key)
        self._rebuild_index_list()

    def _rebuild_index_list(self) -> None:
        self._index_values = tuple(
            (name, fn, self._indices[name]) for name, fn in self._indexers.items() if name != NAMESPACE_INDEX
        )

    # -- writes -----------------------------------------------------------------------------------

    def add(self, obj: Obj) -> None:
        """Store ``obj`` under its key (replacing what was there)."""
        key = self._key_func(obj)
        old = self._items.get(key)
        self._items[key] = obj
        self._reindex(key, old, obj)

    update = add

    def put(self, key: str, obj: Obj) -> Obj | None:
        """Store ``obj`` under ``key`` (which must be its key) and return the previous object:
        ``add`` for callers that already computed the key and need the old state."""
        old = self._items.get(key)
        self._items[key] = obj
        self._reindex(key, old, obj)
        return old

    def delete(self, obj: Obj | DeletedFinalStateUnknown) -> None:
        """Remove the object with ``obj``'s key (a tombstone works too); absent keys are ignored."""
        key = self._key_func(obj)
        old = self._items.pop(key, None)
        if old is not None:
            self._reindex(key, old, None)

    def delete_key(self, key: str) -> Obj | None:
        """Remove and return the object stored under ``key``."""
        old = self._items.pop(key, None)
        if old is not None:
            self._reindex(key, old, None)
        return old

    def replace(self, objects: Iterable[Obj], resource_version: str = "") -> None:
        """Replace the whole content with ``objects`` (one step: readers never see a mix)."""
        items: dict[str, Obj] = {}
        key_func = self._key_func
        for obj in objects:
            items[key_func(obj)] = obj
        self._items = items
        for name in self._indices:
            self._indices[name] = {}
        self._rebuild_index_list()
        self._one_namespace = None
        namespaces = self._indices[NAMESPACE_INDEX]
        for key, obj in items.items():
            value = obj["metadata"].get("namespace") or ""
            bucket = namespaces.get(value)
            if bucket is None:
                namespaces[value] = {key}
            else:
                bucket.add(key)
        if len(namespaces) == 1:
            (self._one_namespace,) = namespaces
            namespaces.clear()
        for _name, fn, index in self._index_values:
            for key, obj in items.items():
                for value in fn(obj):
                    bucket = index.get(value)
                    if bucket is None:
                        index[value] = {key}
                    else:
                        bucket.add(key)

    def resync(self) -> None:
        """Nothing to do for a plain store (part of the store protocol the reflector feeds)."""

    def _reindex(self, key: str, old: Obj | None, new: Obj | None) -> None:
        self._reindex_namespace(self._indices[NAMESPACE_INDEX], key, old, new)
        for _, fn, index in self._index_values:
            new_values = fn(new) if new is not None else ()
            if old is not None:
                old_values = fn(old)
                if old_values == new_values:
                    continue
                for value in old_values:
                    if value in new_values:
                        continue
                    bucket = index.get(value)
                    if bucket is not None:
                        bucket.discard(key)
                        if not bucket:
                            del index[value]  # empty buckets would leak one entry per value ever seen
            for value in new_values:
                bucket = index.get(value)
                if bucket is None:
                    index[value] = {key}
                else:
                    bucket.add(key)

    def _reindex_namespace(
        self, index: dict[str, set[str]], key: str, old: Obj | None, new: Obj | None
    ) -> None:
        """The namespace index after ``_items[key]`` went from ``old`` to ``new`` (both in
        ``_items`` already, or removed from it)."""
        one = self._one_namespace
        if one is not None:  # every object but maybe ``key`` is in ``one``; the index is empty
            if new is None:
                if not self._items:
                    self._one_namespace = None
                return
            namespace = new["metadata"].get("namespace") or ""
            if namespace == one:
                return
            others = set(self._items)  # a second namespace: the index takes the keys
            others.discard(key)
            if others:
                index[one] = others
            index[namespace] = {key}
            self._one_namespace = None
            return
        if new is not None and not index:  # the first object of an empty store
            self._one_namespace = new["metadata"].get("namespace") or ""
            return
        new_value = (new["metadata"].get("namespace") or "") if new is not None else None
        if old is not None:
            old_value = old["metadata"].get("namespace") or ""
            if old_value == new_value:
                return
            bucket = index.get(old_value)
            if bucket is not None:
                bucket.discard(key)
                if not bucket:
                    del index[old_value]
        if new_value is not None:
            bucket = index.get(new_value)
            if bucket is None:
                index[new_value] = {key}
            else:
                bucket.add(key)
        if len(index) == 1:  # down to one namespace again
            (self._one_namespace,) = index
            index.clear()

    def __repr__(self) -> str:
        return f"<Indexer {len(self._items)} objects, indices: {', '.join(self._indexers)}>"
