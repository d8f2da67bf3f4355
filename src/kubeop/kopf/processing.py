"""One handling cycle of one object: the reconciler kubeop's controller runs for kopf handlers.

The controller gives level-based semantics: one cycle per object at a time, from the shared
cache, whatever happened in between. A cycle:

1. reads the object from the cache and its recorded state (:mod:`kubeop.kopf.state`);
2. adds the finalizer in one write and stops there, if a delete handler needs it and it is
   missing (kopf does the same, so deletion handlers can never be skipped);
3. computes the cause (:func:`~kubeop.kopf.handlers.detect_cause`) and the diff against the
   essence last handled;
4. runs every handler of that cause that is due, in registration order, with kopf's kwargs,
   sharing one ``patch``;
5. writes the handlers' patch, their return values (``status.<handler id>``), their progress or
   (when all are done) the new essence (through kopf's storages, :mod:`kubeop.kopf.state`), and
   the finalizer's removal after a deletion, in ONE request — two only when the main resource
   and a status subresource both have changes, which the API server takes apart (the handlers
   patched both, or they patched status only and the state goes to kopf's annotations: an
   object kopf handled, or storages set so). No handler ran and nothing to record: no write.

A temporary failure records the attempt and the time it may run again; the cycle asks the
controller to come back then.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import datetime as dt
import inspect
import json
import logging
import time
import weakref
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from kubeop.controller import Context, ReconcilerClient, Request, Result
from kubeop.core.errors import Conflict, NotFound
from kubeop.core.resource import ApiResource
from kubeop.kopf import lifecycles, subhandlers
from kubeop.kopf.bodies import Body, Patch
from kubeop.kopf.diffs import Diff, diff, reduce, resolve
from kubeop.kopf.errors import HandlerRetriesError, HandlerTimeoutError, PermanentError, TemporaryError
from kubeop.kopf.events import current_body, use_recorder, warn
from kubeop.kopf.handlers import (
    TITLES,
    ChangingHandler,
    ErrorsMode,
    Reason,
    detect_cause,
    matches,
    prematches,
    selected,
)
from kubeop.kopf.indexing import IndexSet
from kubeop.kopf.resource import of_api_resource
from kubeop.kopf.settings import current_settings, default_backoff
from kubeop.kopf.spawning import Spawned, SpawningHandler
from kubeop.kopf.state import Progress, State, storages_of
from kubeop.kopf.storagekeys import sharing_one_name, unfit_for_annotations

__all__ = ["FINALIZER", "KOPF_DIFFBASE", "LocalObjectLogger", "Memo", "ObjectLogger", "Processor"]

#: kopf's own finalizer and diff base: objects handled by kopf before keep working after a move.
FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
KOPF_DIFFBASE = "kopf.zalando.org/last-handled-configuration"
WRITE_ATTEMPTS = 5


class Memo(dict[str, Any]):
    """kopf's ``memo``: a per-object dict with attribute access, kept while the operator runs."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key: str, value: Any) -> None:
        self[key] = value

    def __delattr__(self, key: str) -> None:
        try:
            del self[key]
        except KeyError:
            raise AttributeError(key) from None


class ObjectLogger(logging.LoggerAdapter[logging.Logger]):
    """kopf's per-object logger: ``[namespace/name] message``, with the object in extra fields.

    Built as kubeop does (``ObjectLogger(logger, extra)``) or as kopf does
    (``kopf.ObjectLogger(body=body, settings=settings)``: the object's lines on kubeop.kopf.objects)."""

    def __init__(
        self,
        logger: logging.Logger | None = None,
        extra: Mapping[str, object] | None = None,
        *,
        body: Mapping[str, Any] | None = None,
        settings: Any = None,
    ) -> None:
        if body is not None:
            md = body.get("metadata") or {}
            extra = {"object_namespace": md.get("namespace"), "object_name": md.get("name"), **(extra or {})}
        super().__init__(logger if logger is not None else objects_log, extra)

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        """Prefix the message with the object's ``[namespace/name]``, as kopf's per-object logger does, and
        pass its fields on as ``extra``.
        """
        extra = self.extra or {}
        kwargs["extra"] = {**extra, **(kwargs.get("extra") or {})}
        return f"[{extra['object_namespace']}/{extra['object_name']}] {msg}" if extra.get(
            "object_namespace"
        ) else f"[{extra.get('object_name')}] {msg}", kwargs


class LocalObjectLogger(ObjectLogger):
    """kopf's per-object logger whose lines are never posted as events (kubeop posts none of them)."""


objects_log = logging.getLogger("kubeop.kopf.objects")
log = logging.getLogger("kubeop.kopf")


@dataclass
class _Outcome:
    final: bool
    result: Any = None
    exception: BaseException | None = None
    delay: float | None = None


@dataclass
class _Run:
    """What the handlers of one cycle share (sub-handlers run with their parent's)."""

    reason: Reason
    now: float
    kwargs: dict[str, Any]
    body: Mapping[str, Any]
    old: Any
    new: Any
    diff: Diff
    logger: ObjectLogger
    patch: Patch
    progress: dict[str, Progress]


@dataclass
class Processor:
    """The reconciler of one resource's kopf handlers (one per resource, shared by its workers)."""

    resource_name: str
    handlers: list[ChangingHandler]
    memo: Memo = field(default_factory=Memo)
    spawners: list[SpawningHandler] = field(default_factory=list)
    finalizer: str = FINALIZER
    indexes: IndexSet | None = None
    """The operator's ``@kopf.index`` indices: kwargs of every handler, complete before the first."""
    writes: int = 0
    """API writes to the handled objects (the benchmark and the tests count them)."""
    _resource: ApiResource | None = None
    # the uid each object had when a cycle of this process last finished it (kopf's "initial":
    # the first cycle of an object in this process); kept for live objects only
    _handled_once: dict[tuple[str, str | None, str], str] = field(default_factory=dict)
    # Keyed by (cluster, namespace, name): in a fleet one processor serves every cluster.
    _memos: dict[tuple[str, str | None, str], Memo] = field(default_factory=dict)
    _spawned: dict[tuple[str, str | None, str], Spawned] = field(default_factory=dict)
    _status_ok: bool = True
    _status_checked: bool = False
    _recorder_set: bool = False
    _own_writes: dict[tuple[str, str | None, str], str] = field(default_factory=dict)
    """resourceVersion of the object as the cycle's own status write left it, by object."""
    _stopping: set[asyncio.Task[None]] = field(default_factory=set)
    """The stops of daemons and timers no longer in ``_spawned`` that are still under way."""

    def __post_init__(self) -> None:
        self._handler_ids = [h.id for h in self.handlers]
        for shared in sharing_one_name(self._handler_ids):
            log.warning(
                "%s: the handlers %s get one annotation name in kopf's annotation storages (which "
                "turn / into . and < > into _), so they would share one progress record: give them "
                "ids that differ otherwise (id=...)",
                self.resource_name,
                " and ".join(repr(k) for k in shared),
            )
        for unfit in unfit_for_annotations(self._handler_ids):
            log.warning(
                "%s: the handler id %r makes an annotation name the API server refuses (names start "
                "and end with a letter or digit, and hold only those, -, _ and .), so kopf's "
                "annotation storages cannot record its progress: give it an id=... of that form",
                self.resource_name,
                unfit,
            )
        self._extra_fields = sorted(
            {h.field for h in self.handlers if h.field and h.field[0] in ("status", "metadata")}
        )
        # The cycle that the event of its own status write causes is a no-op, and is skipped,
        # when nothing of it can depend on status: no handler filter that calls user code (it
        # gets status), no status field in the essence, no daemon or timer (they get the body).
        self._skip_own_writes = (
            not self.spawners
            and not any(f[0] == "status" for f in self._extra_fields)
            and not any(
                h.when is not None or _calls(h.labels) or _calls(h.annotations) for h in self.handlers
            )
        )

    async def reconcile(self, req: Request, ctx: Context) -> Result | None:
        """The controller's reconciler: one handling cycle of the requested object."""
        client = ctx.client
        if self.indexes is not None and not (indexes := self.indexes.of(req.cluster)).ready.is_set():
            await indexes.ready.wait()
        if req.cluster:  # a fleet's: events about this cluster's objects go to this cluster
            use_recorder(ctx.recorder, here=True)
        elif not self._recorder_set:
            use_recorder(ctx.recorder)
            self._recorder_set = True
        res = self._resource
        if res is None:
            res = self._resource = await client.resource(self.resource_name)
        body = await client.get(res, req.name, namespace=req.namespace)
        key = (req.cluster, req.namespace or None, req.name)  # as the cycle keys it: no namespace is None
        own = self._own_writes.pop(key, None) if self._own_writes else None
        extra = {"object_namespace": req.namespace, "object_name": req.name}
        if req.cluster:  # a fleet's: the cluster in every line of the handlers' logger
            extra["cluster"] = req.cluster
        logger = ObjectLogger(objects_log, extra)
        if own is not None and body is not None and own == body["metadata"].get("resourceVersion"):
            # The object exactly as this operator's last cycle wrote it: handled, state recorded.
            logger.debug("Something has changed, but we are not interested (the essence is the same).")
            return None
        if body is None:
            self._memos.pop(key, None)
            self._handled_once.pop(key, None)
            spawned = self._spawned.pop(key, None)
            if spawned is not None:
                await self._stop([spawned])
            logger.debug("Deleted, really deleted, and we are notified.")
            return None
        return await self._cycle(client, res, body, logger, req.cluster)

    # -- one cycle -------------------------------------------------------------------------
    async def _cycle(
        self,
        client: ReconcilerClient,
        res: ApiResource,
        body: Mapping[str, Any],
        logger: ObjectLogger,
        cluster: str = "",
    ) -> Result | None:
        md = body.get("metadata") or {}
        key = (cluster, md.get("namespace"), md.get("name") or "")
        uid = md.get("uid") or ""
        now = time.time()
        storages = storages_of(current_settings().persistence)
        state = State.of(body, storages, self._handler_ids, now)
        old = state.essence
        new = storages.essence(body, self._extra_fields)
        the_diff = diff(old, new)
        initial = self._handled_once.get(key) != uid
        memo = self._memos.get(key)
        if memo is None:
            memo = self._memos[key] = Memo(self.memo)
        patch = Patch()
        kwargs = _kwargs(body, patch, logger, res, memo, old, new, the_diff, cluster)
        if self.indexes is not None:
            kwargs.update(self.indexes.of(cluster).indices)

        finalizers = list(md.get("finalizers") or ())
        has_finalizer = self.finalizer in finalizers
        deleting = bool(md.get("deletionTimestamp"))
        if not any(prematches(h, body, kwargs) for h in self.handlers) and not any(
            h.fits(body, kwargs) for h in self.spawners
        ):
            if has_finalizer:  # it no longer matches: let it go
                await self._write(client, res, body, Patch(), None, remove_finalizer=True, logger=logger)
            return None
        needs_finalizer = any(
            h.requires_finalizer and prematches(h, body, kwargs) for h in self.handlers
        ) or any(h.fits(body, kwargs) for h in self.spawners)
        if needs_finalizer and not has_finalizer and not deleting:
            logger.debug("Adding the finalizer, thus preventing the actual deletion.")
            await self._write(client, res, body, Patch(), None, add_finalizer=True, logger=logger)
            return None
        remove_finalizer = has_finalizer and not needs_finalizer
        spawned = self._spawned.get(key)
        if spawned is not None:
            if storages.essence(spawned.body, self._extra_fields) != new:
                spawned.changed_at = time.monotonic()
            spawned.body = body
        if deleting:
            if spawned is not None:
                del self._spawned[key]
                await self._stop([spawned])  # before the finalizer can go
        else:
            fitting = [h for h in self.spawners if h.fits(body, kwargs)]
            if fitting:
                if spawned is None:
                    spawned = self._spawned[key] = self._spawn(client, res, body, logger, memo, cluster)
                spawned.ensure(fitting)

        reason = detect_cause(body, finalizer=self.finalizer, old=old, diff=the_diff, initial=initial)
        if reason is Reason.FREE:
            logger.debug("Deletion, but we are done with it, and we do not care.")
            return None
        kwargs["reason"] = reason.value
        if reason is Reason.CREATE:
            initial = False  # a creation never mixes with resuming (as in kopf)
        if reason is Reason.NOOP:
            if remove_finalizer:
                await self._write(client, res, body, patch, None, remove_finalizer=True, logger=logger)
            logger.debug("Something has changed, but we are not interested (the essence is the same).")
            return None

        title = TITLES.get(reason, reason.value)
        chosen = [
            h for h in self.handlers if selected(h, reason, initial) and matches(h, body, old, new, kwargs)
        ]
        progress = state.progress
        record = False  # anything to write to the state?
        stale = {k for k, p in progress.items() if p.purpose is not None and p.purpose != reason.value}
        if stale:
            logger.info("%s is superseded by %s.", _purpose_title(progress, stale), title)
            for k in stale:
                del progress[k]
            state.purged.update(stale)
            record = True
        delays: list[float] = []
        done = True
        if chosen:
            if objects_log.isEnabledFor(logging.DEBUG):  # the body's JSON only when it is logged
                logger.debug("%s is in progress: %s", title.capitalize(), _short(body))
            run = _Run(reason, now, kwargs, body, old, new, the_diff, logger, patch, progress)
            ran, done = await self._run_handlers(chosen, run, delays)
            record = record or ran
            if done:
                succeeded = sum(1 for h in chosen if progress.get(h.id) and progress[h.id].success)
                failed = sum(1 for h in chosen if progress.get(h.id) and progress[h.id].failure)
                if record:
                    logger.info(
                        "%s is processed: %d succeeded; %d failed.", title.capitalize(), succeeded, failed
                    )
        if done:
            if progress:
                state.purged.update(progress)
                progress.clear()
                record = True
            # The essence is recorded when handlers ran for it, and on creation (to know it was
            # seen); a change no handler is interested in is not written down: the next handler
            # that runs sees the whole diff since it last ran.
            if reason is not Reason.DELETE and new != old and (old is None or chosen):
                state.new_essence = new
                record = True
            self._handled_once[key] = uid
        finish_delete = done and reason is Reason.DELETE
        if finish_delete:
            logger.debug("Removing the finalizer, thus allowing the actual deletion.")
        if record or patch or remove_finalizer or finish_delete:
            written = await self._write(
                client,
                res,
                body,
                patch,
                state if (record and not finish_delete) else None,
                remove_finalizer=remove_finalizer or finish_delete,
                logger=logger,
            )
            if (
                written is not None
                and self._skip_own_writes
                and done
                and not delays
                and not state.progress
                and state.essence == new
            ):
                self._own_writes[key] = written
        if delays:
            return Result(requeue_after=max(min(delays), 0.001))
        return None

    async def _run_handlers(
        self, handlers: list[ChangingHandler], run: _Run, delays: list[float]
    ) -> tuple[bool, bool]:
        """Run the due ones of ``handlers`` in order; (anything to record?, all done?)."""
        record, done = False, True
        progress = run.progress
        due: list[ChangingHandler] = []
        for handler in handlers:
            p = progress.get(handler.id)
            if p is not None and p.finished:
                continue
            if p is not None and p.delayed is not None and p.delayed > run.now:
                delays.append(p.delayed - run.now)
                done = False
                continue
            due.append(handler)
        lifecycle = lifecycles.get_default_lifecycle()
        if lifecycle is not lifecycles.asap and due:
            # A lifecycle set by the operator picks among the due ones; the rest run next cycle.
            chosen = list(lifecycle(due, state=progress, **run.kwargs))
            if len(chosen) < len(due):
                delays.append(0.0)
                done = False
            due = chosen
        for handler in due:
            p = progress.get(handler.id)
            if p is None:
                p = progress[handler.id] = Progress(purpose=run.reason.value, started=run.now)
            outcome = await self._execute(handler, p, run)
            record = True
            p.retries += 1  # every attempt counts, as in kopf's records
            p.delayed = None
            if outcome.final:
                p.stopped = p.stopped or time.time()
                if outcome.exception is None:
                    p.success = True
                    p.message = None
                    _deliver(run.patch, handler.id, outcome.result)
                else:
                    p.failure = True
                    p.message = str(outcome.exception) or repr(outcome.exception)
                    warn(run.body, reason="Error", message=f"{handler} failed: {p.message}")
            else:
                p.delayed = time.time() + (outcome.delay or 0)
                p.message = str(outcome.exception) or repr(outcome.exception)
                delays.append(outcome.delay or 0)
                done = False
        return record, done

    def _spawn(
        self,
        client: ReconcilerClient,
        res: ApiResource,
        body: Mapping[str, Any],
        logger: ObjectLogger,
        memo: Memo,
        cluster: str = "",
    ) -> Spawned:
        def kwargs(patch: Patch) -> dict[str, Any]:
            out = _kwargs(spawned.body, patch, logger, res, memo, None, None, (), cluster)
            if self.indexes is not None:
                with contextlib.suppress(LookupError):  # a disengaged cluster's: its daemons stop
                    out.update(self.indexes.of(cluster).indices)
            return out

        async def write(patch: Patch) -> None:
            await self._write(client, res, spawned.body, patch, None, logger=logger)

        spawned = Spawned(logger, kwargs, write, body)
        return spawned

    async def stop_cluster(self, cluster: str) -> None:
        """Stop the daemons and timers of cluster ``cluster``'s objects (a fleet's cluster was
        disengaged: kopf's stop, as at the operator's exit) and forget its memos."""
        keys = [k for k in self._spawned if k[0] == cluster]
        spawned = [self._spawned.pop(k) for k in keys]
        for key in [k for k in self._memos if k[0] == cluster]:
            del self._memos[key]
        for key in [k for k in self._handled_once if k[0] == cluster]:  # engaged again: resumed
            del self._handled_once[key]
        for key in [k for k in self._own_writes if k[0] == cluster]:
            del self._own_writes[key]
        await self._stop(spawned)

    async def stop_all(self) -> None:
        """Stop every daemon and timer (the operator is stopping), and wait for the stops already
        under way (a disengaged cluster's, a deleted object's) to end."""
        spawned, self._spawned = list(self._spawned.values()), {}
        await self._stop(spawned)
        while self._stopping:
            await asyncio.shield(asyncio.gather(*self._stopping, return_exceptions=True))

    async def _stop(self, spawned: list[Spawned]) -> None:
        """Stop ``spawned`` (kopf's order: flag, backoff, cancel) in a task of its own, which
        the caller's cancellation does not interrupt: what was taken out of ``_spawned`` is
        stopped all the same (else a daemon ignoring its flag would run on, known to no one),
        and :meth:`stop_all` waits for it. The caller's cancellation propagates at once."""
        if not spawned:
            return
        task = asyncio.create_task(self._stop_now(spawned), name=f"kopf stop {self.resource_name}")
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)
        await asyncio.shield(task)

    @staticmethod
    async def _stop_now(spawned: list[Spawned]) -> None:
        await asyncio.gather(*(s.stop() for s in spawned), return_exceptions=True)

    async def _execute(self, handler: ChangingHandler, p: Progress, run: _Run) -> _Outcome:
        base, body, old, new, the_diff, logger = run.kwargs, run.body, run.old, run.new, run.diff, run.logger
        runtime = max(0.0, time.time() - p.started)
        kwargs = dict(
            base,
            retry=p.retries,
            started=dt.datetime.fromtimestamp(p.started, dt.UTC),
            runtime=dt.timedelta(seconds=runtime),
            param=handler.param,
        )
        if handler.field:
            kwargs.update(
                old=resolve(old, handler.field),
                new=resolve(new, handler.field),
                diff=reduce(the_diff, handler.field),
            )
        try:
            logger.debug("%s is invoked.", handler)
            if handler.timeout is not None and runtime >= handler.timeout:
                raise HandlerTimeoutError(f"{handler} has timed out after {runtime:.1f} s.")
            if handler.retries is not None and p.retries >= handler.retries:
                raise HandlerRetriesError(f"{handler} has exceeded {p.retries} retries.")
            token = current_body.set(body)
            collector, collecting = subhandlers.collecting(self.resource_name)
            runner = subhandlers.running_subhandlers(lambda subs: self._run_subhandlers(handler, subs, run))
            try:
                if _is_coroutine(handler.fn):
                    result = await handler.fn(**kwargs)
                else:
                    result = await asyncio.to_thread(handler.fn, **kwargs)
            finally:
                subhandlers.reset_runner(runner)
                subhandlers.reset(collecting)
                current_body.reset(token)
            subs = collector.handlers()
            if subs:
                unfinished = await self._run_subhandlers(handler, subs, run)
                if unfinished is not None:
                    logger.debug(
                        "%s has unfinished sub-handlers; it runs again in %s s.", handler, unfinished
                    )
                    return _Outcome(
                        False, exception=TemporaryError("unfinished sub-handlers"), delay=unfinished
                    )
        except asyncio.CancelledError:
            raise
        except subhandlers.ChildrenRetry as exc:
            logger.debug("%s has unfinished sub-handlers; it runs again in %s s.", handler, exc.delay)
            return _Outcome(False, exception=exc, delay=exc.delay)
        except TemporaryError as exc:
            msg = str(exc) or repr(exc)
            if handler.retries is not None and p.retries + 1 >= handler.retries:
                logger.error(
                    "%s failed temporarily but will exceed %d retries: %s", handler, handler.retries, msg
                )
                return _Outcome(True, exception=HandlerRetriesError(msg))
            logger.error("%s failed temporarily: %s", handler, msg)
            return _Outcome(False, exception=exc, delay=exc.delay)
        except PermanentError as exc:
            if isinstance(exc, HandlerRetriesError | HandlerTimeoutError):
                logger.error("%s", exc)
            else:
                logger.error("%s failed permanently: %s", handler, str(exc) or repr(exc))
            return _Outcome(True, exception=exc)
        except Exception as exc:
            msg = str(exc) or repr(exc)
            if handler.errors is ErrorsMode.IGNORED:
                logger.exception("%s failed with an exception and will ignore it: %s", handler, msg)
                return _Outcome(True)
            if handler.errors is ErrorsMode.PERMANENT:
                logger.exception("%s failed with an exception and will stop now: %s", handler, msg)
                return _Outcome(True, exception=exc)
            if handler.retries is not None and p.retries + 1 >= handler.retries:
                logger.exception(
                    "%s failed with an exception and will stop now (it would exceed %d retries on the "
                    "next attempt): %s",
                    handler,
                    handler.retries,
                    msg,
                )
                return _Outcome(True, exception=HandlerRetriesError(msg))
            logger.exception(
                "%s failed with an exception and will try again in %s seconds: %s",
                handler,
                _num(default_backoff(handler.backoff)),
                msg,
            )
            warn(body, reason="Error", message=f"{handler} failed: {type(exc).__name__}: {msg}")
            return _Outcome(False, exception=exc, delay=default_backoff(handler.backoff))
        logger.info("%s succeeded.", handler)
        return _Outcome(True, result=result)

    async def _run_subhandlers(
        self, parent: ChangingHandler, subs: list[ChangingHandler], run: _Run
    ) -> float | None:
        """Run a handler's sub-handlers (ids prefixed with the parent's); None when all are done,
        else the delay until the next is due."""
        chosen = [
            dataclasses.replace(h, id=f"{parent.id}/{h.id}")
            for h in subs
            if matches(h, run.body, run.old, run.new, run.kwargs)
        ]
        delays: list[float] = []
        _, done = await self._run_handlers(chosen, run, delays)
        return None if done else max(min(delays, default=0.0), 0.0)

    # -- the one write -----------------------------------------------------------------------
    async def _write(
        self,
        client: ReconcilerClient,
        res: ApiResource,
        body: Mapping[str, Any],
        patch: Patch,
        state: State | None,
        *,
        logger: ObjectLogger,
        add_finalizer: bool = False,
        remove_finalizer: bool = False,
    ) -> str | None:
        """Write ``patch`` (+ ``state``, + the finalizer change) in one request where the API allows.

        The state goes where the write goes: with a status subresource and a status-only patch,
        into ``status``; otherwise into the annotation. Finalizer changes carry the object's
        resourceVersion (another controller may change the list meanwhile): on a conflict the
        list is recomputed from a fresh read and the write retried, without running handlers again.

        Returns the resourceVersion the object has after a write that was only the status with
        the state in it (the object as this cycle left it), else None.
        """
        md = body.get("metadata") or {}
        name, namespace = md.get("name") or "", md.get("namespace")
        subresource = "status" in res.subresources
        status_only = (
            subresource
            and self._status_ok
            and "status" in patch
            and all(k == "status" for k in patch)
            and not (add_finalizer or remove_finalizer)
        )
        fallback: State | None = None
        if state is not None:
            if status_only and not self._status_checked:
                fallback = copy.deepcopy(state)  # to write again elsewhere if status drops it
            state.store(body, patch, status_only=status_only)
        main: dict[str, Any] = {k: v for k, v in patch.items() if not (subresource and k == "status")}
        status_part = patch.get("status") if subresource else None
        current: Mapping[str, Any] = body
        if main or add_finalizer or remove_finalizer:
            for attempt in range(WRITE_ATTEMPTS):
                cmd = current.get("metadata") or {}
                out = dict(main)
                if add_finalizer or remove_finalizer:
                    fins = [f for f in cmd.get("finalizers") or () if f != self.finalizer]
                    if add_finalizer:
                        fins.append(self.finalizer)
                    out["metadata"] = {
                        **(out.get("metadata") or {}),
                        "finalizers": fins,
                        "resourceVersion": cmd.get("resourceVersion"),
                    }
                try:
                    self.writes += 1
                    await client.patch(res, name, out, namespace=namespace)
                    break
                except NotFound:
                    return None
                except Conflict:
                    if attempt == WRITE_ATTEMPTS - 1 or not (add_finalizer or remove_finalizer):
                        raise
                    try:
                        current = await client.api.get(res, name, namespace=namespace)
                    except NotFound:
                        return None
        if status_part is not None:
            self.writes += 1
            try:
                written = await client.patch(
                    res, name, {"status": status_part}, namespace=namespace, subresource="status"
                )
            except NotFound:
                return None
            kopf_part = (status_part or {}).get("kopf") if status_only else None
            stored = [k for k, v in kopf_part.items() if v] if isinstance(kopf_part, Mapping) else []
            if fallback is not None and stored:
                got = (written.get("status") or {}).get("kopf") if isinstance(written, Mapping) else None
                if isinstance(got, Mapping) and any(k in got for k in stored):
                    self._status_checked = True
                else:
                    self._status_ok = False
                    logger.warning(
                        "the API server drops status.kopf of %s (a structural schema without "
                        "x-kubernetes-preserve-unknown-fields on status): the handling state goes to "
                        "the annotations instead, at the cost of a second write when handlers write status",
                        res.plural,
                    )
                    again = Patch()
                    fallback.store(body, again, status_only=False)
                    again.pop("status", None)
                    self.writes += 1
                    await client.patch(res, name, dict(again), namespace=namespace)
                    return None
            if status_only and not main:
                md_written = written.get("metadata") if isinstance(written, Mapping) else None
                rv = (md_written or {}).get("resourceVersion")
                return rv if isinstance(rv, str) else None
        return None


def _calls(filters: Mapping[str, Any] | None) -> bool:
    """Does a labels/annotations filter call user code (a callback gets every kwarg)?"""
    return filters is not None and any(callable(f) for f in filters.values())


def _kwargs(
    body: Mapping[str, Any],
    patch: Patch,
    logger: ObjectLogger,
    res: ApiResource,
    memo: Memo,
    old: Any,
    new: Any,
    the_diff: Diff,
    cluster: str = "",
) -> dict[str, Any]:
    """kopf's kwargs of a handler, and kubeop's ``cluster``: the cluster's name in a fleet
    (``""`` on one cluster)."""
    b = Body(body)
    meta = b.metadata
    return {
        "body": b,
        "spec": b.spec,
        "meta": meta,
        "status": b.status,
        "name": meta.name,
        "namespace": meta.namespace,
        "uid": meta.uid,
        "labels": meta.labels,
        "annotations": meta.annotations,
        "patch": patch,
        "logger": logger,
        "memo": memo,
        "resource": of_api_resource(res),
        "old": old,
        "new": new,
        "diff": the_diff,
        "reason": None,
        "cluster": cluster,
    }


_COROUTINE: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _is_coroutine(fn: Any) -> bool:
    """Is the handler a coroutine function (run on the loop, no thread)? Asked once per handler."""
    try:
        return _COROUTINE[fn]
    except (KeyError, TypeError):  # not asked yet, or not weakly referenceable
        pass
    found = inspect.iscoroutinefunction(fn)
    with contextlib.suppress(TypeError):
        _COROUTINE[fn] = found
    return found


def _deliver(patch: Patch, handler_id: str, result: Any) -> None:
    """A handler's return value goes to ``status.<handler id>`` (a mapping is merged into it)."""
    if result is None:
        return
    status = patch.setdefault("status", {})
    if isinstance(result, Mapping):
        status.setdefault(handler_id, {}).update(result)
    else:
        status[handler_id] = result


def _purpose_title(progress: Mapping[str, Progress], keys: set[str]) -> str:
    purposes = {progress[k].purpose for k in keys}
    name = (purposes.pop() if len(purposes) == 1 else None) or "handling"
    for reason, title in TITLES.items():
        if reason.value == name:
            return title.capitalize()
    return name.capitalize()


def _short(body: Mapping[str, Any]) -> str:
    return json.dumps({k: body.get(k) for k in ("spec",) if k in body}, default=str)[:300]


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)
