"""Workflow: a primary object's dependents, run in dependency order, folded into its status.

::

    web = Workflow(
        Dependent(ConfigMap, desired=config, name="config"),
        Dependent(Deployment, desired=deployment, ready=available, depends_on="config"),
        Dependent(Service, desired=service),
    )
    Controller.for_(WebApp).dependents(web)

One reconcile of a workflow:

1. each dependent is reconciled once those it ``depends_on`` are ready, independent ones
   concurrently; one whose dependencies are not ready waits (it is not touched), one whose
   ``reconcile_precondition`` is false is deleted, with everything that depends on it;
2. the deletions run in reverse dependency order: a dependent is deleted once those depending on
   it are gone (their ``delete_postcondition``);
3. the result (:class:`WorkflowResult`) gives one status condition per dependent
   (``<Name>Ready``) and the aggregate ``Ready`` / ``Progressing`` / ``Degraded``, which
   :meth:`WorkflowResult.write_status` writes in one status write, with whatever else the
   reconciler put in :attr:`WorkflowResult.status` (no request when nothing changed).

A dependent that fails is reported (``Degraded``, its condition's message) and the reconcile
raises :class:`DependentError` after the status write, so the controller retries with backoff;
a ``desired`` that raises :class:`~kubeop.controller.TerminalError` (a spec that cannot work)
makes the reconcile raise it: reported the same, not retried.

When a dependent is deleted by finalizer (``deletion="finalizer"``), the workflow keeps
:attr:`Workflow.finalizer` on the primary and, when the primary is deleted, deletes the
dependents in reverse order before removing it.

Cycles and unknown names in ``depends_on`` are refused when the workflow is built.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubeop.client import ResourceLike
from kubeop.controller.compare import contains
from kubeop.controller.conditions import set_condition
from kubeop.controller.context import Context, SyncClient
from kubeop.controller.dependent import (
    Dependent,
    DependentState,
    delete_dependent,
    failed_state,
    reconcile_dependent,
    reconcile_wanted,
)
from kubeop.controller.request import Request, Result, TerminalError
from kubeop.core import meta as m
from kubeop.core.model import to_dict

if TYPE_CHECKING:
    from kubeop.controller.controller import Reconciler

__all__ = ["DEFAULT_FINALIZER", "DependentError", "Workflow", "WorkflowResult"]

#: The finalizer a workflow keeps on its primaries when a dependent is deleted by finalizer.
DEFAULT_FINALIZER = "kubeop.io/dependents"
#: How soon a reconcile waiting for a deletion's postcondition comes back (a watch event may be sooner).
DELETE_RECHECK = 2.0

_AGGREGATE = ("Ready", "Progressing", "Degraded")


class DependentError(Exception):
    """One or more dependents failed; the primary's status says which (``Degraded``)."""

    def __init__(self, failed: Mapping[str, DependentState]) -> None:
        self.failed = dict(failed)
        super().__init__("; ".join(f"dependent {n!r}: {s.message}" for n, s in self.failed.items()))


@dataclass(slots=True)
class WorkflowResult:
    """One reconcile of a workflow: the primary it ran for, each dependent's state, the
    aggregate, and what the status write will carry (``status``: more fields for the primary's
    status, set by the reconciler; :meth:`set_condition`: more conditions)."""

    states: dict[str, DependentState]
    conditions_of: dict[str, str]  # dependent name -> its condition type
    deleting: bool = False  # the primary is being deleted
    primary: Any = field(default=None, repr=False)  # the primary object the workflow ran for, as read
    with_conditions: bool = True  # the dependents' and the aggregate conditions are written
    status: dict[str, Any] = field(default_factory=dict)
    _extra_conditions: list[tuple[str, bool | str, str, str]] = field(default_factory=list)

    @property
    def ready(self) -> bool:
        """Every dependent that is wanted is ready."""
        return all(s.phase in ("ready", "deleted") for s in self.states.values())

    @property
    def failed(self) -> dict[str, DependentState]:
        """The dependents that failed this run, by name."""
        return {n: s for n, s in self.states.items() if s.phase == "failed"}

    @property
    def waiting_for_deletion(self) -> bool:
        """Some dependent is being deleted and not gone yet (the run goes on when it is)."""
        return any(s.phase == "deleting" for s in self.states.values())

    def actual(self, name: str) -> Any:
        """The object of dependent ``name`` as the server has it (None when absent or deleted)."""
        return self.states[name].actual

    def set_condition(self, type_: str, status: bool | str, reason: str, message: str = "") -> None:
        """Another condition for the same status write."""
        self._extra_conditions.append((type_, status, reason, message))

    def conditions(self, existing: Iterable[Any] = (), generation: int | None = None) -> list[dict[str, Any]]:
        """``existing`` conditions with this result's set: one per dependent (removed for a
        dependent deleted by its precondition), the aggregate, and the reconciler's own, which
        win over the workflow's of the same type. ``existing`` is not changed: a condition that
        changes is a new dict."""
        return self._merged(existing, generation)[0]

    def _merged(self, existing: Iterable[Any], generation: int | None) -> tuple[list[dict[str, Any]], bool]:
        """:meth:`conditions`, and whether they differ from ``existing`` (what a reconcile that
        changes nothing meets: compared field by field, nothing copied)."""
        states = self.states
        gone = (
            {self.conditions_of[n] for n, s in states.items() if s.phase == "deleted"}
            if self.with_conditions
            else ()
        )
        out = [c if type(c) is dict else _condition_dict(c) for c in existing]
        changed = False
        if gone:
            kept = [c for c in out if c.get("type") not in gone]
            changed = len(kept) != len(out)
            out = kept
        ours: list[tuple[str, bool | str, str, str]] = []
        if self.with_conditions:
            for name, state in states.items():
                if state.phase != "deleted":
                    ours.append((self.conditions_of[name], *_condition_of(state), state.message))
            ours.extend(self._aggregate())
        extras = self._extra_conditions
        if extras:
            given = {extra[0] for extra in extras}
            ours = [*(c for c in ours if c[0] not in given), *extras]
        at = {c.get("type"): i for i, c in enumerate(out)}
        for type_, value, reason, message in ours:
            text = value if type(value) is str else ("True" if value else "False")
            i = at.get(type_)
            if i is not None:
                cond = out[i]
                if (
                    cond.get("status") == text
                    and cond.get("reason") == reason
                    and cond.get("message") == message
                    and (generation is None or cond.get("observedGeneration") == generation)
                ):
                    continue
                out[i] = cond = dict(cond)
                set_condition([cond], type_, text, reason, message, observed_generation=generation)
            else:
                at[type_] = len(out)
                set_condition(out, type_, text, reason, message, observed_generation=generation)
            changed = True
        return out, changed

    def _aggregate(self) -> list[tuple[str, bool, str, str]]:
        states = self.states
        failed = [n for n, s in states.items() if s.phase == "failed"]
        pending = [n for n, s in states.items() if s.phase in ("progressing", "waiting", "deleting")]
        if failed:
            ready = (False, "DependentFailed", f"failed: {', '.join(failed)}")
        elif pending:
            ready = (False, "DependentsNotReady", f"not ready: {', '.join(pending)}")
        else:
            ready = (True, "DependentsReady", "all dependents are ready")
        if pending:
            progressing = (True, "Reconciling", f"waiting for: {', '.join(pending)}")
        else:
            progressing = (False, "Complete" if not failed else "Failed", "")
        if failed:
            text = "; ".join(f"{n}: {states[n].message}" for n in failed)
            degraded = (True, "DependentFailed", text)
        else:
            degraded = (False, "AsExpected", "")
        return [(t, *v) for t, v in zip(_AGGREGATE, (ready, progressing, degraded), strict=True)]

    async def write_status(self, primary: Any, ctx: Any) -> bool:
        """Write the conditions and :attr:`status` in one status write (none when unchanged);
        True when a write was made."""
        current = to_dict(primary)
        status = current.get("status") or {}
        body = dict(self.status)
        # conditions the reconciler put in ``status`` are the base; else the primary's
        base = body.pop("conditions", None)
        own = base is not None
        if not own and not self.with_conditions and not self._extra_conditions:
            return bool(await ctx.client.patch_status(primary, body)) if body else False
        conditions, changed = self._merged(
            base if own else status.get("conditions") or (), m.generation(current) or None
        )
        if not changed and not own and contains(status, body):
            return False  # the usual idle reconcile: nothing to compare twice
        body["conditions"] = conditions
        return bool(await ctx.client.patch_status(primary, body))

    def raise_for_failures(self) -> None:
        """Raise :class:`DependentError` when a dependent failed, or the
        :class:`~kubeop.controller.TerminalError` a dependent raised (not retried)."""
        if all(s.error is None for s in self.states.values()):
            return
        failed = self.failed
        for state in failed.values():
            if isinstance(state.error, TerminalError):
                raise state.error
        if failed:
            raise DependentError(failed) from next(iter(failed.values())).error


def _condition_dict(cond: Any) -> dict[str, Any]:
    """A condition as a new dict (conditions may be dicts or models, such as a typed status')."""
    if isinstance(cond, Mapping):
        return dict(cond)
    out: dict[str, Any] = cond.model_dump(mode="json", by_alias=True, exclude_none=True)
    return out


_CONDITION_OF: dict[str, tuple[str, str]] = {
    "ready": ("True", "Ready"),
    "progressing": ("False", "NotReady"),
    "waiting": ("False", "Waiting"),
    "failed": ("False", "Failed"),
    "deleting": ("False", "Deleting"),
}


def _condition_of(state: DependentState) -> tuple[str, str]:
    return _CONDITION_OF[state.phase]


class Workflow:
    """A primary's dependents with their order (see the module docstring). Immutable once built."""

    __slots__ = (
        "_by_name",
        "_conditions_of",
        "_dependents",
        "_order",
        "_uses_finalizer",
        "conditions",
        "finalizer",
    )

    def __init__(
        self, *dependents: Dependent, finalizer: str = DEFAULT_FINALIZER, conditions: bool = True
    ) -> None:
        by_name: dict[str, Dependent] = {}
        for dep in dependents:
            if not isinstance(dep, Dependent):
                raise TypeError(f"a Workflow takes Dependent declarations, got {type(dep).__name__}")
            if dep.name in by_name:
                raise ValueError(
                    f"two dependents are named {dep.name!r}: "
                    "give them different names (Dependent(..., name=...))"
                )
            by_name[dep.name] = dep
        types: dict[str, str] = {}
        for dep in dependents:
            unknown = [d for d in dep.depends_on if d not in by_name]
            if unknown:
                raise ValueError(
                    f"dependent {dep.name!r} depends on {', '.join(map(repr, unknown))}, which the workflow "
                    f"does not declare (it has: {', '.join(by_name)})"
                )
            if dep.condition in types:
                raise ValueError(
                    f"dependents {types[dep.condition]!r} and {dep.name!r} both report condition "
                    f"{dep.condition!r}: give one a condition= of its own"
                )
            types[dep.condition] = dep.name
        self._dependents = tuple(dependents)
        self._by_name = by_name
        self._order = _topological(self._dependents, by_name)
        self._conditions_of = {d.name: d.condition for d in self._order}
        self._uses_finalizer = any(d.deletion == "finalizer" and not d.read_only for d in dependents)
        self.finalizer = finalizer
        #: Whether the status gets the dependents' conditions and the aggregate (False: only what
        #: the reconcile function adds, for a primary whose conditions are its own).
        self.conditions = conditions

    @property
    def dependents(self) -> tuple[Dependent, ...]:
        """The dependents in dependency order (those depended on first)."""
        return self._order

    def __repr__(self) -> str:
        return f"Workflow({', '.join(d.name for d in self._order)})"

    @property
    def uses_finalizer(self) -> bool:
        """Whether a dependent is deleted by finalizer (the primary then carries :attr:`finalizer`)."""
        return self._uses_finalizer

    def owned_kinds(self) -> list[tuple[ResourceLike, bool]]:
        """Each written kind once, with whether its children are found by finalizer annotations
        (else by owner reference): the watches a controller of this workflow needs."""
        out: list[tuple[ResourceLike, bool]] = []
        for dep in self._order:
            key = (dep.kind, dep.deletion == "finalizer")
            if not dep.read_only and key not in out:
                out.append(key)
        return out

    # -- running -------------------------------------------------------------------------------
    async def reconcile(self, primary: Any, ctx: Any) -> WorkflowResult:
        """Reconcile every dependent of ``primary`` (the object as read; a model or a dict) and
        return the states, without writing the status (:meth:`WorkflowResult.write_status`).

        ``ctx`` is the reconcile's :class:`~kubeop.controller.Context` (its ``client`` the async
        reconciler client). While the primary is being deleted, only the finalizer's cleanup
        runs: nothing is created again.
        """
        primary_d = to_dict(primary)
        conditions_of = self._conditions_of
        if m.is_being_deleted(primary_d):
            result = WorkflowResult(
                {}, conditions_of, deleting=True, primary=primary, with_conditions=self.conditions
            )
            if self.uses_finalizer and m.has_finalizer(primary_d, self.finalizer):
                result.states = await self._delete(self._order, primary, primary_d, ctx)
                if not result.failed and not result.waiting_for_deletion:
                    await ctx.client.remove_finalizer(primary_d, self.finalizer)
            return result
        if self.uses_finalizer:
            await ctx.client.add_finalizer(primary_d, self.finalizer)
        states: dict[str, DependentState] = {}
        unwanted: set[str] = set()
        done: dict[str, asyncio.Future[None]] = {}
        claims: dict[tuple[str, str, str, str], str] = {}

        async def run(dep: Dependent) -> None:
            for name in dep.depends_on:
                await done[name]
            if any(name in unwanted for name in dep.depends_on):
                unwanted.add(dep.name)
                return
            try:
                wanted = await reconcile_wanted(dep, primary, ctx)
            except Exception as exc:  # reported as the dependent's failure: nothing deleted on it
                states[dep.name] = failed_state(dep.name, exc)
                return
            if not wanted:
                unwanted.add(dep.name)
                return
            waiting = [n for n in dep.depends_on if not states[n].ready]
            if waiting:
                states[dep.name] = DependentState(
                    dep.name, "waiting", message=f"waiting for {', '.join(waiting)}"
                )
                return
            states[dep.name] = await reconcile_dependent(dep, primary, primary_d, ctx, claims)

        if len(self._order) == 1:  # nothing to run beside it: no tasks
            await run(self._order[0])
        else:
            loop = asyncio.get_running_loop()
            for dep in self._order:
                done[dep.name] = loop.create_future()
            await asyncio.gather(*(asyncio.ensure_future(_then(run(d), done[d.name])) for d in self._order))
        if unwanted:
            states.update(
                await self._delete([d for d in self._order if d.name in unwanted], primary, primary_d, ctx)
            )
        return WorkflowResult(
            {d.name: states[d.name] for d in self._order},
            conditions_of,
            primary=primary,
            with_conditions=self.conditions,
        )

    async def _delete(
        self, deps: Sequence[Dependent], primary: Any, primary_d: dict[str, Any], ctx: Any
    ) -> dict[str, DependentState]:
        """Delete ``deps`` in reverse dependency order: each once those depending on it are gone."""
        names = {d.name for d in deps}
        states: dict[str, DependentState] = {}
        done: dict[str, asyncio.Future[None]] = {}
        loop = asyncio.get_running_loop()
        for dep in deps:
            done[dep.name] = loop.create_future()

        async def run(dep: Dependent) -> None:
            users = [d.name for d in deps if dep.name in d.depends_on and d.name in names]
            for name in users:
                await done[name]
            blocking = [n for n in users if states[n].phase != "deleted"]
            if blocking:
                states[dep.name] = DependentState(
                    dep.name, "deleting", message=f"waiting for {', '.join(blocking)} to be deleted"
                )
                return
            states[dep.name] = await delete_dependent(dep, primary, primary_d, ctx)

        await asyncio.gather(*(asyncio.ensure_future(_then(run(d), done[d.name])) for d in reversed(deps)))
        return states

    async def run(self, primary: Any, ctx: Any) -> WorkflowResult:
        """Reconcile, write the status, and raise :class:`DependentError` if a dependent failed:
        the whole workflow for a primary, from any reconcile function (``ctx.client`` must be a
        reconciler client)."""
        result = await self.reconcile(primary, ctx)
        if not result.deleting:
            await result.write_status(primary, ctx)
        result.raise_for_failures()
        return result

    def reconciler(self, kind: ResourceLike, then: Reconciler | None = None) -> Reconciler:
        """A controller's reconcile function for primaries of ``kind``: read the primary, run the
        workflow, then ``then(request, ctx)`` (async, or sync in a worker thread) with the result
        at ``ctx.dependents``, then the one status write."""
        is_async = then is None or inspect.iscoroutinefunction(then)

        async def reconcile(req: Request, ctx: Context) -> Result | None:
            primary = await ctx.client.get(kind, req.name, namespace=req.namespace)
            if primary is None:
                return await _call_reconciler(then, is_async, req, ctx)
            result = await self.reconcile(primary, ctx)
            ctx.dependents = result
            out = await _call_reconciler(then, is_async, req, ctx)
            if not result.deleting:
                await result.write_status(primary, ctx)
            result.raise_for_failures()
            if out is None and result.waiting_for_deletion:
                return Result(requeue_after=DELETE_RECHECK)
            return out

        reconcile.__qualname__ = reconcile.__name__ = f"reconcile_{_kind_name(kind)}_dependents"
        return reconcile


async def _call_reconciler(
    fn: Callable[..., Any] | None, is_async: bool, req: Request, ctx: Context
) -> Result | None:
    if fn is None:
        return None
    if is_async:
        return await fn(req, ctx)  # type: ignore[no-any-return]
    loop = asyncio.get_running_loop()
    sync_client: Any = SyncClient(ctx.client, loop)
    sync_ctx = Context(req, sync_client, ctx.recorder, ctx.controller, ctx.clock, ctx.kind)
    sync_ctx.dependents = ctx.dependents
    scope = contextvars.copy_context()
    out: Result | None = await loop.run_in_executor(None, scope.run, fn, req, sync_ctx)
    return out


async def _then(aw: Any, done: asyncio.Future[None]) -> None:
    try:
        await aw
    finally:
        if not done.done():
            done.set_result(None)


def _kind_name(kind: ResourceLike) -> str:
    text = getattr(kind, "kind", None) or getattr(kind, "__name__", None) or str(kind)
    return "".join(c if c.isalnum() else "_" for c in str(text)).lower()


def _topological(deps: Sequence[Dependent], by_name: Mapping[str, Dependent]) -> tuple[Dependent, ...]:
    """Dependencies first, in declaration order otherwise; a cycle is a ValueError naming it."""
    order: list[Dependent] = []
    state: dict[str, int] = {}  # 1: on the path, 2: placed

    def visit(dep: Dependent, path: list[str]) -> None:
        mark = state.get(dep.name)
        if mark == 2:
            return
        if mark == 1:
            cycle = [*path[path.index(dep.name) :], dep.name]
            raise ValueError(f"the dependents' depends_on form a cycle: {' -> '.join(cycle)}")
        state[dep.name] = 1
        for name in dep.depends_on:
            visit(by_name[name], [*path, dep.name])
        state[dep.name] = 2
        order.append(dep)

    for dep in deps:
        visit(dep, [])
    return tuple(order)
