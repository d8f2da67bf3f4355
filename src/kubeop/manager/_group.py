"""The runnable group (private): starts a Manager's runnables phase by phase and stops them in
reverse order (see :mod:`kubeop.manager.runnable` for the rules a runnable sees)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from kubeop.manager.leader import LeadershipLost
from kubeop.manager.runnable import Phase, Runnable, name_of

if TYPE_CHECKING:
    from kubeop.cluster import Cluster

log = logging.getLogger("kubeop.manager")

CANCEL_BOUND = 5.0
"""Seconds a runnable cancelled after its grace has to end before it is left behind."""

T = TypeVar("T")


@dataclass
class _Entry:
    runnable: Runnable
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    ready: asyncio.Future[Any] | None = None

    @property
    def name(self) -> str:
        return name_of(self.runnable)

    def failure(self) -> BaseException | None:
        for future in (self.task, self.ready):
            if future is not None and future.done() and not future.cancelled():
                exc = future.exception()
                if exc is not None:
                    return exc
        return None


def effective_phase(item: Runnable) -> Phase:
    """A runnable's phase: :attr:`Phase.LEADER` for one that needs the lease."""
    return Phase.LEADER if item.needs_leader else item.phase


class RunnableGroup:
    """One run of ``runnables`` on ``cluster`` (see :meth:`run`).

    ``ending`` is set once the run starts to end (stop asked, a runnable failed, the lease lost),
    before anything is stopped; ``on_started(seconds)`` is called once every phase started, with
    the seconds the last one took. ``grace``: the seconds each phase's runnables have to return
    once their ``stop`` is set; those still running then are cancelled, named in an error log,
    and the run raises TimeoutError naming them (as controller-runtime's manager returns an error
    when its runnables outlast the graceful shutdown timeout).
    """

    def __init__(
        self,
        cluster: Cluster,
        runnables: Sequence[Runnable],
        *,
        ending: asyncio.Event | None = None,
        on_started: Callable[[float], None] | None = None,
        grace: float = 30.0,
    ) -> None:
        self._cluster = cluster
        self._grace = grace
        self._phases: dict[Phase, list[_Entry]] = {}
        for item in runnables:
            self._phases.setdefault(effective_phase(item), []).append(_Entry(item))
        self.ending = ending if ending is not None else asyncio.Event()
        self._on_started = on_started

    async def run(self, stop: asyncio.Event) -> None:
        """Start every phase in order, wait until ``stop`` is set or a runnable fails, stop the
        started phases in reverse order; raise the failure (LeadershipLost for a lost lease)."""
        failure: BaseException | None = None
        started: list[list[_Entry]] = []
        try:
            seconds = 0.0
            for phase in sorted(self._phases):
                entries = self._phases[phase]
                started.append(entries)
                t0 = time.monotonic()
                for entry in entries:
                    self._start(entry)
                outcome = await self._until_started(entries, [e for es in started for e in es], stop)
                if outcome is not None:
                    failure = outcome[1]
                    break
                if stop.is_set():
                    break
                seconds = time.monotonic() - t0
            else:
                if self._on_started is not None:
                    self._on_started(seconds)
                failure = await self._until_stop_or_failure(started, stop)
        finally:
            errors = await self._shutdown(started, lost=isinstance(failure, LeadershipLost))
        if failure is not None:
            raise failure
        if errors:
            raise errors[0]

    def _start(self, entry: _Entry) -> None:
        entry.task = asyncio.ensure_future(entry.runnable.run(self._cluster, entry.stop))
        entry.task.set_name(f"runnable {entry.name}")
        started = getattr(entry.runnable, "started", None)
        if started is not None:
            entry.ready = asyncio.ensure_future(started())

    async def _until_started(
        self, entries: list[_Entry], running: list[_Entry], stop: asyncio.Event
    ) -> tuple[_Entry, BaseException] | None:
        """Wait until every entry started (or returned): None; or one of the ``running`` ones
        (the entries and those of the phases before) failed: it and its error; or ``stop`` is
        set: None (the caller looks)."""
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while True:
                for entry in running:
                    exc = entry.failure()
                    if exc is not None:
                        log.error("%s failed: %s", entry.name, exc)
                        return entry, exc
                if stop.is_set():
                    return None
                waiting: set[asyncio.Future[Any]] = set()
                for entry in entries:
                    assert entry.task is not None
                    if entry.ready is not None and not entry.ready.done() and not entry.task.done():
                        waiting.update((entry.ready, entry.task))
                if not waiting:
                    return None
                waiting.update(e.task for e in running if e.task is not None and not e.task.done())
                await asyncio.wait({*waiting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()

    async def _until_stop_or_failure(
        self, started: list[list[_Entry]], stop: asyncio.Event
    ) -> BaseException | None:
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while True:
                running: set[asyncio.Future[Any]] = set()
                for entries in started:
                    for entry in entries:
                        exc = entry.failure()
                        if exc is not None:
                            log.error("%s failed: %s", entry.name, exc)
                            return exc
                        if entry.task is not None and not entry.task.done():
                            running.add(entry.task)
                if stop.is_set():
                    return None
                await asyncio.wait({*running, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()

    async def _shutdown(self, started: list[list[_Entry]], *, lost: bool) -> list[BaseException]:
        """Stop the started phases, the last one first; a runnable still starting is cancelled,
        as is one that needs the lease once it is ``lost``. Returns the errors raised stopping."""
        self.ending.set()
        errors: list[BaseException] = []
        for entries in reversed(started):
            tasks: list[asyncio.Task[None]] = []
            for entry in entries:
                task = entry.task
                if task is None:
                    continue
                failed = entry.failure() is not None
                starting = entry.ready is not None and not entry.ready.done()
                if entry.ready is not None:
                    entry.ready.cancel()
                if starting or (lost and entry.runnable.needs_leader):
                    task.cancel()
                else:
                    entry.stop.set()
                if not task.done() or not failed:
                    tasks.append(task)
            try:
                errors.extend(await self._until_ended(entries, tasks))
            except asyncio.CancelledError:  # Manager.start() cancelled again while stopping
                for later in started:
                    for entry in later:
                        if entry.task is not None:
                            entry.task.cancel()
                raise
        return errors

    async def _until_ended(
        self, entries: list[_Entry], tasks: list[asyncio.Task[None]]
    ) -> list[BaseException]:
        """Wait for one phase's ``tasks`` up to the grace, then cancel the ones left (and wait
        for them up to CANCEL_BOUND); the errors they ended with, a TimeoutError for those left."""
        errors: list[BaseException] = []
        if not tasks:
            return errors
        _, late = await asyncio.wait(tasks, timeout=self._grace)
        if late:
            names = ", ".join(e.name for e in entries if e.task in late)
            log.error("%s did not stop within %.0f s of the stop: cancelled", names, self._grace)
            for task in late:
                task.cancel()
            _, left = await asyncio.wait(late, timeout=CANCEL_BOUND)
            if left:
                log.error("%s did not end when cancelled: left behind", names)
            errors.append(TimeoutError(f"{names} did not stop within {self._grace:.0f} s of the stop"))
        for task in tasks:
            if task.done() and not task.cancelled() and task not in late:
                exc = task.exception()
                if isinstance(exc, Exception):
                    errors.append(exc)
        return errors


async def until_stop(work: Coroutine[Any, Any, T], stop: asyncio.Event) -> tuple[bool, T | None]:
    """Run ``work`` until it returns (True, its result) or ``stop`` is set first (it is cancelled:
    False, None); its error is raised."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if task.cancelled():
        return False, None
    return True, task.result()
