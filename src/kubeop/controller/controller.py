"""Controller: the description of a reconcile loop, which the Manager runs.

Built like a sentence::

    Controller.for_(Application).owns(Deployment).with_predicates(GenerationChanged).reconcile(fn)

``for_`` watches the primary kind and enqueues each object's own request; ``owns`` watches a
child kind and enqueues its controller owner of the primary kind; ``watches`` maps any other
kind to requests with a function; ``triggered_by`` adds requests from outside the watches. All
watches share the manager's informers: one watch per kind for the whole process, however many
controllers look at it.

A ``Controller`` is an immutable value, as kube-rs' consuming builder is: every builder method
returns a new description and leaves its receiver as it was, so a description can be shared,
reused as the base of others, and run by several managers at once. It holds no queue, task or
cache: :meth:`Manager.add <kubeop.manager.Manager.add>` registers it and the manager's
``start`` makes a running controller of it (:mod:`kubeop.controller.running`), with its
own queue and workers, for that run only.

Reconcile semantics are controller-runtime's: an exception is a rate-limited requeue (backoff
5 ms doubling to 1000 s), a :class:`TerminalError` is counted and not retried,
``Result(requeue_after=s)`` forgets the backoff and comes back after ``s``, and ``Result()``
forgets. One departure: a failure because the API server is unreachable or not serving (a
connection error, 503, 504) is not the object's and is not charged to the rate limiter; such
requests wait for the server instead. One key is never reconciled by two workers at once, and
no reconcile starts before every watched cache has synced.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeop.client import ResourceLike
from kubeop.client.restmapper import resource_key
from kubeop.controller.context import Context
from kubeop.controller.dependent import Dependent, owner_request
from kubeop.controller.handler import EventHandler, enqueue_for_object, enqueue_from_map
from kubeop.controller.predicate import Predicate
from kubeop.controller.request import Request, Result
from kubeop.controller.trigger import Trigger
from kubeop.controller.workflow import DEFAULT_FINALIZER, Workflow
from kubeop.queue import RateLimiter

__all__ = ["Controller", "Reconciler"]

AsyncReconciler = Callable[[Request, Context], Awaitable[Result | None]]
SyncReconciler = Callable[[Request, Any], Result | None]
Reconciler = AsyncReconciler | SyncReconciler
MapFn = Callable[[Mapping[str, Any]], Iterable[Any]]
#: A rate limiter, or a function that makes one for each run (a limiter keeps per-request state).
RateLimiterSource = RateLimiter[Request] | Callable[[], RateLimiter[Request]]


@dataclass(frozen=True, slots=True)
class Watch:
    """One watched kind of a controller and what its events enqueue."""

    what: ResourceLike
    handler: EventHandler | None  # None: enqueue the controller owner of the primary kind
    predicates: tuple[Predicate, ...]
    namespace: str | None = None
    label_selector: str | None = None
    metadata_only: bool = False


def kind_name(what: ResourceLike) -> str:
    """The kind a watch names, before discovery resolved it (from
    :func:`~kubeop.client.restmapper.resource_key`: the kind when it is known, else the plural
    or the name as given)."""
    try:
        key = resource_key(what)
    except (TypeError, ValueError):  # not a resource: the controller's start says so
        return str(getattr(what, "__name__", what))
    if key[0] == "name":
        return what if isinstance(what, str) else key[1]
    return key[-1]


@dataclass(frozen=True, slots=True)
class Controller:
    """What a controller reconciles, owns and watches, with which predicates, workers and options.

    Immutable: builder methods return a new description (see the module docstring).
    """

    _for: Watch
    _watches: tuple[Watch, ...] = ()
    _filters: tuple[Predicate, ...] = ()
    _workers: int = 1
    _name: str = ""
    _reconciler: Reconciler | None = None
    _rate_limiter: RateLimiterSource | None = None
    _triggers: tuple[Trigger, ...] = ()
    _workflow: Workflow | None = None

    # -- building ------------------------------------------------------------------------------
    @classmethod
    def for_(
        cls,
        kind: ResourceLike,
        *predicates: Predicate,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> Controller:
        """Reconcile objects of ``kind``; each event enqueues the object's own request."""
        return cls(Watch(kind, enqueue_for_object(), predicates, namespace, label_selector))

    def owns(self, kind: ResourceLike, *predicates: Predicate, metadata_only: bool = False) -> Controller:
        """Also watch ``kind`` and enqueue the primary object that controls each child."""
        watch = Watch(kind, None, predicates, self._for.namespace, metadata_only=metadata_only)
        return dataclasses.replace(self, _watches=(*self._watches, watch))

    def watches(
        self,
        kind: ResourceLike,
        handler: EventHandler | MapFn,
        *predicates: Predicate,
        metadata_only: bool = False,
    ) -> Controller:
        """Also watch ``kind``; ``handler`` (or a map function obj -> requests) says what to enqueue."""
        h = handler if isinstance(handler, EventHandler) else enqueue_from_map(handler)
        watch = Watch(kind, h, predicates, metadata_only=metadata_only)
        return dataclasses.replace(self, _watches=(*self._watches, watch))

    def triggered_by(self, trigger: Trigger) -> Controller:
        """Also reconcile the requests sent to ``trigger`` (events from outside the watches)."""
        if not isinstance(trigger, Trigger):
            raise TypeError(
                f"triggered_by takes a Trigger, got {type(trigger).__name__}: "
                "make one with kubeop.controller.Trigger() and call it with Requests"
            )
        return dataclasses.replace(self, _triggers=(*self._triggers, trigger))

    def with_predicates(self, *predicates: Predicate) -> Controller:
        """Filters for every watch of this controller (controller-runtime's WithEventFilter)."""
        return dataclasses.replace(self, _filters=(*self._filters, *predicates))

    def max_concurrent(self, workers: int) -> Controller:
        """Reconcile up to ``workers`` different objects at once (never one object twice)."""
        if not isinstance(workers, int) or isinstance(workers, bool):
            raise TypeError(f"max_concurrent takes a number of workers (int), got {workers!r}")
        if workers < 1:
            raise ValueError(f"max_concurrent needs at least 1 worker, got {workers}")
        return dataclasses.replace(self, _workers=workers)

    def named(self, name: str) -> Controller:
        """The controller's name in logs and metrics (default: the primary kind, lower case)."""
        return dataclasses.replace(self, _name=name)

    def with_rate_limiter(self, limiter: RateLimiterSource) -> Controller:
        """The queue's rate limiter: a function that makes one for each run (such as
        :func:`~kubeop.queue.default_controller_rate_limiter`), or one limiter, which every run of
        this description then shares (with its per-request backoff)."""
        return dataclasses.replace(self, _rate_limiter=limiter)

    def reconcile(self, fn: Reconciler) -> Controller:
        """Set the reconciler: ``async def fn(request, ctx) -> Result | None`` or a plain ``def``,
        which runs in a worker thread with a synchronous ``ctx.client``."""
        if not callable(fn):
            raise TypeError(
                f"reconcile takes a function (request, ctx) -> Result | None, got {type(fn).__name__}"
            )
        return dataclasses.replace(self, _reconciler=fn)

    def dependents(
        self, *dependents: Dependent | Workflow, finalizer: str = DEFAULT_FINALIZER, conditions: bool = True
    ) -> Controller:
        """Keep these dependents of each primary (:class:`~kubeop.controller.Dependent`s, or one
        :class:`~kubeop.controller.Workflow`): every reconcile runs the workflow, then the
        function given to :meth:`reconcile` if any (with the result at ``ctx.dependents``), then
        writes the primary's conditions in one status write (``conditions=False``: only the
        status the reconcile function adds). Also watches the kinds the dependents write (as
        :meth:`owns` does; by their owner annotations for those deleted by finalizer)."""
        if len(dependents) == 1 and isinstance(dependents[0], Workflow):
            workflow = dependents[0]
        else:
            if any(isinstance(d, Workflow) for d in dependents):
                raise TypeError("dependents takes one Workflow, or Dependent declarations, not both")
            workflow = Workflow(*dependents, finalizer=finalizer, conditions=conditions)  # type: ignore[arg-type]
        if self._workflow is not None:
            raise ValueError(f"controller {self.name!r} has dependents already: declare them in one call")
        out = dataclasses.replace(self, _workflow=workflow)
        for kind, by_finalizer in workflow.owned_kinds():
            if by_finalizer:
                out = out.watches(kind, owner_request)
            elif not any(w.handler is None and w.what == kind for w in out._watches):
                out = out.owns(kind)
        return out

    # -- reading -------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The controller's name in logs and metrics (:meth:`named`, else the primary kind in lower case)."""
        return self._name or kind_name(self._for.what).lower()

    @property
    def reconciler(self) -> Reconciler | None:
        """The function set by :meth:`reconcile` (None until then); with :meth:`dependents`, the
        function that runs the workflow and then it."""
        if self._workflow is not None:
            return self._workflow.reconciler(self._for.what, self._reconciler)
        return self._reconciler

    @property
    def workflow(self) -> Workflow | None:
        """The dependents given to :meth:`dependents` (None without)."""
        return self._workflow
