"""Serving kopf's admission handlers: ``settings.admission.server`` and ``.managed``.

:func:`serve_admission` runs beside the operator's controllers: it resolves each handler's
resource, calls the server (:mod:`kubeop.kopf.webhooks`) with the handlers' admission function,
and, with ``settings.admission.managed = "<name>"``, writes the ValidatingWebhookConfiguration
and the MutatingWebhookConfiguration ``<name>`` whenever the server yields a client config
(at start, and when its CA bundle changes): one request each (a merge patch replacing the
``webhooks`` list, which kopf's configurations own whole; a create when the object is absent).
On stop (before the server closes) they are patched down to the ``persistent=True`` handlers'
webhooks, as kopf does; the objects stay. Each is cleaned on its own (one failing never skips
the other), transient failures retried with a backoff for up to ten seconds in all; one that
stays dirty is logged as an error naming it and why.

Each handler is one webhook (:func:`build_webhooks`), named as kopf names it (the id with ``/`` as
``.`` and ``_`` as ``-``, other characters hex-encoded, lowercased here, ``.<managed>`` appended):
a rule for its resource (``<plural>/<subresource>`` with ``subresource=``), its operations
(``*`` when none), ``failurePolicy: Ignore`` with ``ignore_failures=True`` else ``Fail``,
``sideEffects: NoneOnDryRun`` with ``side_effects=True`` else ``None``, ``matchPolicy:
Equivalent``, ``timeoutSeconds: 30``, an ``objectSelector`` from its plain ``labels=`` filters,
and the client config with the handler id appended to the url (or the service's path).
``admissionReviewVersions`` is ``["v1"]`` (kopf also lists v1beta1, which kubeop does not decode).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
import random
import re
import urllib.parse
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from kubeop.client import Client
from kubeop.core.errors import AlreadyExists, ApiError, Forbidden, NotFound
from kubeop.core.resource import ApiResource
from kubeop.kopf.admission import AdmissionHandler, admission_fn
from kubeop.kopf.handlers import ABSENT, PRESENT
from kubeop.kopf.settings import OperatorSettings
from kubeop.kopf.webhooks import WebhookClientConfig, current_client

__all__ = [
    "MUTATING",
    "VALIDATING",
    "build_webhooks",
    "object_selector",
    "serve_admission",
    "webhook_name",
]

log = logging.getLogger("kubeop.kopf.admission")

VALIDATING = ApiResource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    kind="ValidatingWebhookConfiguration",
    namespaced=False,
)
MUTATING = ApiResource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    kind="MutatingWebhookConfiguration",
    namespaced=False,
)
_NOT_IN_NAME = re.compile(r"[^a-z0-9.-]")
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_CLEANUP_SECONDS = 10.0  # the whole cleanup at stop, every retry of both configurations included
_CLEANUP_FIRST_DELAY = 0.1  # the backoff between its tries: doubled each time, up to
_CLEANUP_MAX_DELAY = 2.0


def webhook_name(handler_id: str, suffix: str) -> str:
    """kopf's webhook name for a handler: ``<id>.<suffix>``, made a DNS name; a ValueError naming
    the handler when it cannot be one."""
    name = handler_id.replace("/", ".").replace("_", "-").lower()
    name = _NOT_IN_NAME.sub(lambda m: m.group(0).encode().hex(), name)
    full = f"{name}.{suffix}" if suffix else name
    if len(full) > 253 or not all(_LABEL.match(label) for label in full.split(".")):
        raise ValueError(
            f"admission handler {handler_id!r} makes the webhook name {full!r}, which is not a DNS "
            f"name (labels of a-z, 0-9, '-', at most 63 each); give the handler id='...' "
            f"(e.g. id='check-spec')"
        )
    return full


def object_selector(labels: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``objectSelector`` for a handler's ``labels=`` filter (callables are checked by the
    handler's own filter only, as kopf)."""
    exprs: list[dict[str, Any]] = []
    for key, value in (labels or {}).items():
        if value is PRESENT:
            exprs.append({"key": key, "operator": "Exists"})
        elif value is ABSENT:
            exprs.append({"key": key, "operator": "DoesNotExist"})
        elif not callable(value):
            exprs.append({"key": key, "operator": "In", "values": [str(value)]})
    return {"matchExpressions": exprs} if exprs else None


def _client_config(config: WebhookClientConfig, handler_id: str) -> dict[str, Any]:
    out: dict[str, Any] = copy.deepcopy(dict(config))
    quoted = urllib.parse.quote(handler_id)
    if out.get("url") is not None:
        out["url"] = f"{str(out['url']).rstrip('/')}/{quoted}"
    service = out.get("service")
    if service is not None:
        service["path"] = f"{service.get('path') or ''}/{quoted}"
    return {k: v for k, v in out.items() if v is not None}


def build_webhooks(
    handlers: Iterable[AdmissionHandler],
    *,
    resources: Mapping[str, ApiResource | Sequence[ApiResource]],
    name_suffix: str,
    client_config: WebhookClientConfig,
    persistent_only: bool = False,
) -> list[dict[str, Any]]:
    """The ``webhooks`` of a managed configuration: one per handler (see the module docstring);
    ``resources`` maps each handler's resource selector to the served resources it selects (one
    rule each)."""
    out: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for handler in handlers:
        if persistent_only and not handler.persistent:
            continue
        name = webhook_name(handler.id, name_suffix)
        if name in seen:
            raise ValueError(
                f"admission handlers {seen[name]!r} and {handler.id!r} both make the webhook name "
                f"{name!r}; give one of them another id='...'"
            )
        seen[name] = handler.id
        found = resources[handler.resource]
        selected = [found] if isinstance(found, ApiResource) else list(found)
        webhook: dict[str, Any] = {
            "name": name,
            "sideEffects": "NoneOnDryRun" if handler.side_effects else "None",
            "failurePolicy": "Ignore" if handler.ignore_failures else "Fail",
            "matchPolicy": "Equivalent",
            "rules": [
                {
                    "apiGroups": [res.group],
                    "apiVersions": [res.version],
                    "resources": [
                        res.plural if handler.subresource is None else f"{res.plural}/{handler.subresource}"
                    ],
                    "operations": list(handler.operations or ["*"]),
                    "scope": "*",
                }
                for res in selected
            ],
            "clientConfig": _client_config(client_config, handler.id),
            "timeoutSeconds": 30,
            "admissionReviewVersions": ["v1"],
        }
        selector = object_selector(handler.labels)
        if selector is not None:
            webhook["objectSelector"] = selector
        out.append(webhook)
    return out


async def _write(
    client: Client,
    resource: ApiResource,
    name: str,
    webhooks: list[dict[str, Any]],
    *,
    create: bool = True,
) -> None:
    """Make the configuration ``name`` hold exactly ``webhooks``: one merge patch (it replaces the
    list), or one create when the object does not exist yet (with ``create=False``, an absent
    object is left absent: nothing in it points anywhere)."""
    try:
        try:
            await client.patch(resource, name, {"webhooks": webhooks})
        except NotFound:
            if not create:
                return
            body = {
                "apiVersion": resource.api_version,
                "kind": resource.kind,
                "metadata": {"name": name},
                "webhooks": webhooks,
            }
            try:
                await client.create(body, resource=resource)
            except AlreadyExists:  # created meanwhile (another replica): patch it after all
                await client.patch(resource, name, {"webhooks": webhooks})
    except Forbidden:
        log.error("Not enough RBAC permissions to create and patch %s %s.", resource.plural, name)
        raise


_KINDS = ((VALIDATING, False, "validating"), (MUTATING, True, "mutating"))


async def _configure(
    client: Client,
    handlers: list[AdmissionHandler],
    resources: Mapping[str, Sequence[ApiResource]],
    name: str,
    config: WebhookClientConfig,
) -> None:
    for resource, mutating, reason in _KINDS:
        webhooks = build_webhooks(
            [h for h in handlers if h.mutating == mutating],
            resources=resources,
            name_suffix=name,
            client_config=config,
        )
        log.info("Reconfiguring the %s webhook %s.", reason, name)
        await _write(client, resource, name, webhooks)


def _transient(exc: Exception) -> bool:
    """Worth another try: the server was busy or failing, or never answered (a 4xx other than
    409/429 says the same the next time)."""
    if isinstance(exc, ApiError):
        return exc.code in (409, 429) or exc.code >= 500
    return isinstance(exc, OSError | TimeoutError)


async def _clean_one(
    client: Client, resource: ApiResource, name: str, webhooks: list[dict[str, Any]], deadline: float
) -> None:
    """Write one configuration down to ``webhooks``, retrying transient failures with a backoff
    (exponential, jittered) while the next try can start before ``deadline`` (loop time); the
    last failure is raised."""
    loop = asyncio.get_running_loop()
    delay = _CLEANUP_FIRST_DELAY
    attempt = 1
    while True:
        try:
            await _write(client, resource, name, webhooks, create=False)
            return
        except Exception as exc:
            wait = random.uniform(delay / 2, delay)
            if not _transient(exc) or loop.time() + wait >= deadline:
                exc.add_note(f"after {attempt} attempt{'s' if attempt > 1 else ''}")
                raise
            log.warning(
                "Cleaning up the %s %s failed (attempt %d), retrying in %.1f s: %s",
                resource.kind,
                name,
                attempt,
                wait,
                exc,
            )
        await asyncio.sleep(wait)
        delay = min(delay * 2, _CLEANUP_MAX_DELAY)
        attempt += 1


async def _clean_up(
    client: Client,
    handlers: list[AdmissionHandler],
    resources: Mapping[str, Sequence[ApiResource]],
    name: str,
    config: WebhookClientConfig,
) -> None:
    """Patch the configurations down to the persistent webhooks (configurations left pointing at
    a stopped server refuse every request they match, with ``failurePolicy: Fail``).

    Each configuration is cleaned on its own, so that a failure of one never skips the other,
    with retries until ``_CLEANUP_SECONDS`` have passed; the cleanup goes on (bounded by the same
    deadline) when this task is cancelled meanwhile. A configuration that stays dirty is logged
    as an error naming it and why; nothing is raised but the cancellation.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _CLEANUP_SECONDS
    log.info("Cleaning up the admission webhook %s.", name)
    tasks: dict[asyncio.Task[None], ApiResource] = {}
    for resource, mutating, _ in _KINDS:
        webhooks = build_webhooks(
            [h for h in handlers if h.mutating == mutating],
            resources=resources,
            name_suffix=name,
            client_config=config,
            persistent_only=True,
        )
        task = asyncio.ensure_future(_clean_one(client, resource, name, webhooks, deadline))
        tasks[task] = resource
    try:
        try:
            await asyncio.wait(tasks, timeout=max(0.0, deadline - loop.time()))
        except asyncio.CancelledError:
            # asyncio.wait leaves the tasks running: let them finish, as bounded as before
            await asyncio.wait(tasks, timeout=max(0.0, deadline - loop.time()))
            raise
    finally:
        for task, resource in tasks.items():
            why: str | None = None
            if not task.done():
                task.cancel()
                why = f"not done within {_CLEANUP_SECONDS:g} s"
            elif not task.cancelled() and task.exception() is not None:
                exc = task.exception()
                notes = "; ".join(getattr(exc, "__notes__", ()))
                why = f"{type(exc).__name__}: {exc}" + (f" ({notes})" if notes else "")
            if why is None:
                log.info("Cleaned up the %s %s.", resource.kind, name)
            else:
                log.error(
                    "The %s %s stayed dirty: %s. Its webhooks may still point at this stopped "
                    "server and refuse what they match (failurePolicy Fail); remove them with "
                    "kubectl edit %s %s.",
                    resource.kind,
                    name,
                    why,
                    resource.plural,
                    name,
                )


async def serve_admission(
    handlers: list[AdmissionHandler],
    *,
    settings: OperatorSettings,
    client: Client,
    memo: Mapping[str, Any],
    stop: asyncio.Event | None = None,
    resolved: Mapping[str, Sequence[ApiResource]] | None = None,
) -> None:
    """Serve ``handlers`` with ``settings.admission.server`` until ``stop`` is set (or this task
    is cancelled), keeping the configurations ``settings.admission.managed`` (if set) on it.
    ``resolved``: the served resources each handler's selector selects (kopf's resolution at
    start); without it, each handler names one resource."""
    server = settings.admission.server
    managed = settings.admission.managed
    if server is None:
        raise ValueError(
            "admission handlers are served by settings.admission.server: set it in a startup "
            "handler, e.g. settings.admission.server = kopf.WebhookAutoServer()"
        )
    resources: dict[str, Sequence[ApiResource]] = {}
    for h in handlers:
        found = resolved.get(h.resource) if resolved is not None else None
        resources[h.resource] = found if found is not None else [await client.resource(h.resource)]
    if managed is not None:  # a bad name fails here, before anything is served or written
        build_webhooks(handlers, resources=resources, name_suffix=managed, client_config={})
    token = current_client.set(client)
    written: WebhookClientConfig | None = None
    following: asyncio.Future[WebhookClientConfig] | None = None
    stopping = asyncio.ensure_future(stop.wait() if stop is not None else asyncio.Event().wait())
    try:
        async with contextlib.AsyncExitStack() as stack:
            if hasattr(server, "__aenter__") and hasattr(server, "__aexit__"):
                server = await stack.enter_async_context(server)
            configs: AsyncIterator[WebhookClientConfig] = server(
                admission_fn(handlers, memo=memo, resources=resources)
            )
            if hasattr(configs, "aclose"):
                stack.push_async_callback(configs.aclose)
            try:
                while True:
                    following = asyncio.ensure_future(anext(configs))
                    await asyncio.wait({following, stopping}, return_when=asyncio.FIRST_COMPLETED)
                    if not following.done():
                        return  # stop: the configurations are cleaned up while the server still serves
                    try:
                        config = following.result()
                    except StopAsyncIteration:
                        log.warning("The admission server %r has stopped serving.", server)
                        await stopping
                        return
                    if managed is not None:
                        written = config  # cleaned up even if a write fails or is cancelled half-way
                        await _configure(client, handlers, resources, managed, config)
            finally:
                try:
                    if managed is not None and written is not None:
                        await _clean_up(client, handlers, resources, managed, written)
                finally:
                    if following is not None and not following.done():
                        following.cancel()  # the server's generator stops serving
                        with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                            await following
    finally:
        stopping.cancel()
        current_client.reset(token)
