"""The recorder: what the dashboard keeps of the run, in bounded memory.

The controllers append a record per reconcile to the recorder's
:class:`~kubeop.controller.journal.ReconcileJournal` (one ``deque.append`` on the hot path); the
recorder drains it when the dashboard asks (at most once per refresh, and for each page served)
and keeps, for each size given:

- per controller, the last 5 minutes in 5-second steps (:class:`~kubeop.dashboard.ring.Buckets`);
- the last ``reconciles_per_object`` reconciles of each of the last ``objects`` objects
  reconciled (least recently reconciled first to go);
- the objects failing now (their last error, its traceback once per streak, attempts, next retry),
  at most ``objects`` of them;
- the last ``log_lines`` log lines made during a reconcile (those carrying a reconcile ID);

Errors, tracebacks and log lines are user-controlled text: each is kept with its credentials
redacted (:mod:`kubeop.dashboard.redact`) and cut to a bounded length (an error's message to
``_ERROR_CHARS``, a traceback to ``_TRACEBACK_CHARS``, a log line to ``_LOG_CHARS``), so a flood of
failing objects with huge messages holds at most ``objects`` times that.
- the webhooks' traffic (:class:`~kubeop.dashboard.traffic.WebhookTraffic`), per path served.

With the dashboard off none of this exists: no journal is given to the controllers and no log
handler is installed.
"""

from __future__ import annotations

import concurrent.futures.thread
import logging
import time
import traceback
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from kubeop.controller import running
from kubeop.controller.journal import ReconcileJournal, ReconcileRecord
from kubeop.dashboard.redact import clip, shown
from kubeop.dashboard.ring import Buckets
from kubeop.dashboard.traffic import WebhookTraffic

__all__ = ["Failure", "LogLine", "ObjectKey", "Reconcile", "Recorder"]

_TRACEBACK_CHARS = 8000
_ERROR_CHARS = 1000
_LOG_CHARS = 2000
_FRAMEWORK = (running.__file__, concurrent.futures.thread.__file__)
_new = tuple.__new__  # builds a NamedTuple without its Python-level __new__


class ObjectKey(NamedTuple):
    kind: str
    namespace: str
    name: str


class Reconcile(NamedTuple):
    """One reconcile of an object, as shown."""

    controller: str
    started: float
    seconds: float
    outcome: str
    error: str
    requeue_after: float
    reconcile_id: str
    writes: int = 0
    """Write requests it sent to the API server."""


class LogLine(NamedTuple):
    reconcile_id: str
    time: float
    level: str
    logger: str
    message: str


@dataclass
class Failure:
    """An object failing now: its last error, the traceback of its streak's first failure (or of a
    new error), attempts, and when it is retried (wall time; None: not retried)."""

    controller: str
    key: ObjectKey
    error: str
    traceback: str
    attempts: int
    since: float
    last: float
    next_retry: float | None
    terminal: bool = False


@dataclass
class _Controller:
    kind: str
    ring: Buckets
    adds_seen: int = 0
    last: dict[str, Any] = field(default_factory=dict)


class _LogHandler(logging.Handler):
    """Keeps the log lines of reconciles (records with a ``reconcile_id``)."""

    def __init__(self, lines: deque[LogLine]) -> None:
        super().__init__(logging.DEBUG)
        self._lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        rid = getattr(record, "reconcile_id", None)
        if rid is None:
            return
        try:
            message = record.getMessage()
        except Exception:
            message = str(record.msg)
        message = shown(message, _LOG_CHARS)
        self._lines.append(LogLine(str(rid), record.created, record.levelname, record.name, message))


class Recorder:
    """What the dashboard shows, kept in bounded memory (see the module docstring)."""

    def __init__(
        self,
        *,
        objects: int = 1000,
        reconciles_per_object: int = 20,
        log_lines: int = 5000,
        journal_size: int = 4096,
        step: float = 5.0,
        steps: int = 60,
    ) -> None:
        for name, value in (
            ("objects", objects),
            ("reconciles_per_object", reconciles_per_object),
            ("log_lines", log_lines),
        ):
            if value < 1:
                raise ValueError(f"Dashboard({name}=...) must be at least 1, not {value!r}")
        self.journal = ReconcileJournal(journal_size)
        self.objects = objects
        self.reconciles_per_object = reconciles_per_object
        self.step, self.steps = step, steps
        self.controllers: dict[str, _Controller] = {}
        self.history: OrderedDict[ObjectKey, deque[Reconcile]] = OrderedDict()
        self.failing: OrderedDict[tuple[str, ObjectKey], Failure] = OrderedDict()
        self.lines: deque[LogLine] = deque(maxlen=log_lines)
        self.webhooks = WebhookTraffic(step=step, length=steps)
        self._handler: _LogHandler | None = None

    # -- the log lines of reconciles -------------------------------------------------------------
    def install(self, logger: logging.Logger | None = None) -> None:
        """Keep the reconciles' log lines (a handler on ``logger``, the root one by default)."""
        if self._handler is None:
            self._handler = _LogHandler(self.lines)
            (logger or logging.getLogger()).addHandler(self._handler)

    def uninstall(self, logger: logging.Logger | None = None) -> None:
        """Remove the log handler :meth:`install` added (nothing if none)."""
        if self._handler is not None:
            (logger or logging.getLogger()).removeHandler(self._handler)
            self._handler = None

    def log_lines(self, reconcile_id: str) -> list[LogLine]:
        """The log lines kept of one reconcile (by its reconcile ID), oldest first."""
        return [line for line in self.lines if line.reconcile_id == reconcile_id]

    # -- draining the journal --------------------------------------------------------------------
    def drain(self, now: float | None = None) -> int:
        """Take the journal's records into the aggregates and sample the controllers' queues;
        how many records were taken."""
        now = time.time() if now is None else now
        records = self.journal.records
        taken = 0
        while records:
            self._take(records.popleft())
            taken += 1
        for name, load in self.journal.controllers.items():
            controller = self._controller(name, load.kind)
            controller.ring.added(now, load.adds - controller.adds_seen)
            controller.adds_seen = load.adds
        return taken

    def _controller(self, name: str, kind: str) -> _Controller:
        controller = self.controllers.get(name)
        if controller is None:
            controller = self.controllers[name] = _Controller(
                kind, Buckets(step=self.step, length=self.steps)
            )
        return controller

    def _take(self, record: ReconcileRecord) -> None:
        # Once per reconcile (at each refresh, not on the reconcile path): the success path
        # builds its tuples with tuple.__new__ (a NamedTuple's own __new__ is a Python call).
        req = record.request
        key = _new(ObjectKey, (record.kind, req.namespace or "", req.name))
        end = record.started + record.seconds
        failed = record.error is not None
        controller = self.controllers.get(record.controller) or self._controller(
            record.controller, record.kind
        )
        controller.kind = record.kind  # resolved by the controller once it started
        controller.ring.reconciled(end, record.seconds, failed=failed)
        error = _error_text(record.error) if record.error is not None else ""
        history = self.history.get(key)
        if history is None:
            history = self.history[key] = deque(maxlen=self.reconciles_per_object)
            while len(self.history) > self.objects:
                self.history.popitem(last=False)
        else:
            self.history.move_to_end(key)
        history.append(
            _new(
                Reconcile,
                (
                    record.controller,
                    record.started,
                    record.seconds,
                    record.outcome,
                    error,
                    record.requeue_after,
                    record.reconcile_id,
                    record.writes,
                ),
            )
        )
        if record.error is None:
            if self.failing:
                self.failing.pop((record.controller, key), None)
            return
        slot = (record.controller, key)
        failure = self.failing.get(slot)
        next_retry = end + record.retry_in if record.retry_in is not None else None
        if failure is None or failure.error != error:
            self.failing[slot] = Failure(
                record.controller,
                key,
                error,
                _traceback(record.error),
                max(record.attempts, 1),
                failure.since if failure is not None else record.started,
                end,
                next_retry,
                record.outcome == "terminal",
            )
            self.failing.move_to_end(slot)
            while len(self.failing) > self.objects:
                self.failing.popitem(last=False)
        else:
            failure.attempts = max(record.attempts, failure.attempts + 1)
            failure.last, failure.next_retry = end, next_retry
            failure.terminal = record.outcome == "terminal"


def _error_text(exc: BaseException) -> str:
    text = shown(str(exc), _ERROR_CHARS)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _traceback(exc: BaseException) -> str:
    """The traceback from the reconciler down (the worker's own frames left out)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename in _FRAMEWORK:
        tb = tb.tb_next
    parts = traceback.TracebackException(type(exc), exc, tb).format()  # a huge message is cut alone
    return clip("".join(shown(part, _ERROR_CHARS) for part in parts), _TRACEBACK_CHARS, keep_end=True)
