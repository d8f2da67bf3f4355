"""kopf's decorators: ``@kopf.on.create('kopfexamples.kopf.dev')`` and friends.

Each registers a handler in the default registry (or ``registry=``) and returns the function
unchanged. A keyword the decorator does not know, a malformed ``field=``, or ``value=`` without
``field=`` is a ``TypeError``/``ValueError`` at import time naming the handler.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from kubeop.kopf.activities import Activity, ActivityHandler
from kubeop.kopf.diffs import parse_field
from kubeop.kopf.fields import missing_part
from kubeop.kopf.handlers import ChangingHandler, ErrorsMode, Filter, Reason
from kubeop.kopf.registry import Registry, default_registry, handler_id
from kubeop.kopf.selectors import Selector, selector_key
from kubeop.kopf.spawning import SpawningHandler
from kubeop.kopf.watching import WatchingHandler

__all__ = [
    "cleanup",
    "create",
    "daemon",
    "delete",
    "event",
    "field",
    "login",
    "mutate",
    "probe",
    "resume",
    "startup",
    "timer",
    "update",
    "validate",
]

# How kopf.on behaves on kubeop where it is not as in kopf (read by scripts/kopf_compat.py into the
# compatibility table of docs/migration/from-kopf.md).
_DIFFERS = {
    "on": "`@kopf.on.validate`/`@kopf.on.mutate`: the webhook configurations written for "
    "`settings.admission.managed` accept AdmissionReview v1 only (kopf also lists v1beta1). "
    "kubeop's extension: the change and event handlers, daemons and timers also get a `cluster` "
    "kwarg, the name of the cluster the object lives in when they run in a `kubeop.fleet.Fleet` "
    "(one run per cluster, memos, indices and daemons per cluster, a disengaged cluster's daemons "
    'stopped), `""` on one cluster; admission handlers do not run in a fleet.',
}

F = TypeVar("F", bound=Callable[..., Any])
_SELECTOR = ("group", "version", "kind", "plural", "singular", "shortcut", "category", "any_name")
_COMMON = (
    *_SELECTOR,
    "id",
    "param",
    "errors",
    "timeout",
    "retries",
    "backoff",
    "labels",
    "annotations",
    "when",
    "field",
    "value",
    "registry",
)


def _register(
    decorator: str,
    args: tuple[Any, ...],
    options: dict[str, Any],
    allowed: tuple[str, ...],
    reason: Reason | None,
    **flags: Any,
) -> Callable[[F], F]:
    def register(fn: F) -> F:
        name = decorator if decorator in ("index", "subhandler") else f"on.{decorator}"
        where = f"@kopf.{name} of {getattr(fn, '__qualname__', fn)!r}"
        unknown = sorted(set(options) - set(allowed))
        if unknown:
            raise TypeError(
                f"{where}: unknown argument(s) {', '.join(unknown)}; it takes {', '.join(allowed)}"
            )
        try:
            path = parse_field(options.get("field"))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        for name in ("value", "old", "new"):
            if options.get(name) is not None and not path:
                raise TypeError(f"{where}: {name}= filters a field; also give field='spec.x'")
        for name in ("labels", "annotations"):
            if options.get(name) is not None and not isinstance(options[name], Mapping):
                raise TypeError(
                    f"{where}: {name}= is a mapping of key -> value/kopf.PRESENT/kopf.ABSENT/callable"
                )
        when = options.get("when")
        if when is not None and not callable(when):
            raise TypeError(f"{where}: when= is a callable(**kwargs) -> bool, got {type(when).__name__}")
        errors = options.get("errors") or ErrorsMode.TEMPORARY
        if not isinstance(errors, ErrorsMode):
            raise TypeError(f"{where}: errors= is a kopf.ErrorsMode, got {errors!r}")
        retries, backoff = options.get("retries"), options.get("backoff")
        if retries is not None and (not isinstance(retries, int) or retries < 0):
            raise ValueError(f"{where}: retries= is a whole number >= 0, got {retries!r}")
        if backoff is not None and backoff < 0:
            raise ValueError(f"{where}: backoff= is seconds >= 0, got {backoff!r}")
        try:
            resource = selector_key(Selector(*args, **{k: options.get(k) for k in _SELECTOR}))
        except TypeError as exc:
            raise TypeError(f"{where}: {exc}") from None
        missing = missing_part(resource, path)
        if missing is not None:
            raise ValueError(f"{where}: field {'.'.join(path)!r} does not exist: {resource} has no {missing}")
        given = options.get("registry")
        registry: Registry = given if isinstance(given, Registry) else default_registry()
        common: dict[str, Any] = {
            "fn": fn,
            "id": handler_id(fn, options.get("id"), path),
            "resource": resource,
            "field": path,
            "value": options.get("value"),
            "labels": options.get("labels"),
            "annotations": options.get("annotations"),
            "when": when,
            "errors": errors,
            "timeout": options.get("timeout"),
            "retries": retries,
            "backoff": None if backoff is None else float(backoff),
            "param": options.get("param"),
        }
        if decorator == "event":
            for k in ("errors", "timeout", "retries", "backoff"):
                del common[k]
            registry.add(WatchingHandler(**common))
        elif decorator in ("daemon", "timer"):
            spawning = {k: options[k] for k in _SPAWNING if options.get(k) is not None}
            for k, v in spawning.items():
                if k != "sharp" and (not isinstance(v, int | float) or v < 0):
                    raise ValueError(f"{where}: {k}= is seconds >= 0, got {v!r}")
            registry.add(SpawningHandler(kind=decorator, **common, **spawning))
        else:
            registry.add(
                ChangingHandler(
                    reason=reason, old=options.get("old"), new=options.get("new"), **common, **flags
                )
            )
        return fn

    return register


_SPAWNING = ("initial_delay", "interval", "idle", "sharp", "cancellation_backoff", "cancellation_timeout")


def daemon(*args: Any, **options: Any) -> Callable[[F], F]:
    """Run alongside each object from its creation (or the operator's start) to its deletion; the
    ``stopped`` kwarg turns true when it should exit (see :mod:`kubeop.kopf.spawning`)."""
    allowed = (
        *_COMMON,
        "initial_delay",
        "cancellation_backoff",
        "cancellation_timeout",
        "cancellation_polling",
    )
    options.pop("cancellation_polling", None)  # kubeop waits for a thread's exit without polling
    return _register("daemon", args, options, allowed, None)


def timer(*args: Any, interval: float | None = None, **options: Any) -> Callable[[F], F]:
    """Run every ``interval`` seconds for each object (``idle=``: once unchanged for that long)."""
    if interval is None:
        raise TypeError("@kopf.timer needs interval= (seconds between calls)")
    options["interval"] = interval
    return _register("timer", args, options, (*_COMMON, "interval", "initial_delay", "idle", "sharp"), None)


def event(*args: Any, **options: Any) -> Callable[[F], F]:
    """Run for every watch event of the resource (``event``/``type`` kwargs); not retried."""
    allowed = tuple(k for k in _COMMON if k not in ("errors", "timeout", "retries", "backoff"))
    return _register("event", args, options, allowed, None)


def create(*args: Any, **options: Any) -> Callable[[F], F]:
    """Run when an object is created (or first seen without a record of being handled)."""
    return _register("create", args, options, _COMMON, Reason.CREATE)


def update(*args: Any, old: Filter = None, new: Filter = None, **options: Any) -> Callable[[F], F]:
    """Run when an object's essence changes (spec, labels, annotations; never status alone)."""
    options.update(old=old, new=new)
    return _register(
        "update", args, options, (*_COMMON, "old", "new"), Reason.UPDATE, field_needs_change=True
    )


def delete(*args: Any, optional: bool = False, **options: Any) -> Callable[[F], F]:
    """Run when an object is being deleted; unless ``optional``, a finalizer holds it until then."""
    return _register("delete", args, options, _COMMON, Reason.DELETE, requires_finalizer=not optional)


def resume(*args: Any, deleted: bool = False, **options: Any) -> Callable[[F], F]:
    """Run for every object present when the operator starts (``deleted=True``: also those being
    deleted); joins the object's create/update cause if it has one."""
    return _register("resume", args, options, _COMMON, None, initial=True, deleted=deleted)


def field(
    *args: Any, field: str | tuple[str, ...], old: Filter = None, new: Filter = None, **options: Any
) -> Callable[[F], F]:
    """Run when ``field`` changes (on creation too: from absent to its first value)."""
    if not field:
        raise TypeError("@kopf.on.field needs field='spec.x'")
    options.update(field=field, old=old, new=new)
    return _register("field", args, options, (*_COMMON, "old", "new"), None, field_needs_change=True)


_ACTIVITY = ("id", "param", "errors", "timeout", "retries", "backoff", "registry")


def _activity(decorator: str, activity: Activity, options: dict[str, Any]) -> Callable[[F], F]:
    def register(fn: F) -> F:
        where = f"@kopf.on.{decorator} of {getattr(fn, '__qualname__', fn)!r}"
        unknown = sorted(set(options) - set(_ACTIVITY))
        if unknown:
            raise TypeError(
                f"{where}: unknown argument(s) {', '.join(unknown)}; it takes {', '.join(_ACTIVITY)}"
            )
        errors = options.get("errors") or ErrorsMode.TEMPORARY
        if not isinstance(errors, ErrorsMode):
            raise TypeError(f"{where}: errors= is a kopf.ErrorsMode, got {errors!r}")
        retries, backoff = options.get("retries"), options.get("backoff")
        if retries is not None and (not isinstance(retries, int) or retries < 0):
            raise ValueError(f"{where}: retries= is a whole number >= 0, got {retries!r}")
        if backoff is not None and backoff < 0:
            raise ValueError(f"{where}: backoff= is seconds >= 0, got {backoff!r}")
        given = options.get("registry")
        registry: Registry = given if isinstance(given, Registry) else default_registry()
        registry.add(
            ActivityHandler(
                fn=fn,
                id=handler_id(fn, options.get("id"), ()),
                activity=activity,
                errors=errors,
                timeout=options.get("timeout"),
                retries=retries,
                backoff=None if backoff is None else float(backoff),
                param=options.get("param"),
            )
        )
        return fn

    return register


def startup(**options: Any) -> Callable[[F], F]:
    """Run once before the operator watches anything; a failure for good stops the start."""
    return _activity("startup", Activity.STARTUP, options)


def cleanup(**options: Any) -> Callable[[F], F]:
    """Run once when the operator stops, after its handlers, daemons and timers stopped."""
    return _activity("cleanup", Activity.CLEANUP, options)


def login(**options: Any) -> Callable[[F], F]:
    """Return a :class:`kopf.ConnectionInfo` for the operator's client (run once at start);
    without login handlers, kubeop's own configuration is used."""
    return _activity("login", Activity.AUTHENTICATION, options)


def probe(**options: Any) -> Callable[[F], F]:
    """Report on the liveness endpoint (``--liveness``): the result is served as JSON under the
    handler's id, computed at most every 10 s; failing for good answers 500."""
    return _activity("probe", Activity.PROBE, options)


def validate(*args: Any, **options: Any) -> Callable[[F], F]:
    """A validating admission handler on kubeop's webhook server (see :mod:`kubeop.kopf.admission`)."""
    from kubeop.kopf import admission

    return admission.validate(*args, **options)


def mutate(*args: Any, **options: Any) -> Callable[[F], F]:
    """A mutating admission handler on kubeop's webhook server (see :mod:`kubeop.kopf.admission`)."""
    from kubeop.kopf import admission

    return admission.mutate(*args, **options)
