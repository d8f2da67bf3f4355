"""Server-sent events: the framing (``text/event-stream``) and a stream of a page's snapshots.

    async for chunk in snapshots(lambda: page(), stop, interval=1.0):
        send(chunk)       # b"retry: 2000\\n\\n", then b"event: snapshot\\ndata: {...}\\n\\n" ...

A snapshot is sent when it differs from the last one sent, a comment line at least every
``keepalive`` seconds otherwise (so proxies and the browser keep the connection), until ``stop``
is set. The browser's ``EventSource`` reconnects by itself (after ``retry`` ms) when it drops.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson

__all__ = ["CONTENT_TYPE", "comment", "frame", "snapshots"]

CONTENT_TYPE = "text/event-stream; charset=utf-8"


def frame(data: str, *, event: str | None = None, id: str | None = None) -> bytes:
    """One event: ``data``'s lines each as a ``data:`` field (a line break inside the data is
    sent as a new ``data:`` line, which the browser joins back with ``\\n``)."""
    lines = []
    if event is not None:
        _check(event, "event")
        lines.append(f"event: {event}")
    if id is not None:
        _check(id, "id")
        lines.append(f"id: {id}")
    lines.extend(f"data: {line}" for line in data.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


def comment(text: str = "") -> bytes:
    """A comment line (ignored by the browser): a keep-alive."""
    _check(text, "comment")
    return f": {text}\n\n".encode()


def _check(value: str, what: str) -> None:
    if "\n" in value or "\r" in value:
        raise ValueError(f"an SSE {what} must be one line, got {value!r}")


async def snapshots(
    make: Callable[[], Awaitable[Any]],
    stop: asyncio.Event,
    *,
    interval: float = 1.0,
    keepalive: float = 15.0,
    retry_ms: int = 2000,
) -> AsyncIterator[bytes]:
    """Frames of ``make()``'s result (JSON) every ``interval`` seconds while it changes, until
    ``stop`` is set (see the module docstring)."""
    yield f"retry: {retry_ms}\n\n".encode()
    last: bytes | None = None
    quiet_since = time.monotonic()
    while not stop.is_set():
        data = orjson.dumps(await make())
        if data != last:
            last = data
            quiet_since = time.monotonic()
            yield frame(data.decode(), event="snapshot")
        elif time.monotonic() - quiet_since >= keepalive:
            quiet_since = time.monotonic()
            yield comment("keep-alive")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(interval):
                await stop.wait()
