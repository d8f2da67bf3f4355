"""Decoding a list response while it arrives: items as soon as each one is complete.

A list of 100,000 objects is one JSON document of ~90 MB. Decoding it in one ``orjson.loads``
once the last byte is in means the client does nothing while the server sends, then everything
(~0.4 s of parsing, then the informer's work) after it. :class:`ListDecoder` hands out each item
as soon as its bytes are complete, so the cache is filled while the rest is still on the wire.

How items are found without a JSON tokenizer in Python: the API server writes ``kind``,
``apiVersion`` and ``metadata`` (resourceVersion, continue) first, then ``"items":[``, then the
items, each an object with the same first key (``{"metadata":`` for built-in kinds,
``{"apiVersion":`` for custom resources, Go sorts map keys). So an item ends at a ``}`` followed
by ``,{"<first key>":``. Such a sequence can occur inside an item too (a list of objects that
start with the same key, as owner references do), never inside a string (``{"`` there would be
``{\\"``). Each candidate is checked by decoding the bytes from the item's ``{`` to it: they form
one valid JSON object exactly when that ``}`` closes the item, so a wrong candidate fails and the
next one is tried. Anything unexpected (another layout, whitespace, a head that does not decode)
makes the rest be decoded in one piece at the end, as before: the split is an optimization, the
result is always what ``orjson.loads`` of the whole body gives.
"""

from __future__ import annotations

from typing import Any

import orjson

from kubeop.client.http import ProtocolError

__all__ = ["ListDecoder"]

Obj = dict[str, Any]

_ITEMS = b'"items":['
_HEAD_LIMIT = 1 << 20  # a list's head is a few hundred bytes; past this, stop looking for items
# An unfinished item larger than this is left to the end (each wrong end candidate costs a
# decode of what precedes it, so a huge item with many nested candidates would cost a lot).
_ITEM_LIMIT = 1 << 20
_OPEN, _CLOSE = ord("{"), ord("]")


class ListDecoder:
    """Feed a list response's body with :meth:`feed` (returns the items completed so far), then
    call :meth:`finish` (returns the last items). ``head`` is the document without ``items``
    (``kind``, ``apiVersion``, ``metadata``) as soon as it has arrived, None before; after
    ``finish`` it also holds any fields that came after the items."""

    __slots__ = ("_buf", "_limit", "_prefix", "_sep", "_size", "_split", "head")

    def __init__(self, max_body: int = 512 * 1024 * 1024) -> None:
        # Before the head is read: the body so far; then the bytes not decoded yet, starting at
        # an item's "{" while items are split off.
        self._buf = bytearray()
        self._sep = b""  # b'},{"<first key>":' once the first item's key is in
        self._prefix = b""  # b'{"<first key>":'
        self._split = True  # False: decode the rest in one piece at the end
        self._size = 0
        self._limit = max_body
        self.head: Obj | None = None

    def feed(self, data: bytes) -> list[Obj]:
        self._size += len(data)
        if self._size > self._limit:
            raise ProtocolError(f"list response larger than {self._limit} bytes")
        buf = self._buf
        sep = self._sep
        if sep and sep not in data and sep not in bytes(buf[-len(sep) :]) + data[: len(sep)]:
            buf += data  # no item ends in these bytes
            if len(buf) > _ITEM_LIMIT:
                self._split = False
            return []
        buf += data
        if not self._split:
            return []
        if self.head is None and not self._read_head():
            return []
        return self._items()

    def _read_head(self) -> bool:
        buf = self._buf
        at = buf.find(_ITEMS)
        if at < 0:
            if len(buf) > _HEAD_LIMIT:
                self._split = False
            return False
        try:
            head = orjson.loads(bytes(buf[:at]) + b'"items":[]}')
        except orjson.JSONDecodeError:
            head = None
        # Only a top-level "items" closes with "]}": nested deeper, the document stays open.
        if type(head) is not dict or head.get("items") != []:
            self._split = False
            return False
        del head["items"]
        self.head = head
        del buf[: at + len(_ITEMS)]
        return True

    def _items(self) -> list[Obj]:
        buf = self._buf
        if not buf:
            return []
        if buf[0] != _OPEN:
            # "]": the items are complete, the rest is decoded at the end; anything else is not
            # compact JSON as the API server writes it.
            self._split = False
            return []
        sep = self._sep
        if not sep:
            key_end = buf.find(b'":')
            if key_end < 0:
                return []
            self._prefix = bytes(buf[: key_end + 2])
            sep = self._sep = b"}," + self._prefix
        prefix = self._prefix
        parts = buf.split(sep)
        if len(parts) == 1:
            return []
        last = parts.pop()
        loads = orjson.loads
        decode_error = orjson.JSONDecodeError
        out: list[Obj] = []
        pending: bytes | bytearray = b""  # an item whose end candidates so far were inside it
        for n, part in enumerate(parts):
            candidate: bytes | bytearray
            if pending:
                candidate = pending + sep + part
            elif n == 0:
                candidate = part  # the buffer starts with the item's "{"
            else:
                candidate = prefix + part
            try:
                out.append(loads(candidate + b"}"))
            except decode_error:
                pending = candidate  # that "}" closed something inside the item
                continue
            pending = b""
        self._buf = bytearray(pending + sep + last if pending else prefix + last)
        if len(self._buf) > _ITEM_LIMIT:
            self._split = False
        return out

    def finish(self) -> list[Obj]:
        """The items not returned yet; the body must be complete. Raises
        ``orjson.JSONDecodeError`` if it is not valid JSON, ``ValueError`` if not an object."""
        buf, self._buf = self._buf, bytearray()
        if self.head is None:
            doc = orjson.loads(buf)
            if type(doc) is not dict:
                raise ValueError("a list response that is not a JSON object")
            items = doc.pop("items", None) or []
            self.head = doc
        else:
            tail = orjson.loads(b'{"items":[' + buf)
            items = tail.pop("items", None) or []
            self.head.update(tail)
        if type(items) is not list:
            raise ValueError("a list response whose items are not a list")
        return items
