"""Shaped dicts: cached dicts that share one table of keys with every dict of the same keys.

A dict decoded from JSON owns a hash table of its keys: 184 bytes for up to five keys, 272 for
six to ten, before any value. 100,000 cached objects of one kind hold 100,000 copies of the same
tables (``metadata``, its ``ownerReferences`` entries, its ``labels``, the object itself): in a
metadata-only ConfigMap they are ~60 % of the object (bench/scale).

CPython keeps the keys of instances' ``__dict__`` in one table per class (PEP 412, key-sharing
dictionaries); each such dict holds only its values (~100-150 bytes instead of 184-272). It is
a ``dict`` in every respect: its type is ``dict``, it compares, iterates (in its own order),
serializes and copies as one; a reader that mutates it (which the cache forbids anyway) gets a
dict that quietly takes a table of its own. :func:`shaped` returns such a copy of a dict: one
class per *shape* (the tuple of its keys, in order), whose key table a first instance fills; the
``__dict__`` of another instance, with every key set, is the shape's prototype, and each shaped
dict is a copy of it (a copy of a shared dict shares its table) updated with the values.

Bounds: a shape gets a class the second time it is seen (keys seen once, such as a ConfigMap's
file names, cost a set entry, then nothing once the set is cleared), at most ``SHAPES_MAX``
classes (~2.6 KB each) are made, shapes of more than ``MAX_KEYS`` keys or with keys that name
Python attributes (``__dict__``, ...) are left as they are, and on an interpreter where the copy
would not be smaller (checked once, at import) :func:`shaped` returns its argument.
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["MAX_KEYS", "SHAPES_MAX", "shaped"]

#: Shapes (classes) made at most; later new shapes stay plain dicts.
SHAPES_MAX = 1024
#: Larger dicts stay plain (a class's shared table holds 30 keys).
MAX_KEYS = 24
_SEEN_MAX = 20_000

_new = object.__new__
# Per shape: a shaped dict of its keys (all None), never handed out, or None: not shaped.
_shapes: dict[tuple[str, ...], dict[str, Any] | None] = {}
_seen: set[tuple[str, ...]] = set()


def shaped(d: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``d`` (equal, same order) that shares its key table with every dict of its
    shape, or ``d`` itself where that is not possible or not worth it (see the module doc)."""
    keys = tuple(d)
    prototype = _shapes.get(keys)
    if prototype is None:
        if keys in _shapes:
            return d
        prototype = _learn(keys)
        if prototype is None:
            return d
    out = prototype.copy()  # a copy of a shared dict shares its table
    out.update(d)
    return out


def _learn(keys: tuple[str, ...]) -> dict[str, Any] | None:
    if keys not in _seen:
        if _enabled and 0 < len(keys) <= MAX_KEYS:
            if len(_seen) >= _SEEN_MAX:
                _seen.clear()
            _seen.add(keys)
        return None
    if len(_shapes) >= SHAPES_MAX:
        return None
    prototype = _make_prototype(keys)
    _shapes[keys] = prototype
    return prototype


def _make_prototype(keys: tuple[str, ...]) -> dict[str, Any] | None:
    """A dict of ``keys`` whose table holds them (and room for one more) and nothing else: the
    ``__dict__`` of an instance of a new class."""
    for key in keys:
        if type(key) is not str or key.startswith("__"):  # __dict__, __class__: attributes
            return None
    cls = type("_Shape", (), {})
    trainer: Any = _new(cls)
    for key in keys:
        setattr(trainer, key, None)
    for _ in range(32):  # each new instance shrinks the room left for more keys, down to one
        _new(cls)
    prototype: dict[str, Any] = _new(cls).__dict__
    for key in keys:
        prototype[key] = None
    return prototype


def _works() -> bool:
    """Is a shaped dict smaller than a plain one here (CPython 3.11+)?"""
    keys = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "ownerReferences")
    plain = dict.fromkeys(keys, "x")
    _seen.add(keys)
    try:
        shaped(plain)
        last = shaped(plain)
        return type(last) is dict and last == plain and sys.getsizeof(last) < sys.getsizeof(plain)
    except Exception:  # an interpreter without sys.getsizeof or instance dicts
        return False
    finally:
        _shapes.clear()
        _seen.clear()


_enabled = True
_enabled = _works()
