"""Admission webhooks: validating and defaulting handlers as plain functions.

::

    @validating(CronTab)
    def check(new: CronTab, old: CronTab | None, operation: str, user: UserInfo) -> Allowed | None:
        if not is_cron(new.spec.cron_spec):
            raise Denied(fields=[FieldError("spec.cronSpec", "not a cron expression")])
        return Allowed(warnings=["..."]) if ... else None          # None: allowed

    @defaulting(CronTab)
    def default(obj: CronTab) -> CronTab:
        obj.spec.replicas = obj.spec.replicas or 1
        return obj                                                 # kubeop computes the JSON patch

A handler takes up to four positional arguments, ``(new, old, operation, user_info)``, and is
called with as many as it declares; it may be ``async``. Declared with a
:class:`~kubeop.crd.CustomResource` class or a typed built-in kind (``@validating(ConfigMap)``,
``@defaulting(Deployment)`` with :mod:`kubeop.kinds`: any pydantic model class declaring its
``resource``, as the client's verbs take) it receives instances of that class (an object the
model rejects is denied with one cause per field, before the handler runs); declared with an
:class:`~kubeop.core.resource.ApiResource` it receives plain dicts (decoded for this review alone).

The verdicts: a validating handler returns ``None`` or :class:`Allowed` to allow, raises or
returns :class:`Denied` to deny; a defaulting handler returns the changed object (an instance of
its model, or a dict for an ApiResource), or ``None`` after changing it in place, or denies as a
validator does. Anything else a handler returns (``False``, a string, a number, another type)
denies, with a message naming the handler and the type it returned: a mistake such as
``return x <= 5`` fails closed, never open.

Guarantees: every decoded review gets a verdict. A handler that raises :class:`Denied` denies
with its fields as ``metav1.Status`` causes; any other exception denies with the exception's
message (code 500) and is logged once, ``CancelledError`` too unless the review itself is being
cancelled (a handler awaiting a future something else cancelled must not leave the API server
without an answer, where ``failurePolicy: Ignore`` would let the request through); a handler
still running at the deadline denies with a message saying so. Nothing a handler does makes the
server answer with an HTTP error.

A synchronous handler runs on its webhook's own few threads (``max_threads``, default 4;
:mod:`kubeop.webhook.threads`), never on the event loop: a call still
running at its deadline keeps its thread and counts as stuck until it returns
(``kubeop_webhook_stuck_calls``), and once every thread of a webhook is stuck its requests are
denied at once, saying so, while other webhooks answer as before.

A defaulting handler's result is merged over the request's object three ways (the object, the
model's view of it, the returned model): fields the model does not know are kept as they came,
fields the handler did not touch are not rewritten, so the patch holds only real changes.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ValidationError

from kubeop.core.model import is_model_class, model_gvk, model_resource
from kubeop.core.resource import ApiResource
from kubeop.crd import CustomResource
from kubeop.webhook import jsonpatch
from kubeop.webhook.review import AdmissionRequest, admission_response
from kubeop.webhook.threads import DEFAULT_THREADS, HandlerThreads, Saturated

__all__ = [
    "AdmissionWebhook",
    "Allowed",
    "Denied",
    "FieldError",
    "Rule",
    "defaulting",
    "validating",
]

log = logging.getLogger("kubeop.webhook")

FailurePolicy = Literal["Fail", "Ignore"]
MatchPolicy = Literal["Equivalent", "Exact"]
SideEffects = Literal["None", "NoneOnDryRun"]
Handler = Callable[..., Any]
Target = type[CustomResource] | type[BaseModel] | ApiResource

_MISSING: Any = object()


@dataclass(frozen=True)
class FieldError:
    """One offending field: a ``metav1.StatusCause`` (``field`` is a dotted path, ``spec.cronSpec``)."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"


class Denied(Exception):
    """Raise (or return) to deny; each :class:`FieldError` is named in the message and as a cause."""

    def __init__(
        self,
        message: str = "",
        *,
        fields: Sequence[FieldError] = (),
        code: int | None = None,
        warnings: Sequence[str] = (),
    ) -> None:
        self.fields = tuple(fields)
        self.code = code or (422 if self.fields else 403)
        self.warnings = list(warnings)
        parts = [f"{f.field}: {f.message}" for f in self.fields]
        self.message = "; ".join(([message] if message else []) + parts) or "denied"
        super().__init__(self.message)

    def status(self, request: AdmissionRequest | None = None) -> dict[str, Any]:
        """The ``metav1.Status``; with the request, ``details`` names the object as the API server's
        own validation does, so kubectl prints ``The CronTab "x" is invalid: spec.cronSpec: ...``."""
        status: dict[str, Any] = {
            "status": "Failure",
            "code": self.code,
            "reason": "Invalid" if self.code == 422 else "Forbidden",
            "message": self.message,
        }
        if self.fields:
            details: dict[str, Any] = {}
            if request is not None:
                details = {
                    "name": request.name,
                    "group": request.kind.get("group", ""),
                    "kind": request.kind.get("kind", ""),
                }
            details["causes"] = [
                {"field": f.field, "message": f.message, "reason": f.reason} for f in self.fields
            ]
            status["details"] = details
        return status


@dataclass(frozen=True)
class Allowed:
    """Return to allow with warnings (shown by kubectl as ``Warning: ...``); ``None`` allows too."""

    warnings: Sequence[str] = ()


@dataclass(frozen=True)
class Rule:
    """Which requests the API server sends (``rules[]`` of a webhook configuration)."""

    api_groups: tuple[str, ...]
    api_versions: tuple[str, ...]
    resources: tuple[str, ...]
    operations: tuple[str, ...] = ("CREATE", "UPDATE")
    scope: Literal["*", "Cluster", "Namespaced"] = "*"

    def to_dict(self) -> dict[str, Any]:
        """The rule as a webhook configuration's ``rules`` entry."""
        return {
            "apiGroups": list(self.api_groups),
            "apiVersions": list(self.api_versions),
            "resources": list(self.resources),
            "operations": list(self.operations),
            "scope": self.scope,
        }


@dataclass
class AdmissionWebhook:
    """One validating or mutating webhook: its handler and how the API server should call it."""

    name: str
    path: str
    handler: Handler
    mutating: bool
    rules: tuple[Rule, ...]
    model: type[BaseModel] | None = None
    """The class the handler receives objects as (a CustomResource or a typed built-in kind); None: dicts."""
    failure_policy: FailurePolicy = "Fail"
    timeout_seconds: int = 10
    match_policy: MatchPolicy = "Equivalent"
    side_effects: SideEffects = "None"
    namespace_selector: dict[str, Any] | None = None
    object_selector: dict[str, Any] | None = None
    max_threads: int = DEFAULT_THREADS
    _arity: int = field(default=4, init=False, repr=False)
    _threads: HandlerThreads = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not 1 <= self.timeout_seconds <= 30:
            raise ValueError(
                f"webhook {self.name}: timeout_seconds must be 1..30, not {self.timeout_seconds}"
            )
        if self.name.count(".") < 2:
            raise ValueError(f"webhook name {self.name!r} must be fully qualified (three DNS labels or more)")
        if not self.path.startswith("/"):
            raise ValueError(f"webhook {self.name}: path {self.path!r} must start with '/'")
        if not 1 <= self.max_threads <= 64:
            raise ValueError(f"webhook {self.name}: max_threads must be 1..64, not {self.max_threads}")
        self._arity = _arity(self.handler)
        self._threads = HandlerThreads(self.max_threads)

    @property
    def stuck_calls(self) -> int:
        """Calls of the synchronous handler still running past their deadline (see the module docstring)."""
        return self._threads.stuck

    async def review(self, request: AdmissionRequest, timeout: float | None = None) -> bytes:
        """The AdmissionReview response for ``request`` (never raises, except on cancellation)."""
        try:
            return await self._verdict(request, timeout)
        except Exception as exc:  # a response that does not encode, say
            problem = f"{type(exc).__name__}: {_text(exc)[:200]}"
            log.warning("webhook %s: the review failed: %s", self.name, problem)
            return _deny(request.uid, f"webhook {self.name} failed to answer: {problem}", 500)

    async def _verdict(self, request: AdmissionRequest, timeout: float | None) -> bytes:
        deadline = self.timeout_seconds if timeout is None else min(timeout, self.timeout_seconds)
        try:
            async with asyncio.timeout(max(deadline - 0.2, 0.05)):
                return await self._review(request)
        except Denied as denied:
            return admission_response(
                request.uid,
                allowed=False,
                status=denied.status(request),
                warnings=[w for w in denied.warnings if isinstance(w, str)],
            )
        except TimeoutError:
            log.warning("webhook %s: handler did not answer within %.1f s", self.name, deadline)
            return _deny(request.uid, f"webhook {self.name} did not answer within {deadline:g} s", 504)
        except Saturated as exc:
            message = (
                f"handler {self._handler_name()} has {exc.stuck} calls still running past their "
                f"deadline (all of webhook {self.name}'s {self.max_threads} threads): denied at once"
            )
            log.warning("webhook %s: %s", self.name, message)
            return _deny(request.uid, message, 503, "ServiceUnavailable")
        except _NotAVerdict as exc:
            log.warning("webhook %s: %s", self.name, exc.message)
            return _deny(request.uid, exc.message, 500)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # the review itself is cancelled (the server stopping, the caller gone)
            message = (
                f"handler {self._handler_name()} raised CancelledError without its review being "
                "cancelled (a future or task it waited on was cancelled by something else?)"
            )
            log.warning("webhook %s: %s", self.name, message)
            return _deny(request.uid, message, 500)
        except Exception as exc:
            text = _text(exc)
            log.warning("webhook %s: handler raised %s: %s", self.name, type(exc).__name__, text)
            return _deny(request.uid, text or type(exc).__name__, 500)

    def _handler_name(self) -> str:
        return _qualname(self.handler)

    async def _review(self, request: AdmissionRequest) -> bytes:
        raw_new, raw_old = request.object, request.old_object
        if self.mutating and raw_new is None:  # DELETE (or CONNECT): nothing to mutate
            return admission_response(request.uid, allowed=True)
        new, old = self._typed(raw_new, "object"), self._typed(raw_old, "oldObject")
        args = (new, old, request.operation, request.user_info)[: self._arity]
        result = await self._call(args)
        if isinstance(result, Denied):
            raise result
        if not self.mutating:
            return admission_response(request.uid, allowed=True, warnings=self._allowed(result))
        assert raw_new is not None
        changed = new if result is None else self._changed(result, raw_new)
        if isinstance(changed, BaseModel):
            base = _dump(self._typed(raw_new, "object"))
            merged = _merge3(raw_new, base, _dump(changed))
        else:
            merged = changed
        return admission_response(request.uid, allowed=True, patch=jsonpatch.diff(raw_new, merged))

    async def _call(self, args: tuple[Any, ...]) -> Any:
        fn = self.handler
        if inspect.iscoroutinefunction(fn):
            return await fn(*args)
        result = await self._threads.run(fn, *args)  # a sync handler must not stall the server
        if inspect.isawaitable(result):
            return await result
        return result

    def _allowed(self, result: Any) -> list[str]:
        """A validator's result: its warnings if it allows; :class:`_NotAVerdict` if it is none."""
        if result is None:
            return []
        if isinstance(result, Allowed):
            warnings = result.warnings
            if not isinstance(warnings, list | tuple) or not all(isinstance(w, str) for w in warnings):
                raise _NotAVerdict(
                    f"validating handler {self._handler_name()} returned Allowed(warnings=...) with "
                    f"{_describe(warnings)}; warnings are a list of strings"
                )
            return list(warnings)
        raise _NotAVerdict(
            f"validating handler {self._handler_name()} returned {_describe(result)}, which is not a "
            "verdict: return None or Allowed(...) to allow, raise Denied(...) to deny"
        )

    def _changed(self, result: Any, raw: dict[str, Any]) -> Any:
        """A defaulter's result if it is the changed object; :class:`_NotAVerdict` otherwise."""
        if self.model is not None:
            if isinstance(result, self.model):
                return result
            want = f"the changed {self.model.__name__}"
        else:
            if isinstance(result, dict):
                for key in ("apiVersion", "kind"):
                    if result.get(key) != raw.get(key):
                        raise _NotAVerdict(
                            f"defaulting handler {self._handler_name()} returned a dict whose {key} is "
                            f"{_describe(result.get(key))}, not the object's: return the changed object"
                        )
                return result
            want = "the changed object (a dict)"
        raise _NotAVerdict(
            f"defaulting handler {self._handler_name()} returned {_describe(result)}: return {want}, "
            "or None after changing it in place, or raise Denied(...) to deny"
        )

    def _typed(self, obj: dict[str, Any] | None, where: str) -> Any:
        if obj is None:
            return None
        if self.model is None:
            # Each review is decoded afresh, so a validator may have the request's dict itself; a
            # defaulter gets a copy (the original is what its patch is computed against).
            return orjson.loads(orjson.dumps(obj)) if self.mutating else obj
        try:
            return self.model.model_validate(obj)
        except ValidationError as exc:
            raise Denied(
                f"{where} is not a valid {model_gvk(self.model).kind}" if where != "object" else "",
                fields=[
                    FieldError(".".join(str(p) for p in e["loc"]) or where, e["msg"], "FieldValueInvalid")
                    for e in exc.errors()
                ],
            ) from None

    def configuration(self, client_config: dict[str, Any]) -> dict[str, Any]:
        """This webhook's entry in a Validating/MutatingWebhookConfiguration."""
        out: dict[str, Any] = {
            "name": self.name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": client_config,
            "rules": [r.to_dict() for r in self.rules],
            "failurePolicy": self.failure_policy,
            "matchPolicy": self.match_policy,
            "sideEffects": self.side_effects,
            "timeoutSeconds": self.timeout_seconds,
        }
        if self.namespace_selector is not None:
            out["namespaceSelector"] = self.namespace_selector
        if self.object_selector is not None:
            out["objectSelector"] = self.object_selector
        if self.mutating:
            out["reinvocationPolicy"] = "Never"
        return out


class _NotAVerdict(Exception):
    """A handler returned something that is not one of its verdicts."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _deny(uid: str, message: str, code: int, reason: str = "InternalError") -> bytes:
    status = {"status": "Failure", "code": code, "reason": reason, "message": message}
    return admission_response(uid, allowed=False, status=status)


def _qualname(fn: Any) -> str:
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if isinstance(module, str) and isinstance(name, str) else str(name)


def _describe(value: Any) -> str:
    """What a handler returned, for a message: the value of a plain bool or number, else only its
    type and size (a string or a dict may hold the object's secrets)."""
    kind = type(value)
    if kind in (bool, int, float) or value is None:
        try:
            text = repr(value)
        except ValueError:  # an int too long to print
            text = "a huge int"
        return text if len(text) <= 40 else f"{text[:37]}..."
    name = kind.__qualname__
    article = "an" if name[:1].lower() in "aeiou" else "a"
    if kind in (str, bytes, dict, list, tuple, set, frozenset):
        unit = "characters" if kind is str else "bytes" if kind is bytes else "items"
        return f"{article} {name} of {len(value)} {unit}"
    return f"{article} {name}"


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return ""


def _arity(fn: Handler) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 4
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 4
    if not 1 <= len(positional) <= 4:
        raise TypeError(
            f"webhook handler {getattr(fn, '__name__', fn)!r} must take 1 to 4 positional arguments "
            "(new, old, operation, user_info)"
        )
    return len(positional)


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _merge3(raw: Any, base: Any, desired: Any) -> Any:
    """``raw`` with the changes from ``base`` to ``desired`` (see the module docstring)."""
    if isinstance(raw, dict) and isinstance(desired, dict):
        base_d = base if isinstance(base, dict) else {}
        out: dict[str, Any] = {}
        for key, value in raw.items():
            if key in desired:
                out[key] = _merge3(value, base_d.get(key, _MISSING), desired[key])
            elif key not in base_d:
                out[key] = value  # unknown to the model: keep it
        for key, value in desired.items():
            if key not in raw and not (key in base_d and base_d[key] == value):
                out[key] = value  # added by the handler (a model default alone is not a change)
        return out
    if base is not _MISSING and desired == base:
        return raw  # untouched by the handler: keep the object's own spelling
    return desired


def _target(target: Target) -> tuple[ApiResource, type[BaseModel] | None]:
    if isinstance(target, ApiResource):
        return target, None
    if isinstance(target, type) and issubclass(target, CustomResource):
        if target.is_declared():
            return target.resource, target
        raise TypeError(
            f"a webhook of {target.__name__} needs its kind declared: "
            f"class {target.__name__}(CustomResource, group=..., version=..., kind=...)"
        )
    if isinstance(target, type) and issubclass(target, BaseModel) and is_model_class(target):
        resource = model_resource(target)
        if resource is not None:
            return resource, target  # a typed built-in kind (kubeop.kinds) or a generated model
        raise TypeError(
            f"a webhook of {target.__name__} needs its resource without discovery (the rules name the "
            "plural): give the class `resource: ClassVar[ApiResource]`, or pass an ApiResource"
        )
    raise TypeError(
        "a webhook needs a declared CustomResource class, a typed kind (kubeop.kinds, e.g. ConfigMap) "
        f"or an ApiResource, not {target!r}"
    )


def _webhook(
    target: Target,
    fn: Handler,
    *,
    mutating: bool,
    name: str | None,
    path: str | None,
    operations: Sequence[str],
    **options: Any,
) -> AdmissionWebhook:
    resource, model = _target(target)
    kind = (resource.kind or resource.plural).lower()
    prefix = "m" if mutating else "v"
    group_label = resource.group or "core"
    group_path = resource.group.replace(".", "-")
    default_name = f"{prefix}{kind}.{resource.group}" if resource.group.count(".") >= 1 else None
    return AdmissionWebhook(
        name=name or default_name or f"{prefix}{kind}.{group_label}.kubeop.dev",
        # kubebuilder's path for a kind's webhook; a named one (several on a kind) by its name
        path=path
        or f"/{'mutate' if mutating else 'validate'}-{name or f'{group_path}-{resource.version}-{kind}'}",
        handler=fn,
        mutating=mutating,
        rules=(
            Rule(
                api_groups=(resource.group,),
                api_versions=(resource.version,),
                resources=(resource.plural,),
                operations=tuple(operations),
                scope="Namespaced" if resource.namespaced else "Cluster",
            ),
        ),
        model=model,
        **options,
    )


def validating(
    target: Target,
    *,
    name: str | None = None,
    path: str | None = None,
    operations: Sequence[str] = ("CREATE", "UPDATE"),
    failure_policy: FailurePolicy = "Fail",
    timeout_seconds: int = 10,
    match_policy: MatchPolicy = "Equivalent",
    namespace_selector: dict[str, Any] | None = None,
    object_selector: dict[str, Any] | None = None,
    max_threads: int = DEFAULT_THREADS,
) -> Callable[[Handler], AdmissionWebhook]:
    """Decorate a validating handler of ``target``'s objects; see the module docstring.

    The name defaults to ``v<kind>.<group>`` and the path to ``/validate-<group>-<version>-<kind>``
    (kubebuilder's spelling), or ``/validate-<name>`` when a name is given. ``max_threads``: the
    threads a synchronous handler runs on (see the module docstring).
    """

    def wrap(fn: Handler) -> AdmissionWebhook:
        return _webhook(
            target,
            fn,
            mutating=False,
            name=name,
            path=path,
            operations=operations,
            failure_policy=failure_policy,
            timeout_seconds=timeout_seconds,
            match_policy=match_policy,
            namespace_selector=namespace_selector,
            object_selector=object_selector,
            max_threads=max_threads,
        )

    return wrap


def defaulting(
    target: Target,
    *,
    name: str | None = None,
    path: str | None = None,
    operations: Sequence[str] = ("CREATE", "UPDATE"),
    failure_policy: FailurePolicy = "Fail",
    timeout_seconds: int = 10,
    match_policy: MatchPolicy = "Equivalent",
    namespace_selector: dict[str, Any] | None = None,
    object_selector: dict[str, Any] | None = None,
    max_threads: int = DEFAULT_THREADS,
) -> Callable[[Handler], AdmissionWebhook]:
    """Decorate a defaulting (mutating) handler: it returns the changed object (or changes it in place
    and returns None); the JSON patch is computed. Name ``m<kind>.<group>``, path ``/mutate-...``."""

    def wrap(fn: Handler) -> AdmissionWebhook:
        return _webhook(
            target,
            fn,
            mutating=True,
            name=name,
            path=path,
            operations=operations,
            failure_policy=failure_policy,
            timeout_seconds=timeout_seconds,
            match_policy=match_policy,
            namespace_selector=namespace_selector,
            object_selector=object_selector,
            max_threads=max_threads,
        )

    return wrap
