"""kubeop.cache: watches, caches and informers (client-go's tools/cache, on asyncio).

- :class:`Indexer`: the keyed, indexed store (``ns/name`` keys, namespace index built in).
- :class:`DeltaFIFO`: per-object change lists between a reflector and its consumer.
- Transforms (:func:`strip_managed_fields` by default).

Cached objects are the decoded dicts themselves, shared by every reader: **never mutate an
object you got from a cache**; copy it first.
"""

from kubeop.cache.delta_fifo import Delta, DeltaFIFO, Deltas, DeltaType, FIFOClosed
from kubeop.cache.indexer import NAMESPACE_INDEX, Indexer, IndexFunc, label_index, namespace_index
from kubeop.cache.keys import KeyFunc, object_key, split_key
from kubeop.cache.tombstone import DeletedFinalStateUnknown
from kubeop.cache.transform import Transform, chain, drop_fields, strip_managed_fields

__all__ = [
    "NAMESPACE_INDEX",
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaFIFO",
    "DeltaType",
    "Deltas",
    "FIFOClosed",
    "IndexFunc",
    "Indexer",
    "KeyFunc",
    "Transform",
    "chain",
    "drop_fields",
    "label_index",
    "namespace_index",
    "object_key",
    "split_key",
    "strip_managed_fields",
]
