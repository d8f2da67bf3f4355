"""The Helm reconciler: each custom resource is a Helm release of the watched chart, kept alive.

The release is named after the resource and lives in its namespace; its values are the
resource's ``spec`` with the watch's override values on top (:mod:`kubeop.helm.values`).

Flow of one reconcile:

1. Read the resource from the cache; gone: nothing to do. Being deleted: uninstall the release
   (``helm uninstall``) if it is the resource's, optionally wait until its objects are gone,
   remove the finalizer.
2. Read the release's revisions from the cache of Helm's storage. A release that is not this
   resource's (:mod:`kubeop.helm.ownership`: it records another owner, or none and was not made
   for this resource) is left untouched: ReleaseFailed (``ReleaseNotOwned``) and a Warning
   event, and nothing else happens. Revisions left ``pending-*`` by an interrupted helm process
   are deleted from storage (no helm process of ours is running for this release: one key is
   never reconciled twice at once). Add the finalizer.
3. No deployed revision: ``helm install`` (after ``helm uninstall`` of failed leftovers).
4. A deployed revision: when the inputs (values, chart, owner) changed since the last render, or
   the reconcile period has passed, render with ``helm upgrade --dry-run=server`` and compare
   manifest and values with the deployed revision; upgrade when they differ.
5. Otherwise make the release's objects match the deployed manifest from the cache (recreate
   what was deleted, revert edits; see :mod:`kubeop.helm.dependents`).
6. Write the status when it changed (:mod:`kubeop.helm.status`); come back after the reconcile
   period.

Guarantees:

- A steady state runs no helm process and sends no request, except one dry-run render per
  reconcile period (the check that catches what only rendering can see: ``lookup``, capabilities,
  a chart changed on disk).
- Every object the chart renders is created with a controller owner reference to the resource
  (:mod:`kubeop.helm.postrender`), unless it is cluster-scoped or in another namespace.
- Every revision the operator writes records the resource as its owner (release labels); a
  release that does not is never upgraded, rolled back, cleaned up or uninstalled.
- Nothing the operator publishes (status, conditions, events, logs) holds the values of the
  chart's Secrets (:mod:`kubeop.helm.redaction`).
- The cache is never trusted before it has seen the result of our own helm commands.

Errors:

- A chart that does not render (template error, ``required``, values schema) is a *deterministic*
  failure: ReleaseFailed with Helm's message, a Warning event, nothing installed or changed, and
  the same inputs are tried again only after the reconcile period (a spec change retries at once).
- A failure after Helm started writing (the server refused an object): a failed install is
  uninstalled, a failed upgrade is rolled back to the last deployed revision; ReleaseFailed is
  set and the reconcile raises, so it is retried with the controller's backoff (0.5 s doubling to
  5 min: each attempt costs helm processes).
- Failing to read storage or to restore objects sets Irreconcilable and is retried with backoff.

Annotations on the resource (operator-sdk's names):

- ``helm.sdk.operatorframework.io/upgrade-force: "true"``: upgrade with ``--force``;
- ``helm.sdk.operatorframework.io/rollback-force: "false"``: roll back without ``--force``;
- ``helm.sdk.operatorframework.io/uninstall-wait: "true"``: keep the finalizer until every
  object of the release is gone;
- ``helm.sdk.operatorframework.io/reconcile-period: 30s``: this resource's reconcile period
  (``0``: none). It is at least 10 s (:data:`MIN_RECONCILE_PERIOD`, or the operator's own
  period when that is shorter) and at most 7 days: a value outside is clamped, and one that is
  not a Go duration is ignored, each with a Warning event naming the annotation.

Caveats: a chart whose output changes on every render (``randAlphaNum``, ``now``,
``.Release.Revision``) is upgraded at every reconcile period, as with operator-sdk.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubeop.controller import Context, Controller, Predicate, Request, Result, Trigger, label_selector, or_
from kubeop.controller.predicate import AnnotationChanged, GenerationChanged
from kubeop.core import meta as m
from kubeop.core.gvk import GroupVersionKind
from kubeop.core.resource import ApiResource
from kubeop.core.yaml_input import load_yaml
from kubeop.helm.dependents import DependentWatches, Restored
from kubeop.helm.engine import HelmError
from kubeop.helm.manifest import (
    ManifestError,
    diff_manifests,
    manifest_kinds,
    manifests_equal,
    parse_manifest,
)
from kubeop.helm.ownership import OWNER_UID_LABEL, Claim, Ownership, owner_labels, release_ownership
from kubeop.helm.postrender import inject_owner_references, post_renderer_spec
from kubeop.helm.redaction import scrub, secret_values
from kubeop.helm.releases import Release
from kubeop.helm.runtime import HelmRuntime, storage_secret_name
from kubeop.helm.status import HelmStatus, Reason
from kubeop.helm.values import ValuesError, release_values
from kubeop.helm.watches import Watch, format_duration, parse_duration
from kubeop.queue import BucketRateLimiter, ItemExponentialFailureRateLimiter, MaxOfRateLimiter

__all__ = [
    "FINALIZER",
    "MAX_RECONCILE_PERIOD",
    "MIN_RECONCILE_PERIOD",
    "RECONCILE_PERIOD_ANNOTATION",
    "ROLLBACK_FORCE_ANNOTATION",
    "UNINSTALL_WAIT_ANNOTATION",
    "UPGRADE_FORCE_ANNOTATION",
    "HelmReconciler",
    "ReleaseError",
    "annotation_bool",
    "chart_digest",
    "chart_name",
    "period_from_annotation",
    "reconcile_period",
]

log = logging.getLogger("kubeop.helm")

FINALIZER = "helm.sdk.operatorframework.io/uninstall-release"
LEGACY_FINALIZER = "uninstall-helm-release"
UPGRADE_FORCE_ANNOTATION = "helm.sdk.operatorframework.io/upgrade-force"
ROLLBACK_FORCE_ANNOTATION = "helm.sdk.operatorframework.io/rollback-force"
UNINSTALL_WAIT_ANNOTATION = "helm.sdk.operatorframework.io/uninstall-wait"
RECONCILE_PERIOD_ANNOTATION = "helm.sdk.operatorframework.io/reconcile-period"
DEFAULT_RECONCILE_PERIOD = 60.0
MIN_RECONCILE_PERIOD = 10.0  # the shortest period the annotation may ask for (see period_from_annotation)
MAX_RECONCILE_PERIOD = 7 * 24 * 3600.0
_MAX_PERIOD_TEXT = 64
UNINSTALL_WAIT_POLL = 2.0

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


class ReleaseError(RuntimeError):
    """An install or upgrade failed after Helm had started changing the cluster (it was undone);
    raised so that the controller retries with backoff."""


def annotation_bool(obj: Mapping[str, Any], key: str, default: bool) -> bool:
    """A boolean annotation, parsed like Go's ``strconv.ParseBool``; unset or invalid: ``default``."""
    value = m.annotations(obj).get(key)
    if value is None:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    log.warning("annotation %s=%r is not a boolean; using %s", key, value, default)
    return default


def reconcile_period(obj: Mapping[str, Any], default: float) -> float:
    """The resource's reconcile period: its annotation (a Go duration) within the bounds of
    :func:`period_from_annotation`, else ``default``."""
    return period_from_annotation(obj, default)[0]


def period_from_annotation(obj: Mapping[str, Any], default: float) -> tuple[float, tuple[str, str] | None]:
    """The resource's reconcile period, and what to warn about it (an event's reason and note).

    Absent: ``default``. ``0``: no periodic check (as operator-sdk). Below the floor
    (:data:`MIN_RECONCILE_PERIOD`, or the operator's own period when that is shorter): the
    floor, with a warning; a resource's author must not make the operator render its chart
    more often than that. Above :data:`MAX_RECONCILE_PERIOD`: that, with a warning. Anything
    else that is not a Go duration (a negative one, spaces, line breaks, more than
    :data:`_MAX_PERIOD_TEXT` characters): ``default``, with a warning naming the accepted form.
    """
    value = m.annotations(obj).get(RECONCILE_PERIOD_ANNOTATION)
    if value is None:
        return default, None
    value = str(value)
    floor = min(MIN_RECONCILE_PERIOD, default) if default > 0 else MIN_RECONCILE_PERIOD
    shown = repr(value[:_MAX_PERIOD_TEXT]) + ("..." if len(value) > _MAX_PERIOD_TEXT else "")
    accepted = (
        f"a Go duration such as 30s, 5m or 1h30m, at least {format_duration(floor)} "
        f"(or 0 for no periodic check)"
    )
    try:
        if len(value) > _MAX_PERIOD_TEXT:
            raise ValueError(f"longer than {_MAX_PERIOD_TEXT} characters")
        if not value.isprintable() or any(c.isspace() for c in value):
            raise ValueError("it holds spaces, line breaks or control characters")
        seconds = parse_duration(value)
    except ValueError as e:
        return default, (
            "InvalidReconcilePeriod",
            f"annotation {RECONCILE_PERIOD_ANNOTATION}={shown} is not valid ({e}); use {accepted}. "
            f"Using the operator's period, {format_duration(default)}.",
        )
    if seconds == 0:
        return 0.0, None
    if seconds < floor:
        return floor, (
            "ReconcilePeriodClamped",
            f"annotation {RECONCILE_PERIOD_ANNOTATION}={shown} is below the minimum of "
            f"{format_duration(floor)}; using {format_duration(floor)}",
        )
    if seconds > MAX_RECONCILE_PERIOD:
        return MAX_RECONCILE_PERIOD, (
            "ReconcilePeriodClamped",
            f"annotation {RECONCILE_PERIOD_ANNOTATION}={shown} is above the maximum of "
            f"{format_duration(MAX_RECONCILE_PERIOD)} (use 0 for no periodic check); "
            f"using {format_duration(MAX_RECONCILE_PERIOD)}",
        )
    return seconds, None


def chart_digest(chart: str | os.PathLike[str]) -> str:
    """A digest of every file of a chart directory (paths and contents)."""
    root = Path(chart)
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def _deletion_started(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    return bool(m.is_being_deleted(new)) and not m.is_being_deleted(old)


# The primary watch ignores our own status and finalizer writes: only spec (generation),
# annotations (the ones above) and the start of a deletion bring a resource back.
PRIMARY_PREDICATE = or_(GenerationChanged, AnnotationChanged, Predicate(update=_deletion_started))


def in_namespace(namespace: str) -> Predicate:
    """Only objects in ``namespace``."""

    def match(obj: Mapping[str, Any]) -> bool:
        return bool(m.namespace(obj) == namespace)

    return Predicate(create=match, update=lambda old, new: match(new), delete=match, generic=match)


def helm_rate_limiter() -> MaxOfRateLimiter[Request]:
    """Retries of failed reconciles: 0.5 s doubling to 5 min per resource (each attempt runs helm
    processes), and the usual 10 qps / burst 100 overall."""
    return MaxOfRateLimiter(ItemExponentialFailureRateLimiter(0.5, 300.0), BucketRateLimiter(10.0, 100))


@dataclass
class _Memo:
    """The last render of one resource: for which inputs, against which deployed revision, when,
    and the error if it failed."""

    inputs: str
    version: int
    rendered_at: float
    failure: str | None = None


@dataclass
class _Failure:
    """A failure after Helm started writing (retried with backoff while the inputs stay)."""

    inputs: str
    count: int
    until: float


FAILURE_BACKOFF = (0.5, 300.0)  # first delay, cap (doubling)


class HelmReconciler:
    """Reconciles one kind (one watches.yaml entry); see the module docstring.

    Args:
        watch: the watches.yaml entry.
        runtime: what the controllers of one operator share (engine, release cache).
        reconcile_period: used when the entry sets none (seconds; 0: no periodic check).
        max_concurrent_reconciles: used when the entry sets none (default: the number of CPUs).
    """

    def __init__(
        self,
        watch: Watch,
        runtime: HelmRuntime,
        *,
        reconcile_period: float = DEFAULT_RECONCILE_PERIOD,
        max_concurrent_reconciles: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.watch = watch
        self.runtime = runtime
        self.gvk = GroupVersionKind(watch.group, watch.version, watch.kind)
        self.reconcile_period = (
            watch.reconcile_period if watch.reconcile_period is not None else reconcile_period
        )
        self.workers = watch.max_concurrent_reconciles or max_concurrent_reconciles or os.cpu_count() or 1
        self.chart = watch.chart
        self._chart_digest = chart_digest(watch.chart)
        self._chart_name = chart_name(watch.chart)
        self._clock = clock
        self._memo: dict[Request, _Memo] = {}
        self._ours: dict[Request, int] = {}
        self._failures: dict[Request, _Failure] = {}
        self._controller: Controller | None = None
        self._trigger = Trigger()  # release storage and dependent resources enqueue through it
        self._dependents: DependentWatches | None = None
        self._resource: ApiResource | None = None

    @property
    def name(self) -> str:
        """The controller's name: ``<kind>-controller``, as operator-sdk names it."""
        return f"{self.watch.kind.lower()}-controller"

    def controller(self) -> Controller:
        """The controller to add to a manager (built once)."""
        if self._controller is None:
            self._controller = (
                Controller.for_(self.gvk, *self._primary_predicates(), namespace=self.runtime.namespace)
                .named(self.name)
                .max_concurrent(self.workers)
                .with_rate_limiter(helm_rate_limiter)
                .triggered_by(self._trigger)
                .reconcile(self.reconcile)
            )
        return self._controller

    def _primary_predicates(self) -> list[Predicate]:
        """The primary watch's filters: our own writes do not come back, and the watch's label
        selector is a predicate (as operator-sdk applies it), so the reads of the manager's
        cached client and the events come from the same informer. The namespace limits the
        informer itself (operator-sdk's WATCH_NAMESPACE: a namespaced cache)."""
        return [PRIMARY_PREDICATE, *self._selection]

    @property
    def _selection(self) -> list[Predicate]:
        """Which resources are this operator's: in its namespace, and matching the selector."""
        out = []
        if self.runtime.namespace:
            out.append(in_namespace(self.runtime.namespace))
        if self.watch.label_selector:
            out.append(label_selector(self.watch.label_selector))
        return out

    def _selects(self, cr: Mapping[str, Any]) -> bool:
        return all(p.create(cr) for p in self._selection)

    def _enqueue(self, request: Request) -> None:
        self._trigger(request)

    # -- reconcile ------------------------------------------------------------------------------

    async def reconcile(self, req: Request, ctx: Context) -> Result | None:
        """Bring one custom resource's release in step: install, upgrade, restore or uninstall it, and write
        the status.
        """
        cr = await ctx.client.get(self.gvk, req.name, namespace=req.namespace or None)
        if cr is not None and not self._selects(cr):
            cr = None  # brought here by a release or object event, but not ours to manage
        if cr is None:
            self._memo.pop(req, None)
            self._ours.pop(req, None)
            self._failures.pop(req, None)
            return None
        await self._ready(ctx)
        period, problem = period_from_annotation(cr, self.reconcile_period)
        status = HelmStatus(cr)
        if m.is_being_deleted(cr):
            return await self._uninstall(req, cr, status, ctx, period)
        if problem is not None:
            reason, note = problem
            _log(ctx).warning("%s", note)
            ctx.recorder.event(cr, "Warning", reason, _short(note))
        status.initialized()
        releases = self.runtime.releases
        try:
            history = releases.history(req.namespace, req.name)
            ownership = release_ownership(history, cr, self._chart_name)
            if ownership.claim is Claim.FOREIGN:
                return await self._refuse(req, cr, status, ctx, ownership, period)
            stale = _stale_revisions(history)
            if stale:
                self._claim(req, max(self._ours.get(req, 0), *(r.version for r in history)))
                await self.runtime.drop_revisions(ctx.client.api, req.namespace, stale)
                dropped = {r.version for r in stale}
                await releases.wait_for(
                    req.namespace, req.name, lambda h: not any(r.version in dropped for r in h)
                )
                history = releases.history(req.namespace, req.name)
        except Exception as e:
            status.irreconcilable(f"cannot read the release's storage: {e}")
            await self._write_status(ctx, cr, status)
            raise
        try:
            values = release_values(cr.get("spec"), self.watch.override_values)
        except ValuesError as e:
            status.release_failed(Reason.INSTALL_ERROR, str(e))
            await self._write_status(ctx, cr, status)
            return self._requeue(period)
        if not m.has_finalizer(cr, FINALIZER) and not m.has_finalizer(cr, LEGACY_FINALIZER):
            await ctx.client.add_finalizer(cr, FINALIZER)
        deployed = next((r for r in reversed(history) if r.deployed), None)
        inputs = self._inputs(cr, values)
        failure = self._failures.get(req)
        if failure is not None and failure.inputs == inputs and failure.until > self._clock():
            # The last install or upgrade of these inputs failed moments ago. Whatever brought
            # the resource back (the rollback's own changes to its objects, say) waits for the
            # backoff: the retries are paced here, not only by the work queue.
            await self._write_status(ctx, cr, status)
            return Result(requeue_after=failure.until - self._clock())
        if deployed is None:
            return await self._install(req, cr, status, ctx, values, history, inputs, period)
        adopt = ownership.claim is Claim.LEGACY
        return await self._sync(req, cr, status, ctx, values, deployed, inputs, period, adopt=adopt)

    async def _ready(self, ctx: Context) -> None:
        await self.runtime.ready(ctx.client)
        if self._dependents is None:
            self._resource = await ctx.client.resource(self.gvk)
            self._dependents = DependentWatches(
                ctx.client.cache,
                ctx.client.api,
                self.watch.group,
                self.watch.kind,
                self._enqueue if self.watch.watch_dependent_resources else None,
                namespace=self.runtime.namespace,
            )
            self.runtime.releases.subscribe(self._on_release_change)

    def _on_release_change(self, namespace: str, name: str, revision: int) -> None:
        """Someone changed a release's storage: reconcile, unless the revision is one our own
        helm commands wrote (those must not bring the resource back at once: a failing upgrade
        and its rollback would retry in a loop, around the controller's backoff)."""
        req = Request(namespace, name)
        if revision <= self._ours.get(req, 0):
            return
        self._enqueue(req)

    def _failed(self, req: Request, inputs: str) -> None:
        previous = self._failures.get(req)
        count = previous.count + 1 if previous is not None and previous.inputs == inputs else 1
        first, cap = FAILURE_BACKOFF
        self._failures[req] = _Failure(inputs, count, self._clock() + min(first * 2 ** (count - 1), cap))

    def _claim(self, req: Request, revision: int) -> None:
        """Revisions up to ``revision`` of the release are (or are about to be) our own writes."""
        self._ours[req] = revision

    def _inputs(self, cr: Mapping[str, Any], values: Mapping[str, Any]) -> str:
        doc = {"values": values, "uid": m.uid(cr), "chart": self._chart_digest}
        return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()

    def _requeue(self, period: float, after: float | None = None) -> Result:
        if period <= 0:
            return Result()
        return Result(requeue_after=max(after if after is not None else period, 1.0))

    async def _post_renderer(
        self, cr: Mapping[str, Any], ctx: Context
    ) -> tuple[str, dict[str, Any], frozenset[str]]:
        owner = {"apiVersion": cr["apiVersion"], "kind": cr["kind"], "name": m.name(cr), "uid": m.uid(cr)}
        kinds = await self.runtime.namespaced_kinds(ctx.client.api)
        return post_renderer_spec(owner, m.namespace(cr), kinds), owner, kinds

    def _scrub(self, req: Request, text: str, *manifests: str) -> str:
        """``text`` (a message from Helm, the server or the chart) without the values of the
        Secrets of ``manifests`` and of every stored revision of the release."""
        history = self.runtime.releases.history(req.namespace, req.name)
        return scrub(text, secret_values([*manifests, *(r.manifest for r in history)]))

    async def _refuse(
        self,
        req: Request,
        cr: Mapping[str, Any],
        status: HelmStatus,
        ctx: Context,
        ownership: Ownership,
        period: float,
    ) -> Result:
        """A release of this name exists and is not this resource's: touch nothing of it, say so
        on the resource (condition and Warning event) with what would fix it."""
        message = _not_owned_message(req, cr, ownership)
        _log(ctx).warning("%s", message)
        ctx.recorder.event(cr, "Warning", Reason.RELEASE_NOT_OWNED, _short(message))
        status.not_owned(message)
        self._memo.pop(req, None)
        await self._write_status(ctx, cr, status)
        # The release's storage changing (uninstalled, relabelled) brings the resource back.
        return self._requeue(period)

    # -- install --------------------------------------------------------------------------------

    async def _install(
        self,
        req: Request,
        cr: Mapping[str, Any],
        status: HelmStatus,
        ctx: Context,
        values: Mapping[str, Any],
        history: list[Release],
        inputs: str,
        period: float,
    ) -> Result:
        now = self._clock()
        memo = self._memo.get(req)
        if memo is not None and memo.failure and memo.inputs == inputs and memo.version == 0:
            wait = memo.rendered_at + period - now
            if period <= 0 or wait > 0:
                await self._write_status(ctx, cr, status)
                return self._requeue(period, wait)
        helm, releases = self.runtime.helm, self.runtime.releases
        # Cleaning up, installing (revision 1) and, on failure, uninstalling again.
        self._claim(req, max((r.version for r in history), default=0) + 2)
        if history:
            # Revisions but none deployed: failed attempts (ours: the caller checked). Start from
            # a clean slate, as operator-sdk does, so the install is an install (and leftovers
            # are removed).
            try:
                await helm.uninstall(req.name, req.namespace)
            except HelmError as e:
                message = self._scrub(req, e.message)
                status.release_failed(Reason.INSTALL_ERROR, f"removing failed revisions: {message}")
                await self._write_status(ctx, cr, status)
                raise ReleaseError(f"removing failed revisions failed: {_short(message, 300)}") from None
            await releases.wait_for(req.namespace, req.name, lambda h: not h)
        spec, _, _ = await self._post_renderer(cr, ctx)
        self._warn_overrides(cr, ctx)
        try:
            rel = await helm.install(
                req.name, req.namespace, self.chart, values, post_renderer=spec, labels=owner_labels(cr)
            )
        except HelmError as e:
            stored = await self.runtime.stored_releases(ctx.client.api, req.namespace, req.name)
            message = self._scrub(req, e.message, *(r.manifest for r in stored))
            status.release_failed(Reason.INSTALL_ERROR, message)
            ctx.recorder.event(cr, "Warning", Reason.INSTALL_ERROR, _short(message))
            # What this install recorded carries the owner mark; a release someone else made
            # under this name in the meantime ("cannot re-use a name") does not, and stays.
            ownership = release_ownership(stored, cr, self._chart_name)
            if ownership.claim is Claim.FOREIGN:
                return await self._refuse(req, cr, status, ctx, ownership, period)
            if stored:
                _log(ctx).error("install failed; uninstalling what it created: %s", message)
                try:
                    await helm.uninstall(req.name, req.namespace)
                except HelmError as ue:
                    _log(ctx).error(
                        "uninstall after the failed install failed too: %s",
                        self._scrub(req, ue.message, *(r.manifest for r in stored)),
                    )
                await self._write_status(ctx, cr, status)
                self._memo.pop(req, None)
                self._failed(req, inputs)
                raise ReleaseError(f"install failed: {_short(message, 300)}") from None
            _log(ctx).error(
                "install failed (the chart did not render; retried after %.0f s): %s", period, message
            )
            self._memo[req] = _Memo(inputs, 0, now, failure=message)
            await self._write_status(ctx, cr, status)
            return self._requeue(period)
        await releases.wait_for(req.namespace, req.name, lambda h: any(r.version >= rel.version for r in h))
        self._claim(req, rel.version)
        self._failures.pop(req, None)
        _log(ctx).info("installed release %s (revision %d)", rel.name, rel.version)
        ctx.recorder.event(cr, "Normal", Reason.INSTALL_SUCCESSFUL, f"installed release {rel.name}")
        status.deployed(rel.name, rel.manifest, reason=Reason.INSTALL_SUCCESSFUL, notes=rel.notes)
        status.reconciled()
        self._memo[req] = _Memo(inputs, rel.version, now)
        await self._watch_dependents(rel.manifest, ctx)
        await self._write_status(ctx, cr, status)
        return self._requeue(period)

    # -- upgrade, or keep the objects as deployed ------------------------------------------------

    async def _sync(
        self,
        req: Request,
        cr: Mapping[str, Any],
        status: HelmStatus,
        ctx: Context,
        values: Mapping[str, Any],
        deployed: Release,
        inputs: str,
        period: float,
        *,
        adopt: bool = False,
    ) -> Result:
        now = self._clock()
        if adopt:
            # Made by this operator for this resource before it recorded owners: upgrade it
            # now, which records the owner (see kubeop.helm.ownership).
            spec, _, _ = await self._post_renderer(cr, ctx)
            _log(ctx).info(
                "release %s was made for this resource before owners were recorded; recording it", req.name
            )
            return await self._upgrade(
                req, cr, status, ctx, values, deployed, inputs, period, spec, adopting=True
            )
        memo = self._memo.get(req)
        same = memo is not None and memo.inputs == inputs and memo.version == deployed.version
        # Due: the inputs changed (or were never rendered by this process), or the reconcile
        # period has passed since the last render (within a second: requeues are not exact).
        due = not same or (period > 0 and memo is not None and now - memo.rendered_at >= period - 1.0)
        if not due and memo is not None and memo.failure:
            await self._write_status(ctx, cr, status)
            return self._requeue(period, memo.rendered_at + period - now)
        helm = self.runtime.helm
        upgrade = False
        if due:
            spec, owner, kinds = await self._post_renderer(cr, ctx)
            try:
                candidate = await helm.upgrade(req.name, req.namespace, self.chart, values, dry_run=True)
            except HelmError as e:
                message = self._scrub(req, e.message)
                _log(ctx).error(
                    "upgrade failed (the chart did not render; retried after %.0f s): %s", period, message
                )
                ctx.recorder.event(cr, "Warning", Reason.UPGRADE_ERROR, _short(message))
                status.release_failed(Reason.UPGRADE_ERROR, message)
                self._memo[req] = _Memo(inputs, deployed.version, now, failure=message)
                await self._write_status(ctx, cr, status)
                return self._requeue(period)
            expected = inject_owner_references(candidate.manifest, owner, req.namespace, kinds)
            try:
                upgrade = not manifests_equal(expected, deployed.manifest) or dict(values) != dict(
                    deployed.config
                )
            except ManifestError:
                upgrade = True
            self._memo[req] = _Memo(inputs, deployed.version, now)
            if upgrade:
                return await self._upgrade(
                    req, cr, status, ctx, values, deployed, inputs, period, spec, rendered=candidate.manifest
                )
        status.release_ok()
        try:
            restored = await self._restore(deployed, ctx)
        except Exception as e:
            message = self._scrub(req, f"{type(e).__name__}: {e}", deployed.manifest)
            status.irreconcilable(message)
            await self._write_status(ctx, cr, status)
            raise ReleaseError(f"restoring the release's objects failed: {_short(message, 300)}") from None
        status.reconciled()
        if restored:
            note = "; ".join(str(r) for r in restored)
            _log(ctx).info("release %s: %s", req.name, note)
            ctx.recorder.event(cr, "Normal", "Reconciled", _short(note))
        reason = Reason.INSTALL_SUCCESSFUL if deployed.version == 1 else Reason.UPGRADE_SUCCESSFUL
        status.deployed(deployed.name, deployed.manifest, reason=reason, notes=deployed.notes)
        await self._write_status(ctx, cr, status)
        memo = self._memo[req]
        return self._requeue(period, memo.rendered_at + period - self._clock())

    async def _upgrade(
        self,
        req: Request,
        cr: Mapping[str, Any],
        status: HelmStatus,
        ctx: Context,
        values: Mapping[str, Any],
        deployed: Release,
        inputs: str,
        period: float,
        spec: str,
        *,
        rendered: str = "",
        adopting: bool = False,
    ) -> Result:
        helm, releases = self.runtime.helm, self.runtime.releases
        force = annotation_bool(cr, UPGRADE_FORCE_ANNOTATION, False)
        self._warn_overrides(cr, ctx)
        latest = max((r.version for r in releases.history(req.namespace, req.name)), default=deployed.version)
        self._claim(req, latest + 2)  # the new revision, and a rollback's if it fails
        try:
            rel = await helm.upgrade(
                req.name,
                req.namespace,
                self.chart,
                values,
                force=force,
                post_renderer=spec,
                labels=owner_labels(cr),
            )
        except HelmError as e:
            self._memo.pop(req, None)
            stored = await self.runtime.stored_releases(ctx.client.api, req.namespace, req.name)
            manifests = [rendered, *(r.manifest for r in stored)]
            message = self._scrub(req, e.message, *manifests)
            if any(r.version > deployed.version for r in stored):
                rollback_force = annotation_bool(cr, ROLLBACK_FORCE_ANNOTATION, True)
                try:
                    await helm.rollback(req.name, req.namespace, deployed.version, force=rollback_force)
                    _log(ctx).error(
                        "upgrade failed, rolled back to revision %d: %s", deployed.version, message
                    )
                except HelmError as re:
                    again = self._scrub(req, re.message, *manifests)
                    message = f"{message} (rollback to revision {deployed.version} failed too: {again})"
                    _log(ctx).error("upgrade failed and so did the rollback: %s", message)
            status.release_failed(Reason.UPGRADE_ERROR, message)
            ctx.recorder.event(cr, "Warning", Reason.UPGRADE_ERROR, _short(message))
            await self._write_status(ctx, cr, status)
            self._failed(req, inputs)
            raise ReleaseError(f"upgrade failed: {_short(message, 300)}") from None
        await releases.wait_for(req.namespace, req.name, lambda h: any(r.version >= rel.version for r in h))
        self._claim(req, rel.version)
        self._failures.pop(req, None)
        change = diff_manifests(deployed.manifest, rel.manifest).summary()
        _log(ctx).info("upgraded release %s to revision %d (%s)", rel.name, rel.version, change)
        if adopting:
            ctx.recorder.event(
                cr,
                "Normal",
                "ReleaseAdopted",
                f"recorded this resource as the owner of release {rel.name}, made for it before "
                "owners were recorded",
            )
        ctx.recorder.event(
            cr,
            "Normal",
            Reason.UPGRADE_SUCCESSFUL,
            _short(f"upgraded release {rel.name} to revision {rel.version}: {change}"),
        )
        status.deployed(rel.name, rel.manifest, reason=Reason.UPGRADE_SUCCESSFUL, notes=rel.notes)
        status.reconciled()
        self._memo[req] = _Memo(inputs, rel.version, self._clock())
        await self._watch_dependents(rel.manifest, ctx)
        await self._write_status(ctx, cr, status)
        return self._requeue(period)

    async def _resolve(self, manifest: str, ctx: Context) -> list[tuple[ApiResource, dict[str, Any]]]:
        objects = parse_manifest(manifest)
        resources: dict[tuple[str, str], ApiResource] = {}
        for api_version, kind in manifest_kinds(objects):
            resources[(api_version, kind)] = await ctx.client.resource(
                GroupVersionKind.from_api_version(api_version, kind)
            )
        return [
            (resources[(o["apiVersion"], o["kind"])], o)
            for o in objects
            if (o.get("apiVersion"), o.get("kind")) in resources
        ]

    async def _watch_dependents(
        self, manifest: str, ctx: Context
    ) -> list[tuple[ApiResource, dict[str, Any]]]:
        assert self._dependents is not None
        pairs = await self._resolve(manifest, ctx)
        await self._dependents.watch(res for res, _ in pairs)
        return pairs

    async def _restore(self, deployed: Release, ctx: Context) -> list[Restored]:
        assert self._dependents is not None
        pairs = await self._watch_dependents(deployed.manifest, ctx)
        return await self._dependents.restore(pairs, deployed.name, deployed.namespace)

    # -- uninstall ------------------------------------------------------------------------------

    async def _uninstall(
        self, req: Request, cr: Mapping[str, Any], status: HelmStatus, ctx: Context, period: float
    ) -> Result | None:
        if not m.has_finalizer(cr, FINALIZER) and not m.has_finalizer(cr, LEGACY_FINALIZER):
            return None
        helm, releases = self.runtime.helm, self.runtime.releases
        wait = annotation_bool(cr, UNINSTALL_WAIT_ANNOTATION, False)
        history = releases.history(req.namespace, req.name)
        ownership = release_ownership(history, cr, self._chart_name)
        if ownership.claim is Claim.FOREIGN:
            # Not this resource's release: it stays installed, and the resource goes.
            message = f"{_not_owned_message(req, cr, ownership)} It was not uninstalled."
            _log(ctx).warning("%s", message)
            ctx.recorder.event(cr, "Warning", Reason.RELEASE_NOT_OWNED, _short(message))
            status.not_owned(message)
            wait = False
        elif history:
            self._claim(req, max(r.version for r in history))
            try:
                await helm.uninstall(req.name, req.namespace)
            except HelmError as e:
                # Someone else (a namespace being deleted, a person) may have removed the release
                # while Helm was at it: gone is what we wanted.
                message = self._scrub(req, e.message)
                if await self.runtime.stored_versions(ctx.client.api, req.namespace, req.name):
                    status.release_failed(Reason.UNINSTALL_ERROR, message)
                    ctx.recorder.event(cr, "Warning", Reason.UNINSTALL_ERROR, _short(message))
                    await self._write_status(ctx, cr, status)
                    raise ReleaseError(f"uninstall failed: {_short(message, 300)}") from None
                _log(ctx).warning("uninstall reported %s, but the release is gone", message)
            await releases.wait_for(req.namespace, req.name, lambda h: not h)
            _log(ctx).info("uninstalled release %s", req.name)
            ctx.recorder.event(cr, "Normal", Reason.UNINSTALL_SUCCESSFUL, f"uninstalled release {req.name}")
        manifest = (status.deployed_release or {}).get("manifest") or ""
        if wait and manifest:
            status.uninstalled(waiting=True)
            remaining = await self._remaining(manifest, req.namespace, ctx)
            if remaining:
                await self._write_status(ctx, cr, status)
                _log(ctx).info("waiting for %d objects of release %s to be deleted", len(remaining), req.name)
                return Result(requeue_after=UNINSTALL_WAIT_POLL)
        if ownership.claim is not Claim.FOREIGN:
            status.uninstalled()
        await self._write_status(ctx, cr, status)
        for finalizer in (FINALIZER, LEGACY_FINALIZER):
            if m.has_finalizer(cr, finalizer):
                await ctx.client.remove_finalizer(cr, finalizer)
                cr = await ctx.client.get(self.gvk, req.name, namespace=req.namespace or None) or cr
        self._memo.pop(req, None)
        return None

    async def _remaining(self, manifest: str, namespace: str, ctx: Context) -> list[str]:
        """Objects of ``manifest`` that still exist (asked from the server, not the cache)."""
        out = []
        for res, obj in await self._resolve(manifest, ctx):
            md = obj.get("metadata") or {}
            ns = (md.get("namespace") or namespace) if res.namespaced else None
            if await ctx.client.api.get_or_none(res, md.get("name") or "", namespace=ns) is not None:
                out.append(f"{res.kind} {md.get('name')}")
        return out

    # -- helpers --------------------------------------------------------------------------------

    async def _write_status(self, ctx: Context, cr: Mapping[str, Any], status: HelmStatus) -> None:
        await ctx.client.patch_status(cr, status.to_dict())

    def _warn_overrides(self, cr: Mapping[str, Any], ctx: Context) -> None:
        if self.watch.override_values:
            keys = ", ".join(sorted(self.watch.override_values))
            ctx.recorder.event(
                cr,
                "Warning",
                "OverrideValuesInUse",
                f"chart values overridden by the operator's watches.yaml: {keys}",
            )


def _log(ctx: Context) -> logging.LoggerAdapter[logging.Logger]:
    """The reconcile's log fields (controller, kind, object, reconcile id) on the helm logger,
    plus the release it is about."""
    return logging.LoggerAdapter(log, {**ctx.log_fields(), "release": ctx.request.name})


def _stale_revisions(history: list[Release]) -> list[Release]:
    """Revisions left pending by a helm process that died (newer than the last deployed one)."""
    last_deployed = max((r.version for r in history if r.deployed), default=0)
    return [r for r in history if r.pending and r.version > last_deployed]


def chart_name(chart: str | os.PathLike[str]) -> str:
    """The name in a chart directory's Chart.yaml (what Helm records as the release's chart)."""
    path = Path(chart) / "Chart.yaml"
    try:
        doc = load_yaml(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise ValueError(f"{path}: cannot read the chart's name: {e}") from None
    name = doc.get("name") if isinstance(doc, dict) else None
    if not isinstance(name, str) or not name:
        raise ValueError(f"{path}: the chart has no name")
    return name


def _not_owned_message(req: Request, cr: Mapping[str, Any], ownership: Ownership) -> str:
    kind = str(cr.get("kind") or "resource")
    secret = storage_secret_name(req.name, ownership.revision)
    return (
        f"Helm release {req.name} in namespace {req.namespace} is not this {kind}'s: {ownership.why}. "
        f"The operator leaves it untouched. To fix: give this {kind} another name, or remove the "
        f"release (helm uninstall {req.name} -n {req.namespace}); if the release is meant to be this "
        f"{kind}'s, whoever controls it can hand it over: kubectl label secret -n {req.namespace} "
        f"{secret} --overwrite {OWNER_UID_LABEL}={m.uid(cr)}"
    )


def _short(text: str, limit: int = 1000) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
