"""watcher: list and watch one collection forever, as a stream of events a cache can apply.

``async for event in watcher(client, "configmaps", namespace="x"):`` yields

- :class:`Init`, then :class:`InitApply` for every object that exists, then
  :class:`InitDone` with the list's resourceVersion: a complete, consistent snapshot. A consumer
  that keeps state buffers between ``Init`` and ``InitDone`` and then swaps atomically; objects it
  held that are not in the snapshot were deleted while the watcher was not looking;
- :class:`Apply` (an object was added or modified) and :class:`Delete` as they happen;
- a new ``Init`` ... ``InitDone`` whenever the watcher had to relist (410 Gone / too large
  resourceVersion).

It never raises (except on cancellation): every failure is logged and retried. The state
machine, with the values of client-go's reflector (k8s.io/client-go/tools/cache/reflector.go):

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
from typing import Any

from kubeop.cache.backoff import Backoff, BackoffConfig
from kubeop.cache.listwatch import ListerWatcher, ListWatch, StreamingListerWatcher
from kubeop.cache.probe import ReturnGuard, ServerProbe
from kubeop.cache.stall import StallGuard
from kubeop.cache.transform import Transform
from kubeop.client.client import Client, ObjectList, ResourceLike
from kubeop.client.transport import ApiConnectionError
from kubeop.client.unavailable import server_unavailable
from kubeop.core.errors import ApiError, Gone, TooManyRequests, is_resource_version_too_large
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
# Longest wait a 429 may ask of a watch (client-go caps its own backoff at about a minute).
_MAX_RETRY_AFTER = 60.0

Obj = dict[str, Any]

# Answers that mean "this server does not understand a streaming list request" (an old server,
# or the WatchList feature switched off): fall back to paged lists for good.
_STREAMING_REJECTED = frozenset({400, 405, 406, 415, 422, 501})


# -- events ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class Init:
    """A (re)list starts: the ``InitApply`` events up to ``InitDone`` form the complete state."""


@dataclass(slots=True)
class InitApply:
    """An object of the (re)list in progress."""

    object: Obj


@dataclass(slots=True)
class InitDone:
    """The (re)list is complete; ``resource_version`` is the snapshot's."""

    resource_version: str


@dataclass(slots=True)
class Apply:
    """An object was added (``added=True``: a watch ADDED event) or modified."""

    object: Obj
    added: bool = False


@dataclass(slots=True)
class Delete:
    """An object was deleted; ``object`` is its last state."""

    object: Obj


#: What a :class:`Watcher` yields (``kubeop.cache.WatcherEvent``; not a Kubernetes Event, which is
#: ``kubeop.kinds.Event``).
WatcherEvent = Init | InitApply | InitDone | Apply | Delete


# -- configuration, errors, statistics ------------------------------------------------------------


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


class Error(Exception):
    """Failures the watcher detects itself (all are retried; seen in logs and ``last_error``)."""


class WatchStalled(Error, ApiConnectionError):
    """No event and no bookmark for ``stall_timeout`` seconds: the connection is presumed dead."""


class VeryShortWatch(Error, ApiConnectionError):
    """The server closed a watch within a second, without sending anything."""


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
    """The list/watch state machine over a :class:`~kubeop.cache.listwatch.ListerWatcher`.

    Iterate it (``async for event in w``) from one task at a time. The state (resume point,
    backoff) lives on the object, so iterating again after an interruption resumes: with a
    relist if the previous iteration stopped in the middle of one. ``resource_version`` is the
    last version seen (client-go's ``LastSyncResourceVersion``).
    """

    def __init__(
        self, source: ListerWatcher, config: Config | None = None, *, rng: random.Random | None = None
    ) -> None:
        self.source = source
        self.config = config if config is not None else Config()
        self.resource_version = ""
        self.last_error: BaseException | None = None
        self.stats = WatcherStats()
        self._rng = rng or random.Random()
        self._backoff = Backoff(self.config.backoff, self._rng)
        self._streaming = self.config.streaming_list
        self._need_list = True
        # The version to resume from is gone (410 during a list, or "too large"): the next list
        # must be a consistent read at the latest version ("") instead of "not older than".
        self._rv_unavailable = False
        self._failures = 0  # consecutive failures without progress
        self._gone_streak = 0  # consecutive relists forced by 410 without a watch event between
        self._stream_events = 0
        self._return_guard: ReturnGuard | None = None

    @property
    def description(self) -> str:
        return self.source.description

    def __aiter__(self) -> AsyncIterator[WatcherEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[WatcherEvent]:
        while True:
            streaming = False
            self._arm_return_guard()
            try:
                if self._need_list and self._streaming is not False:
                    streaming = True
                    rv = "" if self._rv_unavailable else self.resource_version
                    stream = await self._open_watch(rv, send_initial_events=True)
                    async for event in self._consume(stream, initial=True):
                        yield event
                elif self._need_list:
                    async for event in self._paged_list():
                        yield event
                    continue
                else:
                    stream = await self._open_watch(self.resource_version)
                    async for event in self._consume(stream, initial=False):
                        yield event
            except asyncio.CancelledError:
                if self._return_guard is None or not self._return_guard.fired():
                    raise
                # The probe saw the server come back while this attempt's request still sat in
                # the transport's retry pauses: send it again now.
                self.stats.probe_releases += 1
                self._backoff.reset()
                log.info("%s: the API server is back; retrying now", self.description)
                continue
            except Exception as err:
                self._disarm_return_guard()  # before any wait below: the guard cancels this task
                if streaming and self._streaming is None and _rejects_streaming(err, self._stream_events):
                    log.info(
                        "%s: the server does not support streaming lists (%s); using paged lists",
                        self.description,
                        err,
                    )
                    self._streaming = False
                    continue
                await self._recover(err)
            finally:
                self._disarm_return_guard()

    def _arm_return_guard(self) -> None:
        """While recovering from an unavailable server, let the probe cut the next request short."""
        probe = self.source.probe
        if (
            self._failures
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

    # -- phases -----------------------------------------------------------------------------------

    async def _open_watch(self, rv: str, *, send_initial_events: bool = False) -> AsyncIterator[Any]:
        cfg = self.config
        timeout = int(
            cfg.min_watch_timeout + self._rng.random() * (cfg.max_watch_timeout - cfg.min_watch_timeout)
        )
        self.stats.watch_requests += 1
        self._stream_events = 0
        return await self.source.watch(
            resource_version=rv or None,
            timeout_seconds=timeout,
            send_initial_events=send_initial_events,
            allow_bookmarks=cfg.bookmarks or send_initial_events,
        )

    async def _paged_list(self) -> AsyncIterator[WatcherEvent]:
        # client-go's relistResourceVersion: "" after the version became unavailable (a
        # consistent read), "0" the first time (any version: served from the watch cache), and
        # otherwise "not older than what we saw". Only "" and "0" are paged: a list at a specific
        # version without a limit is served from the watch cache instead of etcd.
        if self._rv_unavailable or (self.config.consistent_list and not self.resource_version):
            rv = ""
        else:
            rv = self.resource_version or "0"
        limit = self.config.page_size if rv in ("", "0") else None
        transform = self.config.transform
        token: str | None = None
        snapshot_rv = ""
        first = first_page = True
        while True:
            self.stats.list_requests += 1
            started = False
            async for page in self._page(limit, token, None if token or rv == "" else rv):
                if not started:
                    started = True
                    self._disarm_return_guard()
                    self._failures = 0
                if first:
                    first = False
                    yield Init()
                if first_page:
                    # A server may write the list's metadata after the items (custom resources
                    # come with sorted keys): the last part of the page has it then.
                    snapshot_rv = page.resource_version or snapshot_rv
                for obj in page.items:
                    yield InitApply(transform(obj) if transform is not None else obj)
                token = page.continue_
            first_page = False
            if not token:
                break
        if not snapshot_rv:
            raise Error(f"{self.description}: the list has no resourceVersion; cannot watch from it")
        self._list_done(snapshot_rv)
        yield InitDone(snapshot_rv)

    async def _page(
        self, limit: int | None, token: str | None, rv: str | None
    ) -> AsyncIterator[ObjectList[Obj]]:
        """One page: in parts as it arrives from a source that can (the informer's cache fills
        while the rest is on the wire; the objects of a 100,000-object list arrive over ~0.5 s),
        else in one piece."""
        source = self.source
        if isinstance(source, StreamingListerWatcher):
            async for part in source.list_stream(limit=limit, continue_=token, resource_version=rv):
                yield part
        else:
            yield await source.list(limit=limit, continue_=token, resource_version=rv)

    def _list_done(self, rv: str) -> None:
        self.resource_version = rv
        self._need_list = False
        self._rv_unavailable = False
        self._failures = 0
        self.stats.lists_completed += 1

    async def _consume(self, stream: AsyncIterator[Any], *, initial: bool) -> AsyncIterator[WatcherEvent]:
        """Events of one watch stream; ``initial``: it starts with a streaming list.

        This is the hot path of every sync (one pass per object), hence the locals.
        """
        transform = self.config.transform
        monotonic = time.monotonic  # the event loop's clock, minus a Python-level call
        guard = StallGuard(asyncio.get_running_loop(), self.config.stall_timeout, asyncio.current_task())
        guard.armed = self.stats.bookmarks > 0
        started = monotonic()
        count = 0
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
                        self.stats.stalls += 1
                        raise WatchStalled(
                            f"{self.description}: no event or bookmark for "
                            f"{self.config.stall_timeout:g} s; restarting the watch"
                        ) from None
                    raise
                guard.waiting_since = None
                if not count:
                    self._stream_events = 1
                    self._disarm_return_guard()
                    self._failures = 0
                    if initial:
                        yield Init()
                count += 1
                etype, obj = event
                if etype == "BOOKMARK":
                    self.stats.bookmarks += 1
                    guard.armed = True
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or ""
                    if not initial:
                        if rv:
                            self.resource_version = rv
                    elif event.is_initial_events_end:
                        if not rv:
                            raise Error(
                                f"{self.description}: initial-events-end bookmark without a resourceVersion"
                            )
                        initial = False
                        self._list_done(rv)
                        yield InitDone(rv)
                    continue
                if transform is not None:
                    obj = transform(obj)
                if initial:
                    if etype != "DELETED":  # impossible per the API docs; never part of a snapshot
                        yield InitApply(obj)
                    continue
                self.resource_version = obj["metadata"]["resourceVersion"]
                self._gone_streak = 0
                if etype == "MODIFIED":
                    yield Apply(obj)
                elif etype == "ADDED":
                    yield Apply(obj, added=True)
                elif etype == "DELETED":
                    yield Delete(obj)
                else:
                    log.warning("%s: ignoring watch event of unknown type %r", self.description, etype)
        finally:
            guard.stop()
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        if count == 0 and monotonic() - started < 1.0:
            raise VeryShortWatch(f"{self.description}: watch closed within 1 s without any event")

    # -- recovery ---------------------------------------------------------------------------------

    async def _recover(self, err: Exception) -> None:
        self.last_error = err
        self.stats.errors += 1
        if isinstance(err, Gone) or (isinstance(err, ApiError) and is_resource_version_too_large(err)):
            # The resume point is gone from the server's history (compaction, an apiserver restart
            # with a fresh watch cache): relist. After a 410 from a watch, "not older than the
            # last version" may still be listable from the watch cache (client-go does the same);
            # after a 410 from a list, or a "too large" version, only a consistent read works.
            if self._need_list or not isinstance(err, Gone):
                self._rv_unavailable = True
            self._need_list = True
            self._gone_streak += 1
            log.info("%s: %s; relisting", self.description, err)
            if self._gone_streak == 1:
                return
            await self._sleep(err, self._backoff.next_delay(), use_probe=False)
            return
        self._failures += 1
        if self._failures == 1:
            # The first failure after progress is a stream that worked and broke (or a fresh
            # start): retry at once; the backoff is for requests that keep failing.
            log.info("%s: %s; retrying", self.description, _describe(err))
            return
        delay = self._backoff.next_delay()
        if isinstance(err, TooManyRequests) and err.retry_after:
            # The server's word, but bounded: a Retry-After of 1e300 must not park the watch forever.
            delay = max(delay, min(err.retry_after, _MAX_RETRY_AFTER))
        level = logging.WARNING if _expected(err) else logging.ERROR
        log.log(
            level,
            "%s: %s; retrying in %.1f s",
            self.description,
            _describe(err),
            delay,
            exc_info=level >= logging.ERROR,
        )
        await self._sleep(err, delay, use_probe=server_unavailable(err))

    async def _sleep(self, err: Exception, delay: float, *, use_probe: bool) -> None:
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


def _rejects_streaming(err: Exception, events_seen: int) -> bool:
    return events_seen == 0 and isinstance(err, ApiError) and err.code in _STREAMING_REJECTED


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
