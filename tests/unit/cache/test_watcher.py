"""The watcher's state machine against an in-memory server: lists, watches, relists, recovery."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest

from kubeop.cache import (
    Apply,
    BackoffConfig,
    Delete,
    Init,
    InitApply,
    InitDone,
    Watcher,
    WatcherConfig,
    WatcherEvent,
    strip_managed_fields,
)
from kubeop.client import ApiConnectionError
from kubeop.core.errors import Expired, Forbidden, InternalError

from .fakes import FakeListWatch, FakeServer, StreamingFakeListWatch, server_probe, too_large_rv_error

FAST = BackoffConfig(initial=0.01, cap=0.04, jitter=0.0)


def config(**changes: Any) -> WatcherConfig:
    base: dict[str, Any] = {"backoff": FAST, "stall_timeout": 0}
    base.update(changes)
    return WatcherConfig(**base)


class Events:
    """Runs a watcher in a background task (as a reflector would) and queues its events."""

    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher
        self.queue: asyncio.Queue[WatcherEvent] = asyncio.Queue()
        self.task = asyncio.create_task(self._pump())

    async def _pump(self) -> None:
        async for event in self.watcher:
            self.queue.put_nowait(event)

    async def next(self, within: float = 2.0) -> WatcherEvent:
        return await asyncio.wait_for(self.queue.get(), within)

    async def take(self, n: int, within: float = 2.0) -> list[WatcherEvent]:
        return [await self.next(within) for _ in range(n)]

    async def none_within(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
        assert self.queue.empty(), self.queue.get_nowait()

    async def close(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


def names(events: list[WatcherEvent]) -> list[str]:
    out = []
    for e in events:
        if isinstance(e, (InitApply, Apply, Delete)):
            out.append(f"{type(e).__name__}:{e.object['metadata']['name']}")
        else:
            out.append(type(e).__name__)
    return out


async def watching(server: FakeServer) -> None:
    """Wait until the watcher has a watch open on ``server``."""
    for _ in range(200):
        if server.streams:
            return
        await asyncio.sleep(0.005)
    raise AssertionError("no watch was opened")


def filled(n: int, **server_args: Any) -> FakeServer:
    server = FakeServer(**server_args)
    for i in range(n):
        server.create(f"cm{i}", k=str(i))
    return server


@pytest.mark.parametrize("lister", [FakeListWatch, StreamingFakeListWatch])
async def test_paged_list_then_watch(lister: type[FakeListWatch]) -> None:
    server = filled(5, streaming=False)
    lw = lister(server)
    events = Events(Watcher(lw, config(page_size=2)))
    first = await events.take(7)
    assert names(first) == ["Init"] + [f"InitApply:cm{i}" for i in range(5)] + ["InitDone"]
    assert isinstance(first[-1], InitDone) and first[-1].resource_version == str(server.rv)
    # The first list asks for any version ("0": the watch cache), in pages; the rest continue.
    lists = [c for c in lw.calls if c["verb"] == "list"]
    assert [(c["limit"], c["resource_version"], bool(c["continue"])) for c in lists] == [
        (2, "0", False),
        (2, None, True),
        (2, None, True),
    ]
    server.create("new")
    server.update("cm1", k="changed")
    server.delete("cm2")
    live = await events.take(3)
    assert names(live) == ["Apply:new", "Apply:cm1", "Delete:cm2"]
    assert isinstance(live[0], Apply) and live[0].added and isinstance(live[1], Apply) and not live[1].added
    watch = lw.calls[-1]
    assert watch["verb"] == "watch" and watch["allow_bookmarks"] and not watch["send_initial_events"]
    assert watch["resource_version"] == first[-1].resource_version
    assert 300 <= watch["timeout_seconds"] <= 600
    assert events.watcher.resource_version == str(server.rv)
    await events.close()


async def test_consistent_first_list() -> None:
    server = filled(3, streaming=False)
    lw = FakeListWatch(server)
    events = Events(Watcher(lw, config(page_size=2, consistent_list=True)))
    await events.take(5)
    lists = [(c["limit"], c["resource_version"]) for c in lw.calls if c["verb"] == "list"]
    assert lists == [(2, None), (2, None)]
    await events.close()


async def test_streaming_list_continues_on_the_same_stream() -> None:
    server = filled(3)
    lw = FakeListWatch(server)
    events = Events(Watcher(lw, config()))
    assert names(await events.take(5)) == [
        "Init",
        "InitApply:cm0",
        "InitApply:cm1",
        "InitApply:cm2",
        "InitDone",
    ]
    server.update("cm0", k="x")
    assert names(await events.take(1)) == ["Apply:cm0"]
    assert server.requests == ["stream-list"]
    assert lw.calls[0]["send_initial_events"] and lw.calls[0]["resource_version"] is None
    await events.close()


async def test_empty_collection_still_completes_the_list() -> None:
    for streaming in (True, False):
        events = Events(Watcher(FakeListWatch(FakeServer(streaming=streaming)), config()))
        assert names(await events.take(2)) == ["Init", "InitDone"]
        await events.close()


async def test_falls_back_to_paged_lists_when_streaming_is_rejected() -> None:
    server = filled(2, streaming=False)
    events = Events(Watcher(FakeListWatch(server), config()))
    assert names(await events.take(4)) == ["Init", "InitApply:cm0", "InitApply:cm1", "InitDone"]
    assert server.requests[:2] == ["stream-list", "list"]
    # ... for good: a relist does not try streaming again.
    await watching(server)
    server.rv += 1
    server.compact()
    server.break_streams()
    assert names(await events.take(4)) == ["Init", "InitApply:cm0", "InitApply:cm1", "InitDone"]
    assert "stream-list" not in server.requests[1:]
    await events.close()


async def test_streaming_can_be_forced_off() -> None:
    server = filled(1)
    events = Events(Watcher(FakeListWatch(server), config(streaming_list=False)))
    await events.take(3)
    assert server.requests == ["list", "watch"][: len(server.requests)]
    await events.close()


async def test_transform_applies_to_listed_and_watched_objects() -> None:
    server = filled(1)
    events = Events(Watcher(FakeListWatch(server), config(transform=strip_managed_fields)))
    got = await events.take(3)
    assert isinstance(got[1], InitApply) and "managedFields" not in got[1].object["metadata"]
    server.update("cm0", k="2")
    server.delete("cm0")
    for event in await events.take(2):
        assert isinstance(event, (Apply, Delete)) and "managedFields" not in event.object["metadata"]
    await events.close()


async def test_a_normally_ended_watch_resumes_without_relisting() -> None:
    server = filled(2)
    events = Events(Watcher(FakeListWatch(server), config()))
    await events.take(4)
    server.end_streams()
    await asyncio.sleep(0.01)
    await watching(server)
    server.create("after-close")
    assert names(await events.take(1)) == ["Apply:after-close"]
    assert server.requests == ["stream-list", "watch"]
    await events.close()


async def test_bookmarks_move_the_resume_point() -> None:
    server = filled(1)
    watcher = Watcher(FakeListWatch(server), config())
    events = Events(watcher)
    await events.take(3)
    server.rv += 10  # changes to other collections move the global revision
    server.bookmark()
    await events.none_within(0.05)
    assert watcher.resource_version == str(server.rv)
    await events.close()


async def test_connection_break_rewatches_from_the_last_version() -> None:
    server = filled(2)
    watcher = Watcher(FakeListWatch(server), config())
    events = Events(watcher)
    await events.take(4)
    server.update("cm0", k="1")
    await events.take(1)
    server.break_streams()
    await asyncio.sleep(0.01)
    server.update("cm1", k="1")
    got = await events.take(1)
    assert names(got) == ["Apply:cm1"]
    assert server.requests == ["stream-list", "watch"]
    assert watcher.stats.errors == 1 and watcher.stats.lists_completed == 1
    await events.close()


async def test_gone_relists_and_the_snapshot_lacks_vanished_objects() -> None:
    server = filled(3)
    lw = FakeListWatch(server)
    events = Events(Watcher(lw, config()))
    await events.take(5)
    # While the watch is down the server deletes cm1 and forgets its history.
    server.go_down()
    server.down = False
    server.delete("cm1")
    server.create("cm3")
    server.compact()
    got = await events.take(5)
    assert names(got) == ["Init", "InitApply:cm0", "InitApply:cm2", "InitApply:cm3", "InitDone"]
    assert server.requests == ["stream-list", "watch", "stream-list"]
    # After a 410 from a watch the relist may be served at "not older than" the last version.
    assert lw.calls[-1]["resource_version"] == str(server.compacted - 2)
    await events.close()


@pytest.mark.parametrize("lister", [FakeListWatch, StreamingFakeListWatch])
async def test_gone_during_a_paged_list_restarts_it_as_a_consistent_read(lister: type[FakeListWatch]) -> None:
    server = filled(4, streaming=False)
    lw = lister(server)
    watcher = Watcher(lw, config(page_size=2, streaming_list=False))
    # The continue token of page 2 has expired (etcd compacted meanwhile).
    server.fail_at[1] = Expired("The provided continue parameter is too old", code=410, reason="Expired")
    events = Events(watcher)
    got = await events.take(9)
    interrupted = ["Init", "InitApply:cm0", "InitApply:cm1"]
    complete = ["Init", "InitApply:cm0", "InitApply:cm1", "InitApply:cm2", "InitApply:cm3", "InitDone"]
    assert names(got) == [*interrupted, *complete]
    lists = [(c["resource_version"], c["continue"]) for c in lw.calls if c["verb"] == "list"]
    assert lists[0] == ("0", None)  # the first list: any version
    assert lists[2] == (None, None)  # after 410: a consistent read ("") from the start
    assert watcher.stats.errors == 1
    await events.close()


async def test_too_large_resource_version_relists_consistently() -> None:
    server = filled(1, streaming=False)
    lw = FakeListWatch(server)
    events = Events(Watcher(lw, config()))
    await events.take(3)
    await watching(server)
    server.errors.append(too_large_rv_error())
    server.end_streams()
    got = await events.take(3)
    assert names(got) == ["Init", "InitApply:cm0", "InitDone"]
    last_list = [c for c in lw.calls if c["verb"] == "list"][-1]
    assert last_list["resource_version"] is None
    await events.close()


async def test_repeated_failures_back_off() -> None:
    server = filled(1)
    watcher = Watcher(FakeListWatch(server), config(backoff=BackoffConfig(initial=0.05, cap=0.2, jitter=0.0)))
    events = Events(watcher)
    server.errors.extend([InternalError("boom") for _ in range(4)])
    started = time.monotonic()
    await events.take(3)
    elapsed = time.monotonic() - started
    # First failure: retried at once; then 0.05 + 0.1 + 0.2.
    assert 0.3 <= elapsed < 1.0, elapsed
    assert watcher.stats.errors == 4
    await events.close()


async def test_forbidden_is_retried_without_the_probe() -> None:
    server = filled(1)
    probe = server_probe(server)
    watcher = Watcher(
        FakeListWatch(server, probe=probe), config(backoff=BackoffConfig(initial=0.2, jitter=0))
    )
    events = Events(watcher)
    server.errors.extend([Forbidden("no"), Forbidden("no")])
    started = time.monotonic()
    await events.take(3)
    assert time.monotonic() - started >= 0.2  # the probe sees a healthy server: no early release
    assert watcher.stats.probe_releases == 0
    await events.close()


async def test_probe_ends_the_backoff_as_soon_as_the_server_is_back() -> None:
    server = filled(1)
    probe = server_probe(server, interval=0.02)
    slow = BackoffConfig(initial=30.0, cap=60.0, jitter=0.0)
    watcher = Watcher(FakeListWatch(server, probe=probe), config(backoff=slow))
    events = Events(watcher)
    await events.take(3)
    await watching(server)
    server.go_down()
    await asyncio.sleep(0.3)  # first failure retried at once, the second sleeps 30 s
    assert watcher.stats.errors >= 2
    server.down = False
    back = time.monotonic()
    server.create("after-outage")
    got = await events.take(1, within=2.0)
    assert names(got) == ["Apply:after-outage"]
    assert time.monotonic() - back < 0.5
    assert watcher.stats.probe_releases == 1
    await events.close()
    await probe.close()


async def test_the_probe_can_be_switched_off() -> None:
    server = filled(1)
    probe = server_probe(server, interval=0.01)
    slow = BackoffConfig(initial=0.3, cap=0.3, jitter=0.0)
    watcher = Watcher(FakeListWatch(server, probe=probe), config(backoff=slow, server_probe=False))
    events = Events(watcher)
    await events.take(3)
    await watching(server)
    server.go_down()
    await asyncio.sleep(0.05)
    server.down = False
    server.create("after")
    await events.take(1)
    assert watcher.stats.probe_releases == 0 and probe.checks == 0
    await events.close()


async def test_stalled_stream_is_detected_and_restarted() -> None:
    server = filled(1)
    watcher = Watcher(FakeListWatch(server), config(stall_timeout=0.2))
    events = Events(watcher)
    await events.take(3)
    server.freeze_streams()
    server.create("while-frozen")
    started = time.monotonic()
    got = await events.take(1, within=2.0)
    assert names(got) == ["Apply:while-frozen"]
    assert 0.2 <= time.monotonic() - started < 1.5
    assert watcher.stats.stalls == 1
    assert server.requests == ["stream-list", "watch"]
    await events.close()


async def test_no_stall_detection_without_bookmarks() -> None:
    server = filled(1, streaming=False)  # paged list, and this server never sends bookmarks
    watcher = Watcher(FakeListWatch(server), config(stall_timeout=0.05))
    events = Events(watcher)
    await events.take(3)
    await watching(server)
    await asyncio.sleep(0.2)  # a quiet watch is not restarted
    assert watcher.stats.stalls == 0 and server.count("watch") == 1
    server.bookmark()
    await asyncio.sleep(0.01)
    server.freeze_streams()
    server.create("later")
    assert names(await events.take(1)) == ["Apply:later"]
    assert watcher.stats.stalls == 1
    await events.close()


async def test_a_slow_consumer_is_not_a_stall() -> None:
    server = filled(1)
    watcher = Watcher(FakeListWatch(server), config(stall_timeout=0.1))
    seen: list[str] = []

    async def slow_consumer() -> None:
        async for event in watcher:
            seen.append(names([event])[0])
            if isinstance(event, Apply):
                await asyncio.sleep(0.3)  # busy: the watcher is not waiting on the stream

    task = asyncio.create_task(slow_consumer())
    await watching(server)
    server.create("a")
    server.create("b")
    await asyncio.sleep(0.5)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert seen[-2:] == ["Apply:a", "Apply:b"]
    assert watcher.stats.stalls == 0


async def test_cancellation_is_not_mistaken_for_a_stall() -> None:
    server = filled(1)
    watcher = Watcher(FakeListWatch(server), config(stall_timeout=0.05))

    async def consume() -> None:
        async for _ in watcher:
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not server.streams  # the stream was closed


async def test_very_short_watches_back_off() -> None:
    server = filled(1)
    watcher = Watcher(FakeListWatch(server), config(backoff=BackoffConfig(initial=0.05, jitter=0)))
    events = Events(watcher)
    await events.take(3)
    await watching(server)
    for _ in range(3):
        server.end_streams()
        await asyncio.sleep(0.001)
    calls_before = server.count("watch")
    await asyncio.sleep(0.02)
    # The first empty close is retried at once; the next ones wait (not a hot loop).
    assert server.count("watch") - calls_before <= 2
    await events.close()


async def test_the_watcher_resumes_after_the_consumer_restarts_iterating() -> None:
    server = filled(2)
    watcher = Watcher(FakeListWatch(server), config())
    events = Events(watcher)
    await events.take(4)
    await events.close()
    server.create("later")
    again = Events(watcher)
    assert names(await again.take(1)) == ["Apply:later"]
    await again.close()
    # A consumer that stopped in the middle of a list starts the list over.
    half = Watcher(FakeListWatch(filled(3)), config())
    async for event in half:
        if isinstance(event, InitApply):
            break
    second = Events(half)
    assert names(await second.take(1)) == ["Init"]
    await second.close()


async def test_events_are_plain_values() -> None:
    assert Apply({"a": 1}) == Apply({"a": 1}, added=False)
    assert isinstance(Init(), Init)
    assert InitDone("5").resource_version == "5"


async def test_a_failure_while_the_returned_server_warms_up_waits_the_initial_delay() -> None:
    """The probe ends the outage's wait; the backoff that grew during the outage starts over, so a
    503 from the restarted server (its paths not installed yet) costs 0.1 s here, not 1.6 s."""
    from kubeop.core.errors import ServiceUnavailable

    server = filled(1)
    probe = server_probe(server, interval=0.02)
    backoff = BackoffConfig(initial=0.1, cap=60.0, jitter=0.0)
    watcher = Watcher(FakeListWatch(server, probe=probe), config(backoff=backoff))
    events = Events(watcher)
    await events.take(3)
    await watching(server)
    server.go_down()
    await asyncio.sleep(1.0)  # failures: at once, then waits of 0.1, 0.2, 0.4: the next is 0.8
    assert watcher.stats.errors >= 4
    server.errors.append(ServiceUnavailable("the request has been made before all known HTTP paths"))
    server.down = False
    back = time.monotonic()
    server.create("after-outage")
    got = await events.take(1, within=3.0)
    assert names(got) == ["Apply:after-outage"]
    assert time.monotonic() - back < 0.5
    assert watcher.stats.probe_releases == 1
    await events.close()
    await probe.close()


class _RetryingListWatch(FakeListWatch):
    """A watch sent while the server is down sits in the transport's retry pauses (30 s here)
    before failing, as an idempotent request does in the client."""

    async def watch(self, **options: Any) -> Any:
        if not self.server.down:
            return await super().watch(**options)

        async def retrying() -> Any:
            await asyncio.sleep(30)
            raise ApiConnectionError("connection refused, after the transport's retries")
            yield  # an async generator, as the transport's stream

        return retrying()


async def test_the_probe_cuts_short_a_request_still_in_the_transports_retries() -> None:
    server = filled(1)
    probe = server_probe(server, interval=0.02)
    watcher = Watcher(_RetryingListWatch(server, probe=probe), config())
    events = Events(watcher)
    await events.take(3)
    await watching(server)
    server.go_down()  # the stream breaks; the watch is sent again at once and sits in the retries
    await asyncio.sleep(0.2)
    server.down = False
    back = time.monotonic()
    server.create("after-outage")
    got = await events.take(1, within=2.0)
    assert names(got) == ["Apply:after-outage"]
    assert time.monotonic() - back < 0.5
    assert watcher.stats.probe_releases == 1
    await events.close()
    await probe.close()
