"""APIServer: serves kinds declared as kubeop models, kept in a storage, over HTTPS as an
aggregated API behind kube-apiserver; a Runnable of the Manager (every replica, with the servers).

::

    class Widget(CustomResource, group="example.com", version="v1alpha1"):
        spec: WidgetSpec

    server = APIServer([Widget], MemoryStorage(), address="*:8443", cert_dir="/certs")
    manager.add(server)            # or: await server.start(client) ... await server.stop()

On start it reads the front proxy's CA and header names from
``kube-system/extension-apiserver-authentication`` (or takes ``requestheader=``), asks TLS
clients for a certificate verified against that CA, and sends TokenReviews and
SubjectAccessReviews through ``client`` (or ``review=``); see :mod:`kubeop.apiserver.auth`.
The serving certificate (``tls.crt``/``tls.key`` in ``cert_dir``) is reloaded when it changes,
as the webhook server's is.

Served without authentication: ``/healthz``, ``/livez`` and ``/readyz`` only. Everything else
is authenticated, authorized and answered with a ``Status`` on failure. Bodies above
``max_body`` (3 MiB by default, kube-apiserver's own limit) are 413 before they are read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import ssl
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from kubeop.apiserver.auth import (
    CONFIGMAP_NAME,
    CONFIGMAP_NAMESPACE,
    Authenticator,
    Authorizer,
    RequestHeaderConfig,
    Review,
)
from kubeop.apiserver.discovery import (
    aggregated_discovery,
    api_group,
    api_group_list,
    api_resource_list,
    core_discovery,
    discovery_version,
)
from kubeop.apiserver.handlers import JSON, Attributes, Handlers, decode_segments
from kubeop.apiserver.memory import MemoryStorage
from kubeop.apiserver.openapi import OpenApi
from kubeop.apiserver.resource import ServedResource
from kubeop.apiserver.status import StatusError
from kubeop.apiserver.storage import Storage
from kubeop.client.httpserver import HttpServer, Limits, Request, Response, Route, parse_address
from kubeop.core.resource import ApiResource
from kubeop.crd.resource import CustomResource
from kubeop.manager.runnable import Phase
from kubeop.webhook.server import CertWatcher

if TYPE_CHECKING:
    from kubeop.client import Client
    from kubeop.cluster import Cluster

__all__ = ["APIServer"]

log = logging.getLogger("kubeop.apiserver")

DEFAULT_MAX_BODY = 3 * 1024 * 1024
_HEALTH = frozenset({"/healthz", "/livez", "/readyz"})
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"})
_CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap", namespaced=True)
_REVIEWS = {
    "TokenReview": ApiResource(
        "authentication.k8s.io", "v1", "tokenreviews", kind="TokenReview", namespaced=False
    ),
    "SubjectAccessReview": ApiResource(
        "authorization.k8s.io", "v1", "subjectaccessreviews", kind="SubjectAccessReview", namespaced=False
    ),
}


class APIServer:
    """An aggregated API server for ``resources`` (CustomResource classes of one group version);
    see the module docstring."""

    phase = Phase.SERVERS
    needs_leader = False
    name = "apiserver"

    def __init__(
        self,
        resources: Sequence[type[CustomResource]],
        storage: Storage | None = None,
        *,
        address: str = "*:8443",
        cert_dir: str | os.PathLike[str] | None = None,
        requestheader: RequestHeaderConfig | None = None,
        review: Review | None = None,
        max_body: int = DEFAULT_MAX_BODY,
        bookmark_interval: float = 10.0,
        limits: Limits | None = None,
    ) -> None:
        if not resources:
            raise ValueError("APIServer needs at least one resource (a CustomResource class)")
        served = [ServedResource(model) for model in resources]
        versions = {(s.decl.group, s.decl.version) for s in served}
        if len(versions) != 1:
            raise ValueError(
                f"APIServer serves one group version; got {sorted('/'.join(v) for v in versions)}: "
                "run one APIServer per group version (each gets its own APIService)"
            )
        plurals = [s.decl.plural for s in served]
        if len(set(plurals)) != len(plurals):
            raise ValueError(f"APIServer: two resources share a plural in {plurals}")
        if cert_dir is None:
            raise ValueError("APIServer needs cert_dir= (a directory holding tls.crt and tls.key)")
        self.group, self.version = next(iter(versions))
        self.resources = served
        self.storage: Storage = storage if storage is not None else MemoryStorage()
        self.host, self.port = parse_address(address, example="*:8443")
        self.cert_dir = Path(cert_dir)
        self.max_body = max_body
        self._requestheader = requestheader
        self._review = review
        self._limits = limits or Limits(idle_timeout=90.0)
        self._handlers = Handlers(served, self.storage, bookmark_interval=bookmark_interval)
        self._openapi = OpenApi(self.group, self.version, served)
        self._prefix = f"/apis/{self.group}/{self.version}"
        self._authn: Authenticator | None = None
        self._authz: Authorizer | None = None
        self._http: HttpServer | None = None
        self._watcher: CertWatcher | None = None
        self._route = Route(self._handle, _METHODS, max_body)

    def __repr__(self) -> str:
        return f"<APIServer {self.group}/{self.version} on port {self.port}>"

    @property
    def url(self) -> str:
        """The address it serves on (``https://host:port``), once started."""
        host = "127.0.0.1" if self.host is None else f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"

    def ready(self) -> bool:
        """Whether it is serving now (the Manager's readiness check)."""
        return self._http is not None and self._http.serving

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self, cluster: Cluster, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set (as a Manager's runnable), with ``cluster``'s client for
        authentication and authorization reviews."""
        await self.start(cluster.api)
        try:
            await stop.wait()
        finally:
            await self.stop()

    async def start(self, client: Client | None = None) -> None:
        """Listen. ``client`` reads the ConfigMap and sends the reviews unless ``requestheader=``
        and ``review=`` were given."""
        config = self._requestheader
        if config is None:
            if client is None:
                raise ValueError("APIServer.start() needs a client, or requestheader= and review= given")
            configmap = await client.get(_CONFIGMAPS, CONFIGMAP_NAME, namespace=CONFIGMAP_NAMESPACE)
            config = RequestHeaderConfig.from_configmap(configmap.get("data") or {})
        review = self._review
        if review is None:
            if client is None:
                raise ValueError("APIServer.start() needs a client, or review= given")
            review = _client_review(client)
        self._authn = Authenticator(config, review)
        self._authz = Authorizer(review)
        ca = config.client_ca

        def verify_front_proxy(ctx: ssl.SSLContext) -> None:
            ctx.load_verify_locations(cadata=ca)
            ctx.verify_mode = ssl.CERT_OPTIONAL

        watcher = self._watcher = CertWatcher(
            self.cert_dir / "tls.crt", self.cert_dir / "tls.key", setup=verify_front_proxy
        )
        http = self._http = HttpServer(
            lambda _path: self._route,
            self.host,
            self.port,
            name="apiserver",
            log=log,
            limits=self._limits,
            tls=watcher.current,
            error=_status_error,
        )
        await http.start()
        self.port = http.port
        log.info(
            "serving %s/%s (%s) on %s",
            self.group,
            self.version,
            ", ".join(r.decl.plural for r in self.resources),
            self.url,
        )

    async def stop(self) -> None:
        """Stop serving, close the connections, then close the storage."""
        if self._http is not None:
            await self._http.stop()
            self._http = None
        await self.storage.close()

    # -- requests ----------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        path = request.path
        if path in _HEALTH:
            return Response(200, b"ok")
        try:
            return await self._answer(request, path)
        except StatusError as exc:
            if exc.code >= 500:
                log.warning("%s %s: %s", request.method, path, exc.message)
            return _status(exc)

    async def _answer(self, request: Request, path: str) -> Response:
        assert self._authn is not None and self._authz is not None
        user = await self._authn.authenticate(request)
        prefix = self._prefix
        if path == prefix or path.startswith(prefix + "/"):
            rest = decode_segments(path, prefix)
            if rest:
                attrs, target = self._handlers.attributes(request, rest, self.group, self.version)
                authz = self._authz
                await authz.authorize(user, attrs)

                async def may_create() -> None:
                    await authz.authorize(user, dataclasses.replace(attrs, verb="create"))

                return await self._handlers.answer(request, attrs, target, may_create=may_create)
        if request.method not in ("GET", "HEAD"):
            raise StatusError(405, f"{request.method} is not allowed on {path}")
        await self._authz.authorize(user, Attributes("get", path))
        if path.rstrip("/") == "/apis" and (wanted := discovery_version(request.header("accept"))):
            body, media = aggregated_discovery(self.group, self.version, self.resources, wanted)
            return Response(200, orjson.dumps(body), media)
        if path.rstrip("/") == "/api":
            body, media = core_discovery(discovery_version(request.header("accept")))
            return Response(200, orjson.dumps(body), media)
        document = self._document(path)
        if document is None:
            raise StatusError(404, f"the server could not find the requested resource ({path})")
        return Response(200, document, JSON)

    def _document(self, path: str) -> bytes | None:
        group, version = self.group, self.version
        path = path.rstrip("/") or "/"
        if path == "/apis":
            return orjson.dumps(api_group_list(group, version))
        if path == f"/apis/{group}":
            return orjson.dumps(api_group(group, version))
        if path == self._prefix:
            return orjson.dumps(api_resource_list(group, version, self.resources))
        if path == "/openapi/v3":
            return self._openapi.index
        if path == f"/openapi/v3/{self._openapi.path}":
            return self._openapi.v3
        if path == "/openapi/v2":
            return self._openapi.v2
        return None


def _client_review(client: Client) -> Review:
    async def review(body: dict[str, Any]) -> Mapping[str, Any]:
        answer: Mapping[str, Any] = await client.create(body, resource=_REVIEWS[body["kind"]])
        return answer

    return review


def _status(exc: StatusError) -> Response:
    headers = (("WWW-Authenticate", 'Bearer realm="kubeop"'),) if exc.code == 401 else ()
    return Response(exc.code, orjson.dumps(exc.status()), JSON, headers)


def _status_error(code: int, message: str) -> Response:
    """The HTTP core's own refusals (413, 431, 408...) as Status objects too."""
    return _status(StatusError(code, message))
