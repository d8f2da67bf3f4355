"""The watcher's decisions as a pure state machine: ``step(state, event) -> (state, emitted, request)``.

:class:`~kubeop.cache.watcher.Watcher` is a thin driver around this module: it sends the requests,
sleeps, keeps the clock and the timers (stall detection, the probe's return guard), counts and logs;
everything it decides (what to ask the server next, which events a response makes, how a failure is
recovered from) is decided here, without I/O, a clock or randomness, so each rule is a row of a
table in the tests (kube-rs' ``watcher`` ``step`` is the model, without its I/O).

A state is one of:

- :class:`Idle`: no request outstanding; the next one is a list (``need_list``) or a watch;
- :class:`Paging`: a paged list is being read;
- :class:`Streaming`: a watch stream is being read (``initial``: it begins with a streaming list,
  the snapshot ending at the bookmark annotated ``k8s.io/initial-events-end``).

Every state carries the resume point (``resource_version``) and a :class:`Progress` (the list
mode, whether the resume point is gone, and the failure streaks). The driver feeds:

- the parts of a page (:class:`~kubeop.client.ObjectList`) and the events of a stream
  (:class:`~kubeop.client.WatchEvent`), as they arrive;
- :class:`ResponseEnd` when a page or a stream ended normally (with its duration);
- :class:`Failed` when a request failed (the driver's stall detection included);
- :data:`RESUME` to send the next request: at the start, after a :class:`Retry` (and its wait),
  and when a request is sent again (an interrupted iteration, the probe's return guard).

A step returns the new state, the :data:`~kubeop.cache.watcher.WatcherEvent` s to yield (in
order) and, when the current response is finished with, the next request: :class:`OpenWatch`,
:class:`ListPage`, :class:`Retry` (count, log, maybe wait, then :data:`RESUME`) or
:class:`PagedFallback` (the server rejects streaming lists: log, then :data:`RESUME`). A request
other than None abandons the response being read.

``Config.transform`` is applied here, to every object emitted; it must be a function of the
object alone (as transforms are).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

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
)
from kubeop.client.client import ObjectList
from kubeop.client.unavailable import server_unavailable
from kubeop.client.watch import WatchEvent
from kubeop.core.errors import ApiError, Gone, TooManyRequests, is_resource_version_too_large

__all__ = [
    "RESUME",
    "Failed",
    "Idle",
    "ListPage",
    "Machine",
    "OpenWatch",
    "PagedFallback",
    "Paging",
    "Progress",
    "Request",
    "ResponseEnd",
    "Resume",
    "Retry",
    "State",
    "Streaming",
]

Obj = dict[str, Any]

#: Longest wait a 429 may ask of a watch (client-go caps its own backoff at about a minute).
MAX_RETRY_AFTER = 60.0
#: A watch that ends within this many seconds without any event is a failure (client-go's).
VERY_SHORT_WATCH = 1.0
#: Answers that mean "this server does not understand a streaming list request" (an old server,
#: or the WatchList feature switched off): fall back to paged lists for good.
STREAMING_REJECTED = frozenset({400, 405, 406, 415, 422, 501})


# -- states ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Progress:
    """What outlives a request: how the next list is made, and the failure streaks."""

    #: True: stream the initial list; False: page it; None: stream, fall back to pages if rejected.
    streaming: bool | None = None
    #: The resume point is gone (410 during a list, or "too large"): the next list must be a
    #: consistent read at the latest version ("") instead of "not older than".
    rv_unavailable: bool = False
    #: Consecutive failures without progress (an answer).
    failures: int = 0
    #: Consecutive relists forced by 410 without a watch event between.
    gone_streak: int = 0


@dataclass(frozen=True, slots=True)
class Idle:
    """No request outstanding: the next is a list (``need_list``) or a watch from the resume point."""

    progress: Progress
    resource_version: str
    need_list: bool


@dataclass(frozen=True, slots=True)
class Paging:
    """A paged list in progress (``need_list`` until it completes)."""

    progress: Progress
    resource_version: str  # the watcher's resume point, replaced when the list completes
    list_rv: str  # the first page's resourceVersion parameter ("" is a consistent read)
    limit: int | None
    token: str | None  # the continue token of the last part read (None: the first page)
    snapshot_rv: str  # the list's resourceVersion, from the first page
    begun: bool  # Init was emitted
    answered: bool  # the current page request has answered
    first_page: bool

    @property
    def need_list(self) -> bool:
        return True


@dataclass(slots=True)
class Streaming:
    """A watch stream is being read; ``initial``: its events up to the end bookmark are a list.

    A value like the other states, never changed once made; not frozen only because a frozen
    dataclass takes 1 µs to build (five times this one) and one is built per watch event.
    """

    progress: Progress
    resource_version: str
    initial: bool
    seen: bool  # an event (a bookmark included) arrived on this stream

    @property
    def need_list(self) -> bool:
        return self.initial


State = Idle | Paging | Streaming


# -- events ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResponseEnd:
    """The page (all its parts) or the stream ended normally, ``seconds`` after it was sent."""

    seconds: float = 0.0


@dataclass(frozen=True, slots=True)
class Failed:
    """The request failed (or the driver abandoned it: a stall)."""

    error: Exception


@dataclass(frozen=True, slots=True)
class Resume:
    """Send the next request now."""


RESUME: Final = Resume()

Event = WatchEvent[Obj] | ObjectList[Obj] | ResponseEnd | Failed | Resume


# -- requests -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OpenWatch:
    """Open a watch from ``resource_version`` ("": the latest); ``initial``: a streaming list
    (``sendInitialEvents=true``)."""

    resource_version: str
    initial: bool


@dataclass(frozen=True, slots=True)
class ListPage:
    """Ask for one page."""

    limit: int | None
    continue_: str | None
    resource_version: str | None


@dataclass(frozen=True, slots=True)
class Retry:
    """The request failed: count and log ``error``, wait if ``backoff``, then :data:`RESUME`.

    ``relist``: the resume point is gone (410 / too large); the next request lists.
    ``backoff``: wait the backoff's next delay, at least ``min_delay`` (the server's Retry-After);
    else retry at once. ``use_probe``: the server is unavailable, so the readiness probe may end
    the wait (and cut the next request short) when it sees the server come back.
    """

    error: Exception
    relist: bool = False
    backoff: bool = False
    min_delay: float = 0.0
    use_probe: bool = False


@dataclass(frozen=True, slots=True)
class PagedFallback:
    """The server rejected a streaming list (``error``): log it, then :data:`RESUME` (pages)."""

    error: Exception


Request = OpenWatch | ListPage | Retry | PagedFallback

Emitted = tuple[WatcherEvent, ...]
Step = tuple[State, Emitted, Request | None]

_NOTHING: Emitted = ()


# -- the machine ----------------------------------------------------------------------------------


class Machine:
    """The transition function of one watcher; ``describe()`` names what is watched in the
    errors it makes (the source's description, which improves once its resource is resolved), the
    rest is the watcher's ``Config``'s. Immutable; :meth:`step` is pure."""

    __slots__ = ("_consistent_list", "_describe", "_page_size", "_transform")

    def __init__(
        self,
        describe: Callable[[], str],
        *,
        transform: Transform | None = None,
        page_size: int | None = 500,
        consistent_list: bool = False,
    ) -> None:
        self._transform = transform
        self._page_size = page_size
        self._consistent_list = consistent_list
        self._describe = describe

    @property
    def description(self) -> str:
        return self._describe()

    def initial(self, streaming: bool | None) -> Idle:
        """The state before the first request (``streaming``: ``Config.streaming_list``)."""
        return Idle(Progress(streaming=streaming), "", True)

    def step(self, state: State, event: Event) -> Step:
        """One transition; see the module docs."""
        if type(state) is Streaming:
            if isinstance(event, tuple):  # a WatchEvent
                etype, obj = event
                progress = state.progress
                if not state.seen or state.initial or etype == "BOOKMARK" or progress.gone_streak:
                    settled = self._watch_event(state, event)
                    if not isinstance(settled, Progress):
                        return settled
                    progress = settled
                # A change on a watch past its initial list (the hot path: one pass per change,
                # hence inline): the resume point moves to the object's.
                transform = self._transform
                if transform is not None:
                    obj = transform(obj)
                after = Streaming(progress, obj["metadata"]["resourceVersion"], False, True)
                if etype == "MODIFIED":
                    return after, (Apply(obj),), None
                if etype == "ADDED":
                    return after, (Apply(obj, added=True),), None
                if etype == "DELETED":
                    return after, (Delete(obj),), None
                return after, _NOTHING, None  # an unknown type: the driver logs it
        elif type(state) is Paging and isinstance(event, ObjectList):
            return self._page_part(state, event)
        if type(event) is ResponseEnd:
            return self._response_end(state, event.seconds)
        if type(event) is Failed:
            return self.fail(state, event.error)
        if type(event) is Resume:
            return self.resume(state)
        raise TypeError(f"{self.description}: event {event!r} cannot happen in state {state!r}")

    # -- requests ---------------------------------------------------------------------------------

    def resume(self, state: State) -> Step:
        """The next request from ``state``: a list if one is needed (an interrupted one starts
        over), else a watch from the resume point."""
        progress, rv = state.progress, state.resource_version
        if not state.need_list:
            return Streaming(progress, rv, False, False), _NOTHING, OpenWatch(rv, False)
        if progress.streaming is not False:
            start = "" if progress.rv_unavailable else rv
            return Streaming(progress, rv, True, False), _NOTHING, OpenWatch(start, True)
        # client-go's relistResourceVersion: "" after the version became unavailable (a
        # consistent read), "0" the first time (any version: served from the watch cache), and
        # otherwise "not older than what we saw". Only "" and "0" are paged: a list at a specific
        # version without a limit is served from the watch cache instead of etcd.
        consistent = progress.rv_unavailable or (self._consistent_list and not rv)
        list_rv = "" if consistent else rv or "0"
        limit = self._page_size if list_rv in ("", "0") else None
        paging = Paging(progress, rv, list_rv, limit, None, "", False, False, True)
        return paging, _NOTHING, ListPage(limit, None, list_rv or None)

    # -- paged lists ------------------------------------------------------------------------------

    def _page_part(self, state: Paging, page: ObjectList[Obj]) -> Step:
        progress = state.progress
        if not state.answered and progress.failures:
            progress = dataclasses.replace(progress, failures=0)
        transform = self._transform
        items = page.items
        applied = [InitApply(transform(obj) if transform is not None else obj) for obj in items]
        emitted: Emitted = (Init(), *applied) if not state.begun else tuple(applied)
        # A server may write the list's metadata after the items (custom resources come with
        # sorted keys): the last part of the page has it then.
        snapshot_rv = (page.resource_version or state.snapshot_rv) if state.first_page else state.snapshot_rv
        paging = Paging(
            progress,
            state.resource_version,
            state.list_rv,
            state.limit,
            page.continue_,
            snapshot_rv,
            True,
            True,
            state.first_page,
        )
        return paging, emitted, None

    def _page_end(self, state: Paging) -> Step:
        if state.token:
            paging = Paging(
                state.progress,
                state.resource_version,
                state.list_rv,
                state.limit,
                state.token,
                state.snapshot_rv,
                state.begun,
                False,
                False,
            )
            return paging, _NOTHING, ListPage(state.limit, state.token, None)
        rv = state.snapshot_rv
        if not rv:
            error = Error(f"{self.description}: the list has no resourceVersion; cannot watch from it")
            return self.fail(state, error)
        progress = dataclasses.replace(state.progress, rv_unavailable=False, failures=0)
        return Streaming(progress, rv, False, False), (InitDone(rv),), OpenWatch(rv, False)

    # -- watch streams ----------------------------------------------------------------------------

    def _watch_event(self, state: Streaming, event: WatchEvent[Obj]) -> Step | Progress:
        """A stream's first event, a bookmark, an event of a streaming list, or the first change
        after a relist; for a change, the progress to make it with (see :meth:`step`)."""
        etype, obj = event
        progress = state.progress
        first: Emitted = _NOTHING
        if not state.seen:
            if progress.failures:
                progress = dataclasses.replace(progress, failures=0)
            if state.initial:
                first = (Init(),)
        if etype == "BOOKMARK":
            rv = (obj.get("metadata") or {}).get("resourceVersion") or ""
            if not state.initial:
                return Streaming(progress, rv or state.resource_version, False, True), first, None
            if not event.is_initial_events_end:
                return Streaming(progress, state.resource_version, True, True), first, None
            if not rv:
                error = Error(f"{self.description}: initial-events-end bookmark without a resourceVersion")
                return self.fail(Streaming(progress, state.resource_version, True, True), error)
            done = dataclasses.replace(progress, rv_unavailable=False, failures=0)
            return Streaming(done, rv, False, True), (*first, InitDone(rv)), None
        if state.initial:
            if etype == "DELETED":  # impossible per the API docs; never part of a snapshot
                return Streaming(progress, state.resource_version, True, True), first, None
            transform = self._transform
            applied = InitApply(transform(obj) if transform is not None else obj)
            return Streaming(progress, state.resource_version, True, True), (*first, applied), None
        if progress.gone_streak:
            progress = dataclasses.replace(progress, gone_streak=0)
        return progress

    # -- ends and failures ------------------------------------------------------------------------

    def _response_end(self, state: State, seconds: float) -> Step:
        if type(state) is Paging:
            return self._page_end(state)
        if type(state) is Streaming and not state.seen and seconds < VERY_SHORT_WATCH:
            return self.fail(
                state, VeryShortWatch(f"{self.description}: watch closed within 1 s without any event")
            )
        # A stream that ended normally is re-opened from where it stopped (an initial one that
        # ended before its end bookmark starts the list over).
        return self.resume(state)

    def fail(self, state: State, error: Exception) -> Step:
        """The transition for a failed request (or a response the machine rejects)."""
        progress, rv, need_list = state.progress, state.resource_version, state.need_list
        if (
            type(state) is Streaming
            and state.initial
            and not state.seen
            and progress.streaming is None
            and isinstance(error, ApiError)
            and error.code in STREAMING_REJECTED
        ):
            paged = dataclasses.replace(progress, streaming=False)
            return Idle(paged, rv, True), _NOTHING, PagedFallback(error)
        if isinstance(error, Gone) or (isinstance(error, ApiError) and is_resource_version_too_large(error)):
            # The resume point is gone from the server's history (compaction, an apiserver restart
            # with a fresh watch cache): relist. After a 410 from a watch, "not older than the
            # last version" may still be listable from the watch cache (client-go does the same);
            # after a 410 from a list, or a "too large" version, only a consistent read works.
            unavailable = progress.rv_unavailable or need_list or not isinstance(error, Gone)
            streak = progress.gone_streak + 1
            gone = dataclasses.replace(progress, rv_unavailable=unavailable, gone_streak=streak)
            return Idle(gone, rv, True), _NOTHING, Retry(error, relist=True, backoff=streak > 1)
        failures = progress.failures + 1
        failing = dataclasses.replace(progress, failures=failures)
        if failures == 1:
            # The first failure after progress is a stream that worked and broke (or a fresh
            # start): retry at once; the backoff is for requests that keep failing.
            return Idle(failing, rv, need_list), _NOTHING, Retry(error)
        min_delay = 0.0
        if isinstance(error, TooManyRequests) and error.retry_after:
            # The server's word, but bounded: a Retry-After of 1e300 must not park the watch forever.
            min_delay = min(error.retry_after, MAX_RETRY_AFTER)
        retry = Retry(error, backoff=True, min_delay=min_delay, use_probe=server_unavailable(error))
        return Idle(failing, rv, need_list), _NOTHING, retry


def with_resource_version(state: State, resource_version: str) -> State:
    """``state`` with another resume point (for the driver's ``resource_version`` setter)."""
    if type(state) is Idle:
        return Idle(state.progress, resource_version, state.need_list)
    if type(state) is Streaming:
        return Streaming(state.progress, resource_version, state.initial, state.seen)
    assert type(state) is Paging
    return Paging(
        state.progress,
        resource_version,
        state.list_rv,
        state.limit,
        state.token,
        state.snapshot_rv,
        state.begun,
        state.answered,
        state.first_page,
    )
