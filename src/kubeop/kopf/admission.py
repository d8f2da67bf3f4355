"""``@kopf.on.validate`` / ``@kopf.on.mutate``: kopf's admission handlers on kubeop's webhook server.

Each handler is one admission webhook of kubeop's server (:mod:`kubeop.webhook`), at the path
``<root>/<handler id>`` (kopf's). A request runs that handler with kopf's kwargs (``body``,
``spec``, ``meta``, ``status``, ``old``, ``new``, ``diff``, ``name``, ``namespace``, ``labels``,
``annotations``, ``operation``, ``subresource``, ``dryrun``, ``userinfo``, ``headers`` (the API
server's request headers), ``sslpeer`` (its verified client certificate, else empty),
``warnings``, ``patch``, ``memo``, ``logger``, ``resource``, ``uid``).

- ``raise kopf.AdmissionError(message, code=...)`` denies (``code`` defaults to 500, as kopf);
  any other exception denies with its message and code 500;
- ``warnings.append(...)`` sends warnings (kubectl prints them) with the verdict;
- a mutating handler's ``patch`` (a merge patch, kopf's ``patch.spec[...] = ...``) becomes the
  JSON patch of the response;
- ``operation=`` (or ``operations=``) limits the operations, ``subresource=`` the subresource
  (None: the main resource only; ``'*'``: any; ``'status'``...), and the object filters
  (``labels=``, ``annotations=``, ``when=``, ``field=``/``value=``) pick the objects: a request a
  handler is not for is allowed untouched.

The server is ``settings.admission.server``, one of kopf's servers (:mod:`kubeop.kopf.webhooks`,
run by :mod:`kubeop.kopf.serving`, which also writes the webhook configurations named
``settings.admission.managed``). Without one, the Manager's server serves them
(``kopf.run(webhook_address="127.0.0.1:9443", webhook_cert_dir=...)``, a local CA and serving
certificate when no directory is given) and the configurations come from
:func:`kubeop.webhook.webhook_configurations` (their rules empty: kopf does not start then).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from kubeop.core.resource import ApiResource
from kubeop.kopf.bodies import Body, Patch
from kubeop.kopf.diffs import FieldPath, diff, parse_field, resolve
from kubeop.kopf.errors import PermanentError
from kubeop.kopf.fields import missing_part
from kubeop.kopf.handlers import MISSING, Filter, check, prematches
from kubeop.kopf.registry import Registry, default_registry, handler_id
from kubeop.kopf.resource import Resource, of_api_resource
from kubeop.kopf.selectors import Selector, selector_key

if TYPE_CHECKING:
    from kubeop.kopf.webhooks import WebhookFn
    from kubeop.webhook import AdmissionWebhook
    from kubeop.webhook.review import AdmissionRequest

__all__ = [
    "AdmissionError",
    "AdmissionHandler",
    "Operation",
    "admission_fn",
    "admission_handlers",
    "mutate",
    "validate",
    "webhooks",
]

# How these kopf names behave on kubeop where it is not as in kopf (read by scripts/kopf_compat.py
# into the compatibility table of docs/migration/from-kopf.md; a name not listed behaves as kopf's).
# (kopf.on's differences are described in kubeop.kopf.on.)

F = TypeVar("F", bound=Callable[..., Any])
_SELECTOR = ("group", "version", "kind", "plural", "singular", "shortcut", "category")
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
"""An admission request's operation (``kopf.Operation``)."""
log = logging.getLogger("kubeop.kopf.admission")


class AdmissionError(PermanentError):
    """Raise in an admission handler to deny the request with ``message`` and HTTP ``code``."""

    def __init__(self, message: str | None = "", code: int | None = 500) -> None:
        super().__init__(message or "")
        self.code = code or 500


@dataclass(frozen=True)
class AdmissionHandler:
    fn: Callable[..., Any]
    id: str
    resource: str
    mutating: bool
    operations: tuple[str, ...] | None = None  # None: every operation
    subresource: str | None = None
    persistent: bool = False
    side_effects: bool = False
    ignore_failures: bool = False
    field: FieldPath = ()
    value: Filter = None
    labels: Mapping[str, Filter] | None = None
    annotations: Mapping[str, Filter] | None = None
    when: Callable[..., bool] | None = None
    param: Any = None

    def __str__(self) -> str:
        return f"Handler {self.id!r}"

    def wants(self, request: AdmissionRequest, body: Mapping[str, Any], kwargs: Mapping[str, Any]) -> bool:
        """Is this request one for this handler (operation, subresource, object filters)?"""
        if self.operations is not None and request.operation not in self.operations:
            return False
        sub = request.raw.get("subResource") or None
        if self.subresource != "*" and sub != self.subresource:
            return False
        if not prematches(self, body, kwargs):
            return False
        if self.field:
            got = resolve(body, self.field, MISSING)
            if self.value is None:
                return got is not MISSING
            return check(self.value, got, kwargs)
        return True


_ALLOWED = (
    "group",
    "version",
    "kind",
    "plural",
    "singular",
    "shortcut",
    "category",
    "id",
    "param",
    "operation",
    "operations",
    "subresource",
    "persistent",
    "side_effects",
    "ignore_failures",
    "labels",
    "annotations",
    "when",
    "field",
    "value",
    "registry",
)


def admission_handlers(registry: Registry) -> list[AdmissionHandler]:
    return registry.admission()


def _decorator(
    decorator: str, mutating: bool, args: tuple[Any, ...], options: dict[str, Any]
) -> Callable[[F], F]:
    def register(fn: F) -> F:
        where = f"@kopf.on.{decorator} of {getattr(fn, '__qualname__', fn)!r}"
        unknown = sorted(set(options) - set(_ALLOWED))
        if unknown:
            raise TypeError(
                f"{where}: unknown argument(s) {', '.join(unknown)}; it takes {', '.join(_ALLOWED)}"
            )
        operation, operations = options.get("operation"), options.get("operations")
        if operation is not None and operations is not None:
            raise TypeError(f"{where}: operation= and operations= exclude each other")
        ops = (operation,) if operation is not None else tuple(operations) if operations is not None else None
        for op in ops or ():
            if op not in OPERATIONS:
                raise ValueError(f"{where}: operation {op!r} is not one of {', '.join(OPERATIONS)}")
        try:
            path = parse_field(options.get("field"))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if options.get("value") is not None and not path:
            raise TypeError(f"{where}: value= filters a field; also give field='spec.x'")
        sub = options.get("subresource")
        if sub is not None and (not isinstance(sub, str) or not sub):
            raise TypeError(f"{where}: subresource= is a name ('status', 'scale') or '*', got {sub!r}")
        try:
            resource = selector_key(Selector(*args, **{k: options.get(k) for k in _SELECTOR}))
        except TypeError as exc:
            raise TypeError(f"{where}: {exc}") from None
        missing = missing_part(resource, path)
        if missing is not None:
            raise ValueError(f"{where}: field {'.'.join(path)!r} does not exist: {resource} has no {missing}")
        given = options.get("registry")
        registry = given if isinstance(given, Registry) else default_registry()
        handler = AdmissionHandler(
            fn=fn,
            id=handler_id(fn, options.get("id"), ()),
            resource=resource,
            mutating=mutating,
            operations=ops,
            subresource=sub,
            persistent=bool(options.get("persistent")),
            side_effects=bool(options.get("side_effects")),
            ignore_failures=bool(options.get("ignore_failures")),
            field=path,
            value=options.get("value"),
            labels=options.get("labels"),
            annotations=options.get("annotations"),
            when=options.get("when"),
            param=options.get("param"),
        )
        try:
            registry.add_admission(handler)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        return fn

    return register


def validate(*args: Any, **options: Any) -> Callable[[F], F]:
    """A validating admission handler: raise :class:`AdmissionError` to deny, append to
    ``warnings`` to warn; returning allows."""
    return _decorator("validate", False, args, options)


def mutate(*args: Any, **options: Any) -> Callable[[F], F]:
    """A mutating admission handler: change ``patch`` (``patch.spec['x'] = 1``) to mutate."""
    return _decorator("mutate", True, args, options)


def webhooks(
    handlers: list[AdmissionHandler],
    *,
    memo: Mapping[str, Any],
    suffix: str = "kopf.kubeop.dev",
    resources: Mapping[str, Sequence[ApiResource]] | None = None,
) -> list[AdmissionWebhook]:
    """One kubeop admission webhook per handler, its rules empty (the configurations are the
    operator's to write). ``resources``: what each handler's selector selects (kopf's ``resource``
    kwarg is the one of them a request is for; a request for another is allowed untouched)."""
    from kubeop.webhook import AdmissionWebhook

    class KopfAdmission(AdmissionWebhook):
        kopf: AdmissionHandler

        async def _review(self, request: AdmissionRequest) -> bytes:
            return await _review(self.kopf, request, memo, self._threads.run, resources)

        def _handler_name(self) -> str:
            return repr(self.kopf.id)

    out: list[AdmissionWebhook] = []
    for h in handlers:
        safe = "".join(c if c.isalnum() or c in "-." else "-" for c in h.id.lower()).strip("-.") or "handler"
        hook = KopfAdmission(
            name=f"{safe}.{suffix}",
            path=f"/{h.id}",
            handler=_unused,
            mutating=h.mutating,
            rules=(),
            failure_policy="Ignore" if h.ignore_failures else "Fail",
            side_effects="NoneOnDryRun" if h.side_effects else "None",
            timeout_seconds=30,
        )
        hook.kopf = h
        out.append(hook)
    return out


def admission_fn(
    handlers: list[AdmissionHandler],
    *,
    memo: Mapping[str, Any],
    resources: Mapping[str, Sequence[ApiResource]] | None = None,
) -> WebhookFn:
    """kopf's admission function (:class:`~kubeop.kopf.webhooks.WebhookFn`) for ``handlers``: an
    AdmissionReview (a dict) for the handler id ``webhook`` in, the response review out.
    :class:`~kubeop.webhook.review.BadReview` for a malformed review, and
    :class:`~kubeop.kopf.webhooks.WebhookUnknown` for an id that is not a handler's."""
    import orjson

    from kubeop.kopf.webhooks import WebhookUnknown
    from kubeop.webhook.review import decode_admission

    hooks = dict(
        zip((h.id for h in handlers), webhooks(handlers, memo=memo, resources=resources), strict=True)
    )

    async def fn(
        request: Mapping[str, Any],
        *,
        webhook: str | None = None,
        headers: Mapping[str, str] | None = None,
        sslpeer: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        hook = hooks.get(webhook or "")
        if hook is None:
            known = ", ".join(sorted(hooks)) or "none"
            raise WebhookUnknown(f"no admission handler {webhook!r} (the handlers: {known})")
        decoded = decode_admission(request, headers=headers, peer=sslpeer)
        answer: dict[str, Any] = orjson.loads(await hook.review(decoded))
        return answer

    return fn


def _unused(new: Any) -> None:  # the review is kopf's, not the plain-function protocol
    raise AssertionError("not called")


async def _review(
    handler: AdmissionHandler,
    request: AdmissionRequest,
    memo: Mapping[str, Any],
    run: Callable[..., Awaitable[Any]],
    resources: Mapping[str, Sequence[ApiResource]] | None = None,
) -> bytes:
    """``run``: how a sync handler is called (its webhook's own threads, never the event loop)."""
    import asyncio
    import inspect

    from kubeop.webhook import jsonpatch
    from kubeop.webhook.review import admission_response
    from kubeop.webhook.threads import Saturated

    raw = request.object if request.object is not None else request.old_object or {}
    resource = _requested(request, None if resources is None else resources.get(handler.resource))
    if resource is None:  # not a resource the handler selects: as kopf, no handler, allowed
        return admission_response(request.uid, allowed=True)
    body = Body(raw)
    old, new = request.old_object, request.object
    warnings: list[str] = []
    patch = Patch()
    md = raw.get("metadata") or {}
    kwargs: dict[str, Any] = {
        "body": body,
        "spec": body.spec,
        "meta": body.meta,
        "status": body.status,
        "name": md.get("name") or request.name,
        "namespace": md.get("namespace") or request.namespace or None,
        "uid": md.get("uid"),
        "labels": body.meta.labels,
        "annotations": body.meta.annotations,
        "old": old,
        "new": new,
        "diff": diff(_essence(old), _essence(new)) if old is not None and new is not None else (),
        "operation": request.operation,
        "subresource": request.raw.get("subResource") or None,
        "dryrun": request.dry_run,
        "userinfo": request.raw.get("userInfo") or {},
        "headers": dict(request.headers),
        "sslpeer": dict(request.peer or {}),
        "warnings": warnings,
        "patch": patch,
        "memo": memo,
        "resource": resource,
        "reason": None,
        "logger": logging.LoggerAdapter(
            log, {"object_namespace": md.get("namespace"), "object_name": md.get("name")}
        ),
        "param": handler.param,
    }
    if not handler.wants(request, raw, kwargs):
        return admission_response(request.uid, allowed=True)
    try:
        if inspect.iscoroutinefunction(handler.fn):
            await handler.fn(**kwargs)
        else:
            await run(handler.fn, **kwargs)
    except (asyncio.CancelledError, Saturated):
        # the deadline, a CancelledError the handler raised without being cancelled (denied, naming
        # the handler), every thread stuck: the webhook (AdmissionWebhook._verdict) answers them all
        raise
    except AdmissionError as exc:
        kwargs["logger"].debug("%s denied the %s: %s", handler, request.operation, exc)
        code = exc.code
        status = {"status": "Failure", "code": code, "message": str(exc) or "denied"}
        return admission_response(request.uid, allowed=False, status=status, warnings=warnings)
    except Exception as exc:
        log.warning("%s failed: %s: %s", handler, type(exc).__name__, exc)
        status = {"status": "Failure", "code": 500, "message": str(exc) or type(exc).__name__}
        return admission_response(request.uid, allowed=False, status=status, warnings=warnings)
    kwargs["logger"].debug("%s succeeded (%s).", handler, request.operation)
    ops = None
    if handler.mutating and patch and request.object is not None:
        ops = jsonpatch.diff(request.object, _merged(request.object, patch))
    return admission_response(request.uid, allowed=True, patch=ops, warnings=warnings)


def _requested(request: AdmissionRequest, selected: Sequence[ApiResource] | None) -> Resource | None:
    """The kopf Resource a request is for: the one of ``selected`` it names (None if none), else
    (selection unknown) one made of the request's resource and kind."""
    group = request.resource.get("group", "")
    version = request.resource.get("version", "")
    plural = request.resource.get("resource", "")
    if selected is None:
        kind = (request.raw.get("kind") or {}).get("kind")
        return Resource(group, version, plural, kind=kind, namespaced=None)
    for res in selected:
        if (res.group, res.version, res.plural) == (group, version, plural):
            return of_api_resource(res)
    return None


def _essence(obj: Mapping[str, Any] | None) -> Any:
    if obj is None:
        return None
    return {k: v for k, v in obj.items() if k not in ("metadata", "apiVersion", "kind")}


def _merged(obj: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` with a JSON merge patch applied (None removes a key)."""
    out = copy.deepcopy(dict(obj))
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(out[key], value)
        elif isinstance(value, Mapping):
            out[key] = _merged({}, value)
        else:
            out[key] = copy.deepcopy(value)
    return out
