"""kubeop.cache: watches, caches and informers (client-go's tools/cache, on asyncio).

- :func:`watcher` / :class:`Watcher`: list + watch one collection forever as a stream of
  :data:`WatcherEvent` s (``Init`` / ``InitApply`` / ``InitDone`` / ``Apply`` / ``Delete``),
  recovering from every failure (relist on 410, backoff, stall detection, fast return after an
  outage).
- :class:`Reflector`: applies those events to a store, swapping each relist in atomically.
- :class:`DeltaFIFO`: per-object change lists between a reflector and its consumer.
- :class:`Indexer`: the keyed, indexed store (``ns/name`` keys, namespace index built in).
- :class:`Informer` and :class:`SharedInformerFactory`: one watch and one cache per collection,
  shared by any number of :class:`ResourceEventHandler` s.
- Transforms (:func:`compact` by default) and the :class:`MutationDetector`.

Cached objects are the decoded dicts themselves, shared by every reader: **never mutate an
object you got from a cache**; copy it first. ``KUBEOP_CACHE_MUTATION_DETECTOR=1`` checks this.
"""

from kubeop.cache.backoff import Backoff, BackoffConfig
from kubeop.cache.delta_fifo import Delta, DeltaFIFO, Deltas, DeltaType, FIFOClosed, Popped
from kubeop.cache.factory import SharedInformerFactory
from kubeop.cache.handler import FuncHandler, HandlerRegistration, ResourceEventHandler
from kubeop.cache.indexer import NAMESPACE_INDEX, Indexer, IndexFunc, label_index, namespace_index
from kubeop.cache.informer import Informer
from kubeop.cache.keys import KeyFunc, object_key, split_key
from kubeop.cache.listwatch import ListerWatcher, ListWatch
from kubeop.cache.mutation import CacheMutationError, MutationDetector, mutation_detection_enabled
from kubeop.cache.probe import ServerProbe, probe_for
from kubeop.cache.reflector import Reflector, ReflectorStore, reflector
from kubeop.cache.tombstone import DeletedFinalStateUnknown
from kubeop.cache.transform import Transform, chain, compact, drop_fields, strip_managed_fields
from kubeop.cache.watcher import (
    Apply,
    Delete,
    Init,
    InitApply,
    InitDone,
    VeryShortWatch,
    Watcher,
    WatcherEvent,
    WatcherStats,
    WatchStalled,
    watcher,
)
from kubeop.cache.watcher import Config as WatcherConfig
from kubeop.cache.watcher import Error as WatcherError

__all__ = [
    "NAMESPACE_INDEX",
    "Apply",
    "Backoff",
    "BackoffConfig",
    "CacheMutationError",
    "Delete",
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaFIFO",
    "DeltaType",
    "Deltas",
    "FIFOClosed",
    "FuncHandler",
    "HandlerRegistration",
    "IndexFunc",
    "Indexer",
    "Informer",
    "Init",
    "InitApply",
    "InitDone",
    "KeyFunc",
    "ListWatch",
    "ListerWatcher",
    "MutationDetector",
    "Popped",
    "Reflector",
    "ReflectorStore",
    "ResourceEventHandler",
    "ServerProbe",
    "SharedInformerFactory",
    "Transform",
    "VeryShortWatch",
    "WatchStalled",
    "Watcher",
    "WatcherConfig",
    "WatcherError",
    "WatcherEvent",
    "WatcherStats",
    "chain",
    "compact",
    "drop_fields",
    "label_index",
    "mutation_detection_enabled",
    "namespace_index",
    "object_key",
    "probe_for",
    "reflector",
    "split_key",
    "strip_managed_fields",
    "watcher",
]
