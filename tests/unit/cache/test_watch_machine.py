"""The watcher's transitions as tables: (state, event) -> (state, emitted, request); no clock, no server."""

from __future__ import annotations

from typing import Any

import pytest

from kubeop.cache.watch_events import (
    Apply,
    Delete,
    Error,
    Init,
    InitApply,
    InitDone,
    VeryShortWatch,
    WatchStalled,
)
from kubeop.cache.watch_machine import (
    RESUME,
    Event,
    Failed,
    Idle,
    ListPage,
    Machine,
    OpenWatch,
    PagedFallback,
    Paging,
    Progress,
    ResponseEnd,
    Retry,
    State,
    Step,
    Streaming,
    with_resource_version,
)
from kubeop.client import ApiConnectionError
from kubeop.client.client import ObjectList
from kubeop.client.watch import WatchEvent
from kubeop.core.errors import (
    ApiError,
    Expired,
    Forbidden,
    Gone,
    InternalError,
    ServiceUnavailable,
    TooManyRequests,
)

from .fakes import too_large_rv_error

MACHINE = Machine(lambda: "configmaps")
P = Progress()  # streaming lists, nothing failed
PAGED = Progress(streaming=False)


def obj(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


def event(etype: str, name: str = "a", rv: str = "10") -> WatchEvent[dict[str, Any]]:
    return WatchEvent(etype, obj(name, rv))


def bookmark(rv: str, *, end: bool = False) -> WatchEvent[dict[str, Any]]:
    meta: dict[str, Any] = {"resourceVersion": rv}
    if end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return WatchEvent("BOOKMARK", {"metadata": meta})


def page(*names: str, rv: str = "", token: str | None = None) -> ObjectList[dict[str, Any]]:
    return ObjectList([obj(n, "1") for n in names], rv, token)


def paging(progress: Progress = PAGED, **fields: Any) -> Paging:
    values: dict[str, Any] = {
        "progress": progress,
        "resource_version": "",
        "list_rv": "0",
        "limit": 500,
        "token": None,
        "snapshot_rv": "",
        "begun": False,
        "answered": False,
        "first_page": True,
    }
    values.update(fields)
    return Paging(**values)


def run(state: State, event: Event, machine: Machine = MACHINE) -> Step:
    return machine.step(state, event)


# -- which request comes next --------------------------------------------------------------------

RESUMES: list[tuple[str, State, Machine, State, Any]] = [
    ("start: a streaming list from any version", MACHINE.initial(None), MACHINE,
     Streaming(P, "", True, False), OpenWatch("", True)),
    ("relist, streaming: not older than the resume point", Idle(P, "7", True), MACHINE,
     Streaming(P, "7", True, False), OpenWatch("7", True)),
    ("relist after the version became unavailable: the latest",
     Idle(Progress(rv_unavailable=True), "7", True), MACHINE,
     Streaming(Progress(rv_unavailable=True), "7", True, False), OpenWatch("", True)),
    ("start, paged: any version (watch cache), in pages", Idle(PAGED, "", True), MACHINE,
     paging(), ListPage(500, None, "0")),
    ("start, paged, consistent: the latest, in pages", Idle(PAGED, "", True),
     Machine(lambda: "x", consistent_list=True), paging(list_rv=""), ListPage(500, None, None)),
    ("relist, paged: not older than the resume point, one piece", Idle(PAGED, "7", True), MACHINE,
     paging(resource_version="7", list_rv="7", limit=None), ListPage(None, None, "7")),
    ("relist, paged, version unavailable: the latest, in pages",
     Idle(Progress(streaming=False, rv_unavailable=True), "7", True), MACHINE,
     paging(Progress(streaming=False, rv_unavailable=True), resource_version="7", list_rv=""),
     ListPage(500, None, None)),
    ("no page size: one piece", Idle(PAGED, "", True), Machine(lambda: "x", page_size=None),
     paging(limit=None), ListPage(None, None, "0")),
    ("listed: watch from the resume point", Idle(P, "7", False), MACHINE,
     Streaming(P, "7", False, False), OpenWatch("7", False)),
    ("an interrupted paged list starts over", paging(begun=True, answered=True, token="t"), MACHINE,
     paging(), ListPage(500, None, "0")),
    ("an interrupted streaming list starts over", Streaming(P, "3", True, True), MACHINE,
     Streaming(P, "3", True, False), OpenWatch("3", True)),
    ("an interrupted watch resumes", Streaming(P, "9", False, True), MACHINE,
     Streaming(P, "9", False, False), OpenWatch("9", False)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("state", "machine", "after", "request_"), [r[1:] for r in RESUMES], ids=[r[0] for r in RESUMES]
)
def test_resume(state: State, machine: Machine, after: State, request_: Any) -> None:
    assert run(state, RESUME, machine) == (after, (), request_)


# -- paged lists ----------------------------------------------------------------------------------

PAGES: list[tuple[str, State, Event, Step]] = [
    ("the first part: Init, its items, the snapshot's version",
     paging(Progress(streaming=False, failures=3)), page("a", "b", rv="5", token="t"),
     (paging(begun=True, answered=True, token="t", snapshot_rv="5"),
      (Init(), InitApply(obj("a", "1")), InitApply(obj("b", "1"))), None)),
    ("a later part of the first page: the version may come last",
     paging(begun=True, answered=True), page("c", rv="6"),
     (paging(begun=True, answered=True, snapshot_rv="6"), (InitApply(obj("c", "1")),), None)),
    ("a later page keeps the first page's version",
     paging(begun=True, answered=False, first_page=False, snapshot_rv="5", token="t"), page("d", rv="8"),
     (paging(begun=True, answered=True, first_page=False, snapshot_rv="5"),
      (InitApply(obj("d", "1")),), None)),
    ("a page ends with a continue token: ask for the next page",
     paging(begun=True, answered=True, snapshot_rv="5", token="t"), ResponseEnd(),
     (paging(begun=True, snapshot_rv="5", token="t", first_page=False), (), ListPage(500, "t", None))),
    ("the last page ends: InitDone, then watch from the snapshot",
     paging(Progress(streaming=False, rv_unavailable=True), begun=True, answered=True, snapshot_rv="5"),
     ResponseEnd(), (Streaming(PAGED, "5", False, False), (InitDone("5"),), OpenWatch("5", False))),
    ("an empty collection still makes Init and InitDone",
     paging(), page(rv="5"), (paging(begun=True, answered=True, snapshot_rv="5"), (Init(),), None)),
]  # fmt: skip


@pytest.mark.parametrize(("state", "event", "step"), [r[1:] for r in PAGES], ids=[r[0] for r in PAGES])
def test_paged_list(state: State, event: Event, step: Step) -> None:
    assert run(state, event) == step


def test_a_list_without_a_resource_version_is_a_failure() -> None:
    after, emitted, request = run(paging(begun=True, answered=True), ResponseEnd())
    assert after == Idle(Progress(streaming=False, failures=1), "", True) and emitted == ()
    assert isinstance(request, Retry) and isinstance(request.error, Error)
    assert "configmaps: the list has no resourceVersion" in str(request.error)


def test_the_transform_applies_to_every_object() -> None:
    machine = Machine(lambda: "x", transform=lambda o: {**o, "t": 1})
    _, emitted, _ = machine.step(paging(begun=True, answered=True), page("a"))
    assert emitted == (InitApply({**obj("a", "1"), "t": 1}),)
    _, emitted, _ = machine.step(Streaming(P, "1", True, True), event("ADDED", "b", "2"))
    assert emitted == (InitApply({**obj("b", "2"), "t": 1}),)
    _, emitted, _ = machine.step(Streaming(P, "1", False, True), event("MODIFIED", "c", "3"))
    assert emitted == (Apply({**obj("c", "3"), "t": 1}),)


# -- watch streams --------------------------------------------------------------------------------

STREAMS: list[tuple[str, State, Event, Step]] = [
    ("streaming list, first event: Init, the object; failures forgotten",
     Streaming(Progress(failures=2), "", True, False), event("ADDED", "a", "3"),
     (Streaming(P, "", True, True), (Init(), InitApply(obj("a", "3"))), None)),
    ("streaming list, later event", Streaming(P, "", True, True), event("ADDED", "b", "4"),
     (Streaming(P, "", True, True), (InitApply(obj("b", "4")),), None)),
    ("streaming list, a DELETED is never part of a snapshot", Streaming(P, "", True, True), event("DELETED"),
     (Streaming(P, "", True, True), (), None)),
    ("streaming list, a first bookmark that is not the end", Streaming(P, "", True, False), bookmark("4"),
     (Streaming(P, "", True, True), (Init(),), None)),
    ("streaming list, the end bookmark: InitDone at its version",
     Streaming(Progress(rv_unavailable=True), "", True, True), bookmark("9", end=True),
     (Streaming(P, "9", False, True), (InitDone("9"),), None)),
    ("an empty streaming list: Init and InitDone at once",
     Streaming(P, "", True, False), bookmark("9", end=True),
     (Streaming(P, "9", False, True), (Init(), InitDone("9")), None)),
    ("watch: MODIFIED", Streaming(P, "9", False, True), event("MODIFIED", "a", "10"),
     (Streaming(P, "10", False, True), (Apply(obj("a", "10")),), None)),
    ("watch: ADDED", Streaming(P, "9", False, True), event("ADDED", "a", "10"),
     (Streaming(P, "10", False, True), (Apply(obj("a", "10"), added=True),), None)),
    ("watch: DELETED", Streaming(P, "9", False, True), event("DELETED", "a", "10"),
     (Streaming(P, "10", False, True), (Delete(obj("a", "10")),), None)),
    ("watch: an unknown type moves the resume point, makes nothing", Streaming(P, "9", False, True),
     event("SURPRISE", "a", "10"), (Streaming(P, "10", False, True), (), None)),
    ("watch: a bookmark moves the resume point", Streaming(P, "9", False, True), bookmark("12"),
     (Streaming(P, "12", False, True), (), None)),
    ("watch: a bookmark without a version keeps it", Streaming(P, "9", False, True), bookmark(""),
     (Streaming(P, "9", False, True), (), None)),
    ("watch: the first event forgets failures", Streaming(Progress(failures=4), "9", False, False),
     bookmark("12"), (Streaming(P, "12", False, True), (), None)),
    ("watch: a change ends the streak of 410s", Streaming(Progress(gone_streak=2), "9", False, True),
     event("MODIFIED", "a", "10"), (Streaming(P, "10", False, True), (Apply(obj("a", "10")),), None)),
    ("a watch that ended normally is re-opened where it stopped", Streaming(P, "12", False, True),
     ResponseEnd(300.0), (Streaming(P, "12", False, False), (), OpenWatch("12", False))),
    ("a quiet watch that lasted is re-opened", Streaming(P, "12", False, False), ResponseEnd(1.0),
     (Streaming(P, "12", False, False), (), OpenWatch("12", False))),
    ("a streaming list that ended before its end starts over", Streaming(P, "", True, True), ResponseEnd(5.0),
     (Streaming(P, "", True, False), (), OpenWatch("", True))),
]  # fmt: skip


@pytest.mark.parametrize(("state", "event", "step"), [r[1:] for r in STREAMS], ids=[r[0] for r in STREAMS])
def test_watch_stream(state: State, event: Event, step: Step) -> None:
    assert run(state, event) == step


def test_an_end_bookmark_without_a_version_is_a_failure() -> None:
    after, emitted, request = run(Streaming(P, "", True, True), bookmark("", end=True))
    assert after == Idle(Progress(failures=1), "", True) and emitted == ()
    assert isinstance(request, Retry) and "initial-events-end bookmark without a resourceVersion" in str(
        request.error
    )


def test_a_very_short_watch_is_a_failure_of_an_unavailable_server() -> None:
    after, _, request = run(Streaming(Progress(failures=1), "12", False, False), ResponseEnd(0.2))
    assert after == Idle(Progress(failures=2), "12", False)
    assert isinstance(request, Retry) and isinstance(request.error, VeryShortWatch)
    assert request.backoff and request.use_probe and not request.relist


def test_an_event_that_cannot_happen_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="cannot happen"):
        run(Idle(P, "", True), page("a"))
    with pytest.raises(TypeError, match="cannot happen"):
        run(paging(), event("ADDED"))


# -- failures -------------------------------------------------------------------------------------

REJECTED = [400, 405, 406, 415, 422, 501]


@pytest.mark.parametrize("code", REJECTED)
def test_a_rejected_streaming_list_falls_back_to_pages_for_good(code: int) -> None:
    error = ApiError("no", code=code)
    after, emitted, request = run(Streaming(Progress(failures=1), "4", True, False), Failed(error))
    assert (after, emitted, request) == (
        Idle(Progress(streaming=False, failures=1), "4", True),
        (),
        PagedFallback(error),
    )
    assert run(after, RESUME)[2] == ListPage(None, None, "4")


@pytest.mark.parametrize(
    ("state", "error"),
    [
        (Streaming(Progress(streaming=True), "", True, False), ApiError("no", code=400)),  # forced on
        (Streaming(P, "", True, True), ApiError("no", code=400)),  # it answered: not a rejection
        (Streaming(P, "5", False, False), ApiError("no", code=400)),  # a watch, not a list
        (Streaming(P, "", True, False), ApiError("no", code=403)),  # other codes
    ],
)
def test_other_failures_of_a_streaming_list_are_retried(state: State, error: Exception) -> None:
    _, _, request = run(state, Failed(error))
    assert request == Retry(error)


FAILURES: list[tuple[str, State, Exception, State, Retry]] = [
    ("410 on a watch: relist at once, not older than the resume point",
     Streaming(P, "9", False, True), Gone("too old"),
     Idle(Progress(gone_streak=1), "9", True), Retry(Gone("too old"), relist=True)),
    ("a second 410 in a row: relist after the backoff, without the probe",
     Streaming(Progress(gone_streak=1), "9", True, False), Expired("too old"),
     Idle(Progress(rv_unavailable=True, gone_streak=2), "9", True),
     Retry(Expired("too old"), relist=True, backoff=True)),
    ("410 during a paged list: the next list is a consistent read",
     paging(resource_version="9", list_rv="9", limit=None), Gone("too old"),
     Idle(Progress(streaming=False, rv_unavailable=True, gone_streak=1), "9", True),
     Retry(Gone("too old"), relist=True)),
    ("the first failure after progress: retried at once", Streaming(P, "9", False, True),
     ApiConnectionError("reset"), Idle(Progress(failures=1), "9", False), Retry(ApiConnectionError("reset"))),
    ("a failure of a list keeps the list to do", paging(), InternalError("boom"),
     Idle(Progress(streaming=False, failures=1), "", True), Retry(InternalError("boom"))),
    ("again: backoff; the probe for an unreachable server", Idle(Progress(failures=1), "9", False),
     ApiConnectionError("refused"), Idle(Progress(failures=2), "9", False),
     Retry(ApiConnectionError("refused"), backoff=True, use_probe=True)),
    ("again: backoff; the probe for a 503", Idle(Progress(failures=1), "9", False), ServiceUnavailable("x"),
     Idle(Progress(failures=2), "9", False), Retry(ServiceUnavailable("x"), backoff=True, use_probe=True)),
    ("again: backoff; the probe for a stalled stream",
     Idle(Progress(failures=1), "9", False), WatchStalled("x"),
     Idle(Progress(failures=2), "9", False), Retry(WatchStalled("x"), backoff=True, use_probe=True)),
    ("again: backoff, no probe for a 500 (the server serves)", Idle(Progress(failures=1), "9", False),
     InternalError("x"), Idle(Progress(failures=2), "9", False), Retry(InternalError("x"), backoff=True)),
    ("again: backoff, no probe for a 403", Idle(Progress(failures=5), "9", False), Forbidden("no"),
     Idle(Progress(failures=6), "9", False), Retry(Forbidden("no"), backoff=True)),
]  # fmt: skip


def _same_retry(a: Any, b: Any) -> bool:
    """Retries compare their errors by class and text (exceptions compare by identity)."""
    if not (isinstance(a, Retry) and isinstance(b, Retry)):
        return bool(a == b)
    fields = ("relist", "backoff", "min_delay", "use_probe")
    return (type(a.error), str(a.error)) == (type(b.error), str(b.error)) and all(
        getattr(a, f) == getattr(b, f) for f in fields
    )


@pytest.mark.parametrize(
    ("state", "error", "after", "retry"), [r[1:] for r in FAILURES], ids=[r[0] for r in FAILURES]
)
def test_failure(state: State, error: Exception, after: State, retry: Retry) -> None:
    got_state, emitted, request = run(state, Failed(error))
    assert got_state == after and emitted == ()
    assert _same_retry(request, retry), request


def test_a_too_large_resource_version_relists_with_a_consistent_read() -> None:
    error = too_large_rv_error()
    after, _, request = run(Streaming(P, "999", False, False), Failed(error))
    assert after == Idle(Progress(rv_unavailable=True, gone_streak=1), "999", True)
    assert request == Retry(error, relist=True)
    assert run(after, RESUME)[2] == OpenWatch("", True)


@pytest.mark.parametrize(("retry_after", "min_delay"), [(5, 5.0), (1e300, 60.0), (None, 0.0)])
def test_too_many_requests_waits_what_the_server_asks_within_bounds(
    retry_after: float | None, min_delay: float
) -> None:
    details = {"retryAfterSeconds": retry_after} if retry_after is not None else {}
    error = TooManyRequests("slow down", details=details)
    _, _, request = run(Idle(Progress(failures=1), "9", False), Failed(error))
    assert request == Retry(error, backoff=True, min_delay=min_delay)


def test_a_whole_sync_then_an_outage_then_a_relist() -> None:
    """A run through the machine as the driver makes it: every request and every event."""
    m = MACHINE
    state, _, request = m.step(m.initial(None), RESUME)
    assert request == OpenWatch("", True)
    for ev in (event("ADDED", "a", "3"), event("ADDED", "b", "4"), bookmark("5", end=True)):
        state, emitted, request = m.step(state, ev)
        assert request is None
    assert emitted == (InitDone("5"),) and state.resource_version == "5"
    state, emitted, request = m.step(state, event("MODIFIED", "a", "6"))
    assert emitted == (Apply(obj("a", "6")),) and state.resource_version == "6"
    state, _, request = m.step(state, Failed(ApiConnectionError("reset")))
    assert isinstance(request, Retry) and not request.backoff
    state, _, request = m.step(state, RESUME)
    assert request == OpenWatch("6", False)
    state, _, request = m.step(state, Failed(ApiConnectionError("refused")))
    assert isinstance(request, Retry) and request.backoff and request.use_probe
    state, _, request = m.step(state, RESUME)
    state, _, request = m.step(state, Failed(Gone("compacted")))
    assert isinstance(request, Retry) and request.relist and not request.backoff
    state, _, request = m.step(state, RESUME)
    assert request == OpenWatch("6", True)  # a 410 from a watch: not older than what we saw
    state, emitted, _ = m.step(state, bookmark("20", end=True))
    # A list does not end the streak of 410s; the next change on the watch does.
    assert emitted == (Init(), InitDone("20")) and state == Streaming(
        Progress(gone_streak=1), "20", False, True
    )


@pytest.mark.parametrize(
    "state",
    [Idle(P, "1", True), paging(resource_version="1"), Streaming(P, "1", False, True)],
    ids=["idle", "paging", "streaming"],
)
def test_with_resource_version_changes_only_the_resume_point(state: State) -> None:
    moved = with_resource_version(state, "42")
    assert moved.resource_version == "42" and type(moved) is type(state)
    assert with_resource_version(moved, "1") == state
