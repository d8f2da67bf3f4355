"""Serving kopf's admission handlers: ``settings.admission.server`` and ``.managed``.

:func:`serve_admission` runs beside the operator's controllers: it resolves each handler's
resource, calls the server (:mod:`kubeop.kopf.webhooks`) with the handlers' admission function,
and, with ``settings.admission.managed = "<name>"``, writes the ValidatingWebhookConfiguration
and the MutatingWebhookConfiguration ``<name>`` whenever the server yields a client config
(at start, and when its CA bundle changes): one request each (a merge patch replacing the
``webhooks`` list, which kopf's configurations own whole; a create when the object is absent).
On stop (before the server closes) they are patched down to the ``persistent=True`` handlers'
webhooks, as kopf does; the objects stay.

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
import re
import urllib.parse
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from kubeop.client import Client
from kubeop.core.errors import AlreadyExists, Forbidden, NotFound
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
_CLEANUP_SECONDS = 10.0


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
    resources: Mapping[str, ApiResource],
    name_suffix: str,
    client_config: WebhookClientConfig,
    persistent_only: bool = False,
) -> list[dict[str, Any]]:
    """The ``webhooks`` of a managed configuration: one per handler (see the module docstring);
    ``resources`` maps each handler's resource name to the served resource it names."""
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
        res = resources[handler.resource]
        plural = res.plural if handler.subresource is None else f"{res.plural}/{handler.subresource}"
        webhook: dict[str, Any] = {
            "name": name,
            "sideEffects": "NoneOnDryRun" if handler.side_effects else "None",
            "failurePolicy": "Ignore" if handler.ignore_failures else "Fail",
            "matchPolicy": "Equivalent",
            "rules": [
                {
                    "apiGroups": [res.group],
                    "apiVersions": [res.version],
                    "resources": [plural],
                    "operations": list(handler.operations or ["*"]),
                    "scope": "*",
                }
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


async def _write(client: Client, resource: ApiResource, name: str, webhooks: list[dict[str, Any]]) -> None:
    """Make the configuration ``name`` hold exactly ``webhooks``: one merge patch (it replaces the
    list), or one create when the object does not exist yet."""
    try:
        try:
            await client.patch(resource, name, {"webhooks": webhooks})
        except NotFound:
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


async def _configure(
    client: Client,
    handlers: list[AdmissionHandler],
    resources: Mapping[str, ApiResource],
    name: str,
    config: WebhookClientConfig,
    *,
    persistent_only: bool = False,
) -> None:
    for resource, mutating, reason in ((VALIDATING, False, "validating"), (MUTATING, True, "mutating")):
        chosen = [h for h in handlers if h.mutating == mutating]
        webhooks = build_webhooks(
            chosen,
            resources=resources,
            name_suffix=name,
            client_config=config,
            persistent_only=persistent_only,
        )
        if persistent_only:
            log.info("Cleaning up the admission webhook %s.", name)
        else:
            log.info("Reconfiguring the %s webhook %s.", reason, name)
        await _write(client, resource, name, webhooks)


async def _clean_up(
    client: Client,
    handlers: list[AdmissionHandler],
    resources: Mapping[str, ApiResource],
    name: str,
    config: WebhookClientConfig,
) -> None:
    """Patch the configurations down to the persistent webhooks, even when cancelled meanwhile
    (configurations left pointing at a stopped server would refuse every request they match)."""
    task = asyncio.ensure_future(_configure(client, handlers, resources, name, config, persistent_only=True))
    try:
        async with asyncio.timeout(_CLEANUP_SECONDS):
            await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(_CLEANUP_SECONDS):
                await task
        raise
    except Exception as exc:
        task.cancel()
        log.error("Could not clean up the admission webhook %s: %s", name, exc)


async def serve_admission(
    handlers: list[AdmissionHandler],
    *,
    settings: OperatorSettings,
    client: Client,
    memo: Mapping[str, Any],
    stop: asyncio.Event | None = None,
) -> None:
    """Serve ``handlers`` with ``settings.admission.server`` until ``stop`` is set (or this task
    is cancelled), keeping the configurations ``settings.admission.managed`` (if set) on it."""
    server = settings.admission.server
    managed = settings.admission.managed
    if server is None:
        raise ValueError(
            "admission handlers are served by settings.admission.server: set it in a startup "
            "handler, e.g. settings.admission.server = kopf.WebhookAutoServer()"
        )
    resources = {h.resource: await client.resource(h.resource) for h in handlers}
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
            configs: AsyncIterator[WebhookClientConfig] = server(admission_fn(handlers, memo=memo))
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
