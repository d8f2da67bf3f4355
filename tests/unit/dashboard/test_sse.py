"""Server-sent events: the framing, and a stream of snapshots sent while they change."""

from __future__ import annotations

import asyncio

import pytest

from kubeop.dashboard.sse import comment, frame, snapshots


def test_a_frame_is_fields_then_a_blank_line() -> None:
    assert frame('{"a":1}', event="snapshot") == b'event: snapshot\ndata: {"a":1}\n\n'
    assert frame("x", id="7") == b"id: 7\ndata: x\n\n"


def test_line_breaks_in_the_data_become_data_lines() -> None:
    assert frame("one\ntwo\r\nthree\rfour") == b"data: one\ndata: two\ndata: three\ndata: four\n\n"


def test_fields_of_one_line_only() -> None:
    with pytest.raises(ValueError, match="one line"):
        frame("x", event="a\nb")
    with pytest.raises(ValueError, match="one line"):
        comment("a\rb")
    assert comment("keep-alive") == b": keep-alive\n\n"


async def test_snapshots_are_sent_when_they_change_until_stopped() -> None:
    stop = asyncio.Event()
    values = iter([{"n": 1}, {"n": 1}, {"n": 2}])

    async def make() -> object:
        try:
            return next(values)
        except StopIteration:
            stop.set()
            return {"n": 2}

    chunks = []
    async with asyncio.timeout(5):
        async for chunk in snapshots(make, stop, interval=0.01, keepalive=60):
            chunks.append(chunk)
    assert chunks == [
        b"retry: 2000\n\n",
        b'event: snapshot\ndata: {"n":1}\n\n',
        b'event: snapshot\ndata: {"n":2}\n\n',
    ]


async def test_a_quiet_stream_sends_keepalives() -> None:
    stop = asyncio.Event()

    async def make() -> object:
        return {}

    chunks = []
    async with asyncio.timeout(5):
        async for chunk in snapshots(make, stop, interval=0.01, keepalive=0.02):
            chunks.append(chunk)
            if chunk.startswith(b":"):
                stop.set()
    assert chunks[-1] == b": keep-alive\n\n"
