"""kubeop.cache: watches, caches and informers (client-go's tools/cache, on asyncio).

- :func:`watcher` / :class:`Watcher`: list + watch one collection forever as a stream of
  ``Init`` / ``InitApply`` / ``InitDone`` / ``Apply`` / ``Delete`` events, recovering from every
  failure (relist on 410, backoff, stall detection, fast return after an outage).
- :class:`DeltaFIFO`: per-object change lists between a reflector and its consumer.
- :class:`Indexer`: the keyed, indexed store (``ns/name`` keys, namespace index built in).
- Transforms (:func:`strip_managed_fields` by default).

Cached objects are the decoded dicts themselves, shared by every reader: **never mutate an
object you got from a cache**; copy it first.
"""

from kubeop.cache.backoff import Backoff, BackoffConfig
from kubeop.cache.delta_fifo import Delta, DeltaFIFO, Deltas, DeltaType, FIFOClosed
from kubeop.cache.indexer import NAMESPACE_INDEX, Indexer, IndexFunc, label_index, namespace_index
from kubeop.cache.keys import KeyFunc, object_key, split_key
from kubeop.cache.listwatch import ListerWatcher, ListWatch
from kubeop.cache.probe import ServerProbe, probe_for
from kubeop.cache.tombstone import DeletedFinalStateUnknown
from kubeop.cache.transform import Transform, chain, drop_fields, strip_managed_fields
from kubeop.cache.watcher import (
    Apply,
    Delete,
    Event,
    Init,
    InitApply,
    InitDone,
    VeryShortWatch,
    Watcher,
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
    "Delete",
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaFIFO",
    "DeltaType",
    "Deltas",
    "Event",
    "FIFOClosed",
    "IndexFunc",
    "Indexer",
    "Init",
    "InitApply",
    "InitDone",
    "KeyFunc",
    "ListWatch",
    "ListerWatcher",
    "ServerProbe",
    "Transform",
    "VeryShortWatch",
    "WatchStalled",
    "Watcher",
    "WatcherConfig",
    "WatcherError",
    "WatcherStats",
    "chain",
    "drop_fields",
    "label_index",
    "namespace_index",
    "object_key",
    "probe_for",
    "split_key",
    "strip_managed_fields",
    "watcher",
]
