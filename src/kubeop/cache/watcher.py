"""watcher: list and watch one collection forever, as a stream of events a cache can apply.

``async for event in watcher(client, "configmaps", namespace="x"):`` yields

- :class:`Init`, then :class:`InitApply` for every object that exists, then
  :class:`InitDone` with the list's resourceVersion: a complete, consistent snapshot. A consumer
  that keeps state buffers between ``Init`` and ``InitDone`` and then swaps atomically; objects it
  held that are not in the snapshot were deleted while the watcher was not looking;
- :class:`Apply` (an object was added or modified) and :class:`Delete` as they happen;
- a new ``Init`` ... ``InitDone`` whenever the watcher had to relist (410 Gone / too large
  resourceVersion).

It never raises (except on cancellation): every failure is logged and retried. The decisions
are a pure state machine, :mod:`kubeop.cache.watch_machine` (its transitions are tested as
tables, without a clock or a server); :class:`Watcher` drives it: sends the requests, feeds it
the answers, waits, times, counts and logs. The behaviour, with the values of client-go's
reflector (k8s.io/client-go/tools/cache/reflector.go):

- **initial list**: a streaming list (a watch with ``sendInitialEvents=true``, ending at the
  bookmark annotated ``k8s.io/initial-events-end``) when the server supports it, as client-go
  1.35+ does by default; otherwise (the server rejects the parameters) a paged list, 500 per page,
  at resourceVersion "0" the first time (served from the API server's watch cache), and
  resourceVersion "" (a consistent read) after the previous version became unavailable;
- **watch** from the last resourceVersion seen (list, event or bookmark), with bookmarks and a
  random server-side timeout of 5-10 minutes to spread reconnects; a stream that ends normally is
  re-opened from where it stopped, without a relist;
- **410 Gone / Expired / too large resourceVersion**: relist (immediately the first time);
- **other failures**: the first one after progress is retried at once (a stream that worked and
  broke), later ones wait 0.8 s doubling to 30 s with jitter, reset after 2 minutes without
  failures; while the wait is caused by an unreachable or failing server, a shared
  :class:`~kubeop.cache.probe.ServerProbe` cuts it short as soon as the server is back, and so
  it does for the next request while that one is still outstanding (the client's transport
  retries a GET on connection errors and 503s with pauses of up to seconds, which would
  otherwise keep the watch down seconds after the server's return: a ``ReturnGuard``);
- **stall detection**: a stream that delivers nothing (no event, no bookmark) for
  ``stall_timeout`` seconds while the watcher waits on it is abandoned and re-opened: the API
  server sends a bookmark at least every minute, so silence means a dead connection (a frozen
  proxy or NAT entry) that TCP alone would not notice for many minutes. It is armed once the
  server has been seen sending a bookmark (the streaming list's last event is one);
- a watch that ends within 1 s without any event is a failure (client-go's "very short watch").

Differences from client-go, on purpose: after a broken stream (connection reset, apiserver
restart) client-go backs off and relists everything; here the watch is re-opened from the last
resourceVersion, and a relist happens only when the server says that version is gone.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from kubeop.cache.backoff import Backoff, BackoffConfig
from kubeop.cache.listwatch import ListerWatcher, ListWatch, StreamingListerWatcher
from kubeop.cache.probe import ReturnGuard, ServerProbe
from kubeop.cache.stall import StallGuard
from kubeop.cache.transform import Transform
from kubeop.cache.watch_events import (
    Apply,
    Delete,
    Error,
    Init,
    InitApply,
    InitDone,
    VeryShortWatch,
    WatcherEvent,
    WatchStalled,
)
from kubeop.cache.watch_machine import (
    RESUME,
    Failed,
    ListPage,
    Machine,
    OpenWatch,
    PagedFallback,
    Request,
    ResponseEnd,
    Retry,
    State,
    with_resource_version,
)
from kubeop.client.client import Client, ObjectList, ResourceLike
from kubeop.client.transport import ApiConnectionError
from kubeop.client.unavailable import server_unavailable
from kubeop.core.errors import ApiError
from kubeop.core.request import FieldSelectorLike, LabelSelectorLike

__all__ = [
    "Apply",
    "Config",
    "Delete",
    "Error",
    "Init",
    "InitApply",
    "InitDone",
    "VeryShortWatch",
    "WatchStalled",
    "Watcher",
    "WatcherEvent",
    "WatcherStats",
    "watcher",
]

log = logging.getLogger("kubeop.cache")

Obj = dict[str, object]

_KNOWN_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})


# -- configuration, statistics --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Config:
    """How a watcher lists and watches. The defaults are client-go's."""

    #: Objects per list page (None: no paging). Only used when streaming lists are not.
    page_size: int | None = 500
    #: True: always stream the initial list; False: always page; None: stream, fall back to pages.
    streaming_list: bool | None = None
    #: Paged lists only: make the first list a consistent read of the latest state (paged from
    #: etcd) instead of client-go's "any version" (resourceVersion=0, served from the API server's
    #: watch cache, which ignores page sizes and may lag behind in HA setups).
    consistent_list: bool = False
    #: Server-side watch timeout, random in [min, max] seconds, to spread reconnects.
    min_watch_timeout: int = 300
    max_watch_timeout: int = 600
    #: Seconds without any event or bookmark after which a stream is considered dead (0: never).
    stall_timeout: float = 90.0
    backoff: BackoffConfig = field(default_factory=BackoffConfig)
    #: Applied to every object as soon as it is decoded (see :mod:`kubeop.cache.transform`).
    transform: Transform | None = None
    #: Ask for bookmarks (keeps the resume point fresh; also what stall detection relies on).
    bookmarks: bool = True
    #: End backoff waits early when the shared /readyz probe sees the server come back
    #: (False: the backoff alone, as client-go).
    server_probe: bool = True
    #: Informers pause CPython's cyclic garbage collector while they load a (re)list, for at most
    #: this many seconds (0: never pause); see :mod:`kubeop.cache.gcpause`.
    gc_pause: float = 60.0

    def __post_init__(self) -> None:
        if self.page_size is not None and self.page_size <= 0:
            raise ValueError("page_size must be positive or None")
        if not 0 < self.min_watch_timeout <= self.max_watch_timeout:
            raise ValueError("need 0 < min_watch_timeout <= max_watch_timeout")


@dataclass(slots=True)
class WatcherStats:
    """Counters, for tests and metrics: requests made and how the watcher recovered."""

    list_requests: int = 0
    watch_requests: int = 0
    #: Completed initial lists (the first one included).
    lists_completed: int = 0
    errors: int = 0
    stalls: int = 0
    #: Bookmarks received (the first one arms stall detection).
    bookmarks: int = 0
    #: Backoff waits cut short by the server probe.
    probe_releases: int = 0


# -- the watcher ----------------------------------------------------------------------------------


class Watcher:
    """The list/watch loop over a :class:`~kubeop.cache.listwatch.ListerWatcher`.

    Iterate it (``async for event in w``) from one task at a time. The state (resume point,
    backoff) lives on the object, so iterating again after an interruption resumes: with a
    relist if the previous iteration stopped in the middle of one. ``resource_version`` is the
    last version seen (client-go's ``LastSyncResourceVersion``).

    What to do is decided by :mod:`kubeop.cache.watch_machine` (pure); this class only sends the
    requests it asks for, feeds it what comes back, and waits, times, counts and logs.
    """

    def __init__(
        self, source: ListerWatcher, config: Config | None = None, *, rng: random.Random | None = None
    ) -> None:
        self.source = source
        self.config = config if config is not None else Config()
        self.last_error: BaseException | None = None
        self.stats = WatcherStats()
        self._rng = rng or random.Random()
        self._backoff = Backoff(self.config.backoff, self._rng)
        cfg = self.config
        self._machine = Machine(
            lambda: self.source.description,
            transform=cfg.transform,
            page_size=cfg.page_size,
            consistent_list=cfg.consistent_list,
        )
        self._state: State = self._machine.initial(cfg.streaming_list)
        self._next: Request | None = None  # what the response just read asks for next
        self._return_guard: ReturnGuard | None = None

    @property
    def description(self) -> str:
        """What is watched, for logs (see :attr:`ListWatch.description`)."""
        return self.source.description

    @property
    def resource_version(self) -> str:
        """The resourceVersion the watcher has reached (where a new watch resumes)."""
        return self._state.resource_version

    @resource_version.setter
    def resource_version(self, value: str) -> None:
        self._state = with_resource_version(self._state, value)

    @property
    def state(self) -> State:
        """Where the watcher is (see :mod:`kubeop.cache.watch_machine`), for tests and debugging."""
        return self._state

    def __aiter__(self) -> AsyncIterator[WatcherEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[WatcherEvent]:
        machine = self._machine
        request: Request | None = None
        while True:
            if request is None:
                self._state, _, request = machine.step(self._state, RESUME)
            if type(request) is Retry:
                await self._retry(request)
                request = None
                continue
            if type(request) is PagedFallback:
                log.info(
                    "%s: the server does not support streaming lists (%s); using paged lists",
                    self.description,
                    request.error,
                )
                request = None
                continue
            self._arm_return_guard()
            self._next = None
            try:
                if type(request) is OpenWatch:
                    async for event in self._stream(request):
                        yield event
                else:
                    assert type(request) is ListPage
                    async for event in self._pages(request):
                        yield event
                request = self._next
            except asyncio.CancelledError:
                if self._return_guard is None or not self._return_guard.fired():
                    raise
                # The probe saw the server come back while this attempt's request still sat in
                # the transport's retry pauses: send it again now.
                self.stats.probe_releases += 1
                self._backoff.reset()
                log.info("%s: the API server is back; retrying now", self.description)
                request = None
            except Exception as err:
                self._disarm_return_guard()  # before any wait: the guard cancels this task
                self._state, _, request = machine.step(self._state, Failed(err))
            finally:
                self._disarm_return_guard()

    def _arm_return_guard(self) -> None:
        """While recovering from an unavailable server, let the probe cut the next request short."""
        probe = self.source.probe
        if (
            self._state.progress.failures
            and probe is not None
            and self.config.server_probe
            and isinstance(self.last_error, Exception)
            and server_unavailable(self.last_error)
        ):
            task = asyncio.current_task()
            if task is not None:
                self._return_guard = ReturnGuard(probe, task)

    def _disarm_return_guard(self) -> None:
        guard, self._return_guard = self._return_guard, None
        if guard is not None:
            guard.stop()

    # -- requests ---------------------------------------------------------------------------------

    async def _stream(self, request: OpenWatch) -> AsyncIterator[WatcherEvent]:
        """One watch stream, fed to the machine event by event; ``self._next`` is set to what
        comes after it.

        This is the hot path of every sync (one pass per object), hence the locals.
        """
        cfg = self.config
        timeout = int(
            cfg.min_watch_timeout + self._rng.random() * (cfg.max_watch_timeout - cfg.min_watch_timeout)
        )
        stats = self.stats
        stats.watch_requests += 1
        stream = await self.source.watch(
            resource_version=request.resource_version or None,
            timeout_seconds=timeout,
            send_initial_events=request.initial,
            allow_bookmarks=cfg.bookmarks or request.initial,
        )
        step = self._machine.step
        monotonic = time.monotonic  # the event loop's clock, minus a Python-level call
        guard = StallGuard(asyncio.get_running_loop(), cfg.stall_timeout, asyncio.current_task())
        guard.armed = stats.bookmarks > 0
        started = monotonic()
        next_event = stream.__anext__
        try:
            while True:
                guard.waiting_since = monotonic()
                try:
                    event = await next_event()
                except StopAsyncIteration:
                    break
                except asyncio.CancelledError:
                    if guard.stalled():
                        stats.stalls += 1
                        raise WatchStalled(
                            f"{self.description}: no event or bookmark for "
                            f"{cfg.stall_timeout:g} s; restarting the watch"
                        ) from None
                    raise
                guard.waiting_since = None
                if self._return_guard is not None:
                    self._disarm_return_guard()  # the server answered
                if event[0] == "BOOKMARK":
                    stats.bookmarks += 1
                    guard.armed = True
                    self._state, emitted, after = step(self._state, event)
                    if emitted and type(emitted[-1]) is InitDone:
                        stats.lists_completed += 1
                else:
                    self._state, emitted, after = step(self._state, event)
                    if not emitted and event[0] not in _KNOWN_TYPES:
                        log.warning("%s: ignoring watch event of unknown type %r", self.description, event[0])
                for out in emitted:
                    yield out
                if after is not None:
                    self._next = after
                    return
        finally:
            guard.stop()
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        self._state, _, self._next = step(self._state, ResponseEnd(monotonic() - started))

    async def _pages(self, request: ListPage) -> AsyncIterator[WatcherEvent]:
        """A paged list, fed to the machine part by part; ``self._next`` is set to the watch
        that follows it (or to a retry)."""
        step = self._machine.step
        stats = self.stats
        while True:
            stats.list_requests += 1
            async for part in self._page(request.limit, request.continue_, request.resource_version):
                if self._return_guard is not None:
                    self._disarm_return_guard()  # the server answered
                self._state, emitted, _ = step(self._state, part)
                for out in emitted:
                    yield out
            self._state, emitted, after = step(self._state, ResponseEnd())
            for out in emitted:
                stats.lists_completed += 1  # the list's InitDone
                yield out
            if type(after) is ListPage:
                request = after
                continue
            self._next = after
            return

    async def _page(
        self, limit: int | None, token: str | None, rv: str | None
    ) -> AsyncIterator[ObjectList[dict[str, object]]]:
        """One page: in parts as it arrives from a source that can (the informer's cache fills
        while the rest is on the wire; the objects of a 100,000-object list arrive over ~0.5 s),
        else in one piece."""
        source = self.source
        if isinstance(source, StreamingListerWatcher):
            async for part in source.list_stream(limit=limit, continue_=token, resource_version=rv):
                yield part
        else:
            yield await source.list(limit=limit, continue_=token, resource_version=rv)

    # -- recovery ---------------------------------------------------------------------------------

    async def _retry(self, retry: Retry) -> None:
        err = retry.error
        self.last_error = err
        self.stats.errors += 1
        if retry.relist:
            log.info("%s: %s; relisting", self.description, err)
            if retry.backoff:
                await self._sleep(self._backoff.next_delay(), use_probe=False)
            return
        if not retry.backoff:
            log.info("%s: %s; retrying", self.description, _describe(err))
            return
        delay = max(self._backoff.next_delay(), retry.min_delay)
        level = logging.WARNING if _expected(err) else logging.ERROR
        log.log(
            level,
            "%s: %s; retrying in %.1f s",
            self.description,
            _describe(err),
            delay,
            exc_info=level >= logging.ERROR,
        )
        await self._sleep(delay, use_probe=retry.use_probe)

    async def _sleep(self, delay: float, *, use_probe: bool) -> None:
        probe = self.source.probe
        if use_probe and probe is not None and self.config.server_probe:
            if await probe.wait(delay):
                self.stats.probe_releases += 1
                # The delays grew while the server was down; it is back, so a failure while it
                # warms up (a 503 before its paths are installed) waits 0.8 s, not that growth.
                self._backoff.reset()
                log.info("%s: the API server is back; retrying now", self.description)
        else:
            await asyncio.sleep(delay)


def _expected(err: Exception) -> bool:
    return isinstance(err, (ApiConnectionError, ApiError, Error))


def _describe(err: Exception) -> str:
    text = str(err)
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def watcher(
    client: Client,
    resource: ResourceLike,
    *,
    namespace: str | None = None,
    label_selector: LabelSelectorLike | None = None,
    field_selector: FieldSelectorLike | None = None,
    metadata_only: bool = False,
    config: Config | None = None,
    probe: ServerProbe | None = None,
) -> Watcher:
    """Watch ``resource`` (all namespaces unless ``namespace``) forever; see the module docs.

    ``resource`` is anything the client accepts: an ApiResource, a GVK, a model class or a name.
    ``probe``: the API server's readiness probe, to share with its other watchers (default: one of
    the watcher's own).
    """
    source = ListWatch(
        client,
        resource,
        namespace=namespace,
        label_selector=label_selector,
        field_selector=field_selector,
        metadata_only=metadata_only,
        probe=probe,
    )
    return Watcher(source, config)
