"""Watch events and the line splitter that turns a chunked HTTP body into them.

A watch response is one JSON document per line. Chunks from the socket split lines anywhere, and
a single line can be many megabytes (a large object), so lines are assembled here from whatever
chunks arrive, with no per-line size limit, and each line is decoded exactly once with orjson.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, Generic, Literal, NamedTuple, TypeVar

import orjson

from kubeop.client.http import ProtocolError
from kubeop.core.errors import ApiError, error_from_status

__all__ = ["EventType", "WatchEvent", "decode_event", "split_lines"]

EventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]
T = TypeVar("T")


class WatchEvent(NamedTuple, Generic[T]):
    """``type`` is ADDED, MODIFIED, DELETED or BOOKMARK; ``object`` the object (a dict by default).

    For a BOOKMARK only ``metadata.resourceVersion`` (and, at the end of a streaming list, the
    ``k8s.io/initial-events-end`` annotation) is meaningful.
    """

    type: str
    object: T

    @property
    def resource_version(self) -> str:
        """The resourceVersion of the event's object (``""`` when it has none)."""
        obj: Any = self.object
        meta = obj.get("metadata") if isinstance(obj, dict) else getattr(obj, "metadata", None)
        if isinstance(meta, dict):
            return str(meta.get("resourceVersion") or "")
        return str(getattr(meta, "resourceVersion", None) or getattr(meta, "resource_version", None) or "")

    @property
    def is_initial_events_end(self) -> bool:
        """True for the bookmark that closes the initial state of a streaming list."""
        if self.type != "BOOKMARK" or not isinstance(self.object, dict):
            return False
        annotations = (self.object.get("metadata") or {}).get("annotations") or {}
        return annotations.get("k8s.io/initial-events-end") == "true"


# One watch event is one object (etcd stores at most ~1.5 MB per object by default); a "line"
# longer than this is a server gone wrong, not an event to buffer without end.
MAX_LINE = 64 * 1024 * 1024


async def split_lines(chunks: AsyncIterable[bytes], max_line: int = MAX_LINE) -> AsyncIterator[bytes]:
    """Yield complete non-empty lines (without the newline) from arbitrarily split chunks.

    A trailing line without a newline is yielded at the end of the stream. A line longer than
    ``max_line`` bytes raises :class:`~kubeop.client.http.ProtocolError`.
    """
    pending = bytearray()
    async for chunk in chunks:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if end < 0:
                break
            if pending:
                pending += chunk[start:end]
                line = bytes(pending)
                pending.clear()
            else:
                line = chunk[start:end]
            start = end + 1
            if line.strip():
                yield line
        if start < len(chunk):
            pending += chunk[start:]
            if len(pending) > max_line:
                raise ProtocolError(f"a watch event longer than {max_line} bytes")
    if pending.strip():
        yield bytes(pending)


def decode_event(line: bytes, *, request: str = "", target: str = "") -> WatchEvent[dict[str, Any]]:
    """Decode one watch line; an ERROR event raises the typed error from its Status.

    The stream always ends after an ERROR event (a 410 ``Expired`` when the resourceVersion is
    too old), so raising is the iterator's natural end and ``except Gone`` is the relist signal.
    Anything else that is not ``{"type": <string>, "object": <object>}`` raises :class:`ApiError`
    with the line's start; this never raises anything but an ApiError.
    """
    try:
        doc = orjson.loads(line)
        etype = doc["type"]
        obj = doc["object"]
    except (orjson.JSONDecodeError, KeyError, TypeError, IndexError):
        raise _malformed(line, request, target) from None
    if etype == "ERROR":
        raise error_from_status(obj, request=request, target=target)
    if type(etype) is not str or type(obj) is not dict:
        raise _malformed(line, request, target)
    return WatchEvent(etype, obj)


def _malformed(line: bytes, request: str, target: str) -> ApiError:
    return ApiError(f"malformed watch event from {target or 'the server'}: {line[:200]!r}", request=request)
