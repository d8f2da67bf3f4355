"""kopf's webhook servers and tunnels (``settings.admission.server``), on kubeop's HTTPS server.

::

    @kopf.on.startup()
    def config(settings: kopf.OperatorSettings, **_):
        settings.admission.server = kopf.WebhookAutoServer()    # or kopf.WebhookServer(port=9443)
        settings.admission.managed = "auto.kopf.dev"            # kubeop.kopf writes the configurations

A server follows kopf's protocol: called with the operator's admission function (a
:data:`WebhookFn`), it serves requests at ``<path>/<handler id>`` and yields the
:data:`WebhookClientConfig` (``url`` or ``service``, ``caBundle``) that makes the API server call
it, again whenever that changes; a custom server written for kopf works the same way.

- :class:`WebhookServer`: HTTPS on ``addr:port`` (all interfaces and a free port by default),
  reported as ``https://<host>:<port><path>`` (``host`` defaults to the address, ``localhost``
  for all interfaces). With ``certfile``/``pkeyfile`` (``password`` for the key) it serves that
  certificate and the caBundle is ``cafile``/``cadata``, else the certificate itself; without, it
  makes a CA and a serving certificate for the host, the address and ``extra_sans`` (kept in a
  private temporary directory while it serves; ``cadump`` writes the CA out). ``verify_cafile`` /
  ``verify_capath`` / ``verify_cadata`` / ``verify_mode`` ask for and verify client certificates
  (the handlers' ``sslpeer``); ``insecure=True`` serves plain HTTP. The files are checked every
  ``file_check_interval`` seconds: kubeop's server reloads a changed certificate by itself, and
  a changed caBundle is yielded again (the managed configurations follow).
- :class:`WebhookK3dServer`, :class:`WebhookMinikubeServer`, :class:`WebhookDockerDesktopServer`:
  the same, reported as the host those clusters' VMs reach their host by.
- :class:`WebhookAutoServer`: one of those, chosen by the API server's certificate (k3s,
  minikube, Docker Desktop) or ``/version`` (``+k3s``), else a plain :class:`WebhookServer`.
- :class:`WebhookAutoTunnel`: as :class:`WebhookAutoServer`; where kopf would fall back to an
  ngrok tunnel, kubeop serves locally and logs so.
- :class:`WebhookNgrokTunnel`: accepted (an operator may set it and then another one) but not
  built on kubeop: serving with it raises an error that names the alternatives.

``WebhookServer(context=...)`` (a ready SSL context) is not taken either: kubeop's server builds
and reloads its own contexts; give ``certfile=``/``pkeyfile=`` and ``verify_*=`` instead.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import hashlib
import ipaddress
import logging
import os
import socket
import ssl
import tempfile
import urllib.parse
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict

import orjson

if TYPE_CHECKING:
    from kubeop.client import Client

__all__ = [
    "Headers",
    "SSLPeer",
    "UserInfo",
    "WebhookAutoServer",
    "WebhookAutoTunnel",
    "WebhookClientConfig",
    "WebhookClientConfigService",
    "WebhookDockerDesktopServer",
    "WebhookFn",
    "WebhookK3dServer",
    "WebhookMinikubeServer",
    "WebhookNgrokTunnel",
    "WebhookServer",
    "WebhookServerProtocol",
    "WebhookUnknown",
    "current_client",
]

# How these kopf names behave on kubeop where it is not as in kopf (read by scripts/kopf_compat.py
# into the compatibility table of docs/migration/from-kopf.md; a name not listed behaves as kopf's).
_DIFFERS = {
    "WebhookServer": "`context=` (a ready SSL context) is not accepted: give `certfile=`/`pkeyfile=` "
    "and `verify_cafile=`; a changed certificate file is reloaded by the server itself.",
    "WebhookAutoTunnel": "Serves locally where kopf would open an ngrok tunnel (and logs so).",
}
_UNSUPPORTED = {
    "WebhookNgrokTunnel": "`kopf.WebhookServer` or `kopf.WebhookAutoServer` (serving with the ngrok "
    "tunnel raises).",
}

log = logging.getLogger("kubeop.kopf.webhooks")

Headers = dict[str, str]
"""The ``headers`` kwarg of admission handlers: the API server's request headers (``kopf.Headers``)."""
SSLPeer = dict[str, Any]
"""The ``sslpeer`` kwarg: the API server's verified client certificate as
:meth:`ssl.SSLSocket.getpeercert` gives it, or empty (``kopf.SSLPeer``)."""


class UserInfo(TypedDict):
    """The ``userinfo`` kwarg: who made the API request (``kopf.UserInfo``)."""

    username: str
    uid: str
    groups: list[str]


class WebhookClientConfigService(TypedDict, total=False):
    """The ``service`` of a webhook's ``clientConfig``: the Service's namespace, name, path and port."""

    namespace: str | None
    name: str | None
    path: str | None
    port: int | None


class WebhookClientConfig(TypedDict, total=False):
    """How the API server reaches a webhook server: ``url`` or ``service``, and the ``caBundle``
    (base64 PEM) it trusts; the handler id is appended to the url/path per webhook."""

    caBundle: str | None
    url: str | None
    service: WebhookClientConfigService | None


class WebhookFn(Protocol):
    """The operator's admission function a server calls for each request (``kopf.WebhookFn``):
    the AdmissionReview in, the AdmissionReview response out; ``webhook`` is the handler id."""

    def __call__(
        self,
        request: Mapping[str, Any],
        *,
        webhook: str | None = None,
        headers: Headers | None = None,
        sslpeer: SSLPeer | None = None,
    ) -> Awaitable[dict[str, Any]]: ...


WebhookServerProtocol = Callable[[WebhookFn], AsyncIterator[WebhookClientConfig]]
"""A server or tunnel: called with the admission function, yields its client configs."""


class WebhookUnknown(LookupError):
    """A request for a handler id the operator does not have (the server answers 404)."""


current_client: contextvars.ContextVar[Client | None] = contextvars.ContextVar(
    "kopf_webhook_client", default=None
)
"""The operator's client while its admission server runs (cluster detection uses it)."""


class WebhookServer:
    """A local HTTPS endpoint for the admission handlers; see the module docstring."""

    DEFAULT_HOST: str | None = None

    def __init__(
        self,
        *,
        addr: str | None = None,
        port: int | None = None,
        path: str | None = None,
        host: str | None = None,
        cadata: bytes | None = None,
        cafile: str | os.PathLike[str] | None = None,
        cadump: str | os.PathLike[str] | None = None,
        context: ssl.SSLContext | None = None,
        insecure: bool = False,
        certfile: str | os.PathLike[str] | None = None,
        pkeyfile: str | os.PathLike[str] | None = None,
        password: str | None = None,
        extra_sans: Iterable[str] = (),
        verify_mode: ssl.VerifyMode | None = None,
        verify_cafile: str | os.PathLike[str] | None = None,
        verify_capath: str | os.PathLike[str] | None = None,
        verify_cadata: str | bytes | None = None,
        file_check_interval: float = 60.0,
    ) -> None:
        name = type(self).__name__
        if port is not None and not (isinstance(port, int) and 0 <= port <= 65535):
            raise ValueError(f"{name}(port={port!r}): a TCP port 1..65535, or None for a free one")
        if (certfile is None) != (pkeyfile is None):
            raise ValueError(
                f"{name}: certfile= and pkeyfile= go together (or give neither for a generated certificate)"
            )
        if insecure and context is not None:
            raise ValueError(f"{name}: insecure=True serves HTTP, it cannot have an SSL context=")
        self.addr = addr
        self.port = port
        self.path = path
        self.host = host
        self.cadata = cadata
        self.cafile = cafile
        self.cadump = cadump
        self.context = context
        self.insecure = insecure
        self.certfile = certfile
        self.pkeyfile = pkeyfile
        self.password = password
        self.extra_sans = list(extra_sans)
        self.verify_mode = verify_mode
        self.verify_cafile = verify_cafile
        self.verify_capath = verify_capath
        self.verify_cadata = verify_cadata
        self.file_check_interval = file_check_interval
        self._generated_ca: bytes | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(addr={self.addr!r}, port={self.port!r}, host={self.host!r})"

    async def __call__(self, fn: WebhookFn) -> AsyncGenerator[WebhookClientConfig, None]:
        async with contextlib.aclosing(self._serve(fn, self.host or self.DEFAULT_HOST)) as configs:
            async for config in configs:  # closed with this generator: the server stops at once
                yield config

    async def _serve(self, fn: WebhookFn, host: str | None) -> AsyncGenerator[WebhookClientConfig, None]:
        from kubeop.webhook.server import WebhookServer as HttpsServer

        if self.context is not None:
            raise TypeError(
                f"{type(self).__name__}(context=...): kubeop's server builds and reloads its own SSL "
                "contexts; give certfile=/pkeyfile= (password=) and verify_cafile= instead"
            )
        port = self.port or _free_port()
        reach = host or _accessible(self.addr)
        root = (self.path or "").rstrip("/")
        with contextlib.ExitStack() as stack:
            options = self._tls_options(stack, reach)
            listen = "*" if self.addr is None else f"[{self.addr}]" if ":" in self.addr else self.addr
            server = HttpsServer(_Routes(fn, root), f"{listen}:{port}", **options)
            await server.start()
            try:
                log.debug("Listening for webhooks at %s%s", server.url, root)
                url = _url("http" if self.insecure else "https", reach, port, root)
                log.debug("Accessing the webhooks at %s", url)
                digest = self._digest()
                while True:
                    yield self._client_config(url)
                    while (now := await self._changed()) == digest:
                        pass
                    log.debug("The webhook certificate files changed: reporting the new CA bundle.")
                    digest = now
            finally:
                await server.stop()

    def _tls_options(self, stack: contextlib.ExitStack, reach: str) -> dict[str, Any]:
        """kubeop's server options: plain HTTP, the given pair, or a generated one."""
        options: dict[str, Any] = {}
        if self.insecure:
            options["insecure"] = True
        elif self.certfile is not None and self.pkeyfile is not None:
            log.debug("Using a provided certificate for HTTPS.")
            cert = Path(self.certfile).absolute()
            options.update(
                cert_dir=cert.parent,
                cert_name=cert.name,
                key_name=str(Path(self.pkeyfile).absolute()),
                key_password=self.password,
            )
        else:
            log.debug("Generating a self-signed certificate for HTTPS.")
            directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="kopf-webhook-"))
            self._generate(Path(directory), [reach, _accessible(self.addr), *self.extra_sans])
            options["cert_dir"] = directory
        if self.verify_mode is not None or self.verify_cafile or self.verify_capath or self.verify_cadata:
            options["tls_setup"] = self._verify
        return options

    def _client_config(self, url: str) -> WebhookClientConfig:
        config = WebhookClientConfig(url=url)
        cadata = self._cadata()
        if cadata is not None:
            config["caBundle"] = base64.b64encode(cadata).decode("ascii")
            if self.cadump is not None:
                Path(self.cadump).write_bytes(cadata)
        return config

    def _generate(self, directory: Path, hosts: list[str]) -> None:
        from kubeop.webhook.certs import CA_NAME, issue_serving

        names: list[str] = []
        for name in hosts:
            try:
                ip = ipaddress.ip_address(name)
            except ValueError:
                pass
            else:
                if ip.is_unspecified:
                    continue  # bindable, not reachable: no SAN
                name = str(ip)
            if name not in names:
                names.append(name)
        issue_serving(directory, names or ["localhost"])
        self._generated_ca = (directory / CA_NAME).read_bytes()

    def _cadata(self) -> bytes | None:
        if self.insecure:
            return self.cadata or (Path(self.cafile).read_bytes() if self.cafile is not None else None)
        if self.certfile is None:
            return self._generated_ca  # the CA of the generated certificate, whatever cafile says
        if self.cadata is not None:
            return self.cadata
        return Path(self.cafile if self.cafile is not None else self.certfile).read_bytes()

    def _files(self) -> list[Path]:
        return [Path(p) for p in (self.certfile, self.pkeyfile, self.cafile) if p is not None]

    def _digest(self) -> str:
        hasher = hashlib.sha256()
        for path in self._files():
            with contextlib.suppress(OSError):
                hasher.update(path.read_bytes())
        return hasher.hexdigest()

    async def _changed(self) -> str:
        if not self._files():
            await asyncio.Event().wait()  # nothing to watch: serve until cancelled
        await asyncio.sleep(self.file_check_interval)
        return self._digest()

    def _verify(self, ctx: ssl.SSLContext) -> None:
        if self.verify_mode is not None:
            ctx.verify_mode = self.verify_mode
        if self.verify_cafile or self.verify_capath or self.verify_cadata:
            ctx.load_verify_locations(self.verify_cafile, self.verify_capath, self.verify_cadata)
            if ctx.verify_mode == ssl.CERT_NONE:
                ctx.verify_mode = ssl.CERT_OPTIONAL


class WebhookK3dServer(WebhookServer):
    """A :class:`WebhookServer` reached from K3d/K3s as ``host.k3d.internal``."""

    DEFAULT_HOST = "host.k3d.internal"


class WebhookMinikubeServer(WebhookServer):
    """A :class:`WebhookServer` reached from Minikube as ``host.minikube.internal``."""

    DEFAULT_HOST = "host.minikube.internal"


class WebhookDockerDesktopServer(WebhookServer):
    """A :class:`WebhookServer` reached from Docker Desktop as ``host.docker.internal``."""

    DEFAULT_HOST = "host.docker.internal"


class WebhookNgrokTunnel:
    """kopf's ngrok tunnel: accepted, not built on kubeop (serving with it raises)."""

    def __init__(
        self,
        *,
        addr: str | None = None,
        port: int | None = None,
        path: str | None = None,
        token: str | None = None,
        region: str | None = None,
        binary: str | os.PathLike[str] | None = None,
    ) -> None:
        self.addr, self.port, self.path = addr, port, path
        self.token, self.region, self.binary = token, region, binary

    def __repr__(self) -> str:
        return f"WebhookNgrokTunnel(addr={self.addr!r}, port={self.port!r}, path={self.path!r})"

    async def __call__(self, fn: WebhookFn) -> AsyncGenerator[WebhookClientConfig, None]:
        raise NotImplementedError(
            "settings.admission.server = kopf.WebhookNgrokTunnel(...) is not built on kubeop: use "
            "kopf.WebhookServer(host=...) behind your own tunnel, or kopf.WebhookAutoServer() when "
            "the API server can reach this machine"
        )
        yield WebhookClientConfig()  # pragma: no cover - makes this an async generator


async def guess_host() -> str | None:
    """The host a local cluster's VM reaches its host by (k3d, minikube, Docker Desktop), from
    the API server's certificate or version; None for any other cluster."""
    client = current_client.get()
    if client is None:
        return None
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    url = urllib.parse.urlsplit(client.config.server)
    if url.scheme == "https" and url.hostname:
        address = (url.hostname, url.port or 443)
        with contextlib.suppress(OSError, ValueError):
            pem = await asyncio.to_thread(ssl.get_server_certificate, address, timeout=5)
            cert = x509.load_pem_x509_certificate(pem.encode())

            def first(name: x509.Name, oid: x509.ObjectIdentifier) -> str:
                values = name.get_attributes_for_oid(oid)
                return str(values[0].value) if values else ""

            subject_cn = first(cert.subject, NameOID.COMMON_NAME)
            subject_org = first(cert.subject, NameOID.ORGANIZATION_NAME)
            issuer_cn = first(cert.issuer, NameOID.COMMON_NAME)
            try:
                san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
                dns_names = san.get_values_for_type(x509.DNSName)
            except x509.ExtensionNotFound:
                dns_names = []
            if subject_cn == "k3s" or subject_org == "k3s" or issuer_cn.startswith("k3s-"):
                return WebhookK3dServer.DEFAULT_HOST
            if subject_cn == "minikube" or issuer_cn == "minikubeCA":
                return WebhookMinikubeServer.DEFAULT_HOST
            if "docker-for-desktop" in dns_names:
                return WebhookDockerDesktopServer.DEFAULT_HOST
    from kubeop.core.request import ApiRequest

    with contextlib.suppress(Exception):
        version = await client.request(ApiRequest("GET", "/version", target="the server's version"))
        if "+k3s" in str((version or {}).get("gitVersion", "")):
            return WebhookK3dServer.DEFAULT_HOST
    return None


class WebhookAutoServer(WebhookServer):
    """A :class:`WebhookServer` whose host is guessed for k3d, minikube and Docker Desktop."""

    async def __call__(self, fn: WebhookFn) -> AsyncGenerator[WebhookClientConfig, None]:
        host = self.host or await guess_host()
        if host is None:
            log.debug("Cluster detection failed, running a simple local server.")
        else:
            log.debug("Cluster detection found the hostname: %s", host)
        async with contextlib.aclosing(self._serve(fn, host)) as configs:
            async for config in configs:
                yield config


class WebhookAutoTunnel:
    """As :class:`WebhookAutoServer`: a local server (kubeop has no ngrok fallback)."""

    def __init__(self, *, addr: str | None = None, port: int | None = None, path: str | None = None) -> None:
        self.addr, self.port, self.path = addr, port, path

    def __repr__(self) -> str:
        return f"WebhookAutoTunnel(addr={self.addr!r}, port={self.port!r}, path={self.path!r})"

    async def __call__(self, fn: WebhookFn) -> AsyncGenerator[WebhookClientConfig, None]:
        host = await guess_host()
        if host is None:
            log.info("Cluster detection failed; no tunnel on kubeop: serving locally as WebhookAutoServer.")
        server = WebhookServer(addr=self.addr, port=self.port, path=self.path, host=host)
        async with contextlib.aclosing(server(fn)) as configs:
            async for config in configs:
                yield config


class _Routes:
    """kubeop's server answering ``<root>/<handler id>`` through kopf's admission function."""

    def __init__(self, fn: WebhookFn, root: str) -> None:
        self.fn, self.prefix = fn, f"{root}/"

    def __len__(self) -> int:
        return 1

    async def handle(
        self,
        path: str,
        body: bytes,
        timeout: float | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        peer: Mapping[str, Any] | None = None,
    ) -> tuple[int, bytes]:
        from kubeop.webhook.review import BadReview

        if not path.startswith(self.prefix) or path == self.prefix:
            return 404, b'{"message": "no webhook is served at this path"}'
        webhook = urllib.parse.unquote(path[len(self.prefix) :])
        try:
            request = orjson.loads(body)
            if not isinstance(request, dict):
                raise BadReview(f"the body is a JSON {type(request).__name__}, not an AdmissionReview")
            response = await self.fn(
                request, webhook=webhook, headers=dict(headers or {}), sslpeer=dict(peer or {})
            )
        except WebhookUnknown as exc:
            return 404, orjson.dumps({"message": str(exc)})
        except (orjson.JSONDecodeError, BadReview) as exc:
            log.warning("webhook %s: bad review: %s", path, exc)
            return 400, orjson.dumps({"message": str(exc)})
        except Exception as exc:  # the review answers every decoded request: a body it cannot read
            log.warning("webhook %s: the body could not be read: %s", path, type(exc).__name__)
            message = f"the body could not be read as an AdmissionReview ({type(exc).__name__})"
            return 400, orjson.dumps({"message": message})
        return 200, orjson.dumps(response)


def _free_port() -> int:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _accessible(addr: str | None) -> str:
    """The address clients reach a listening one by (``localhost`` for all interfaces)."""
    if addr is None:
        return "localhost"
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return addr
    if ip.is_unspecified:
        return "127.0.0.1" if ip.version == 4 else "::1"
    return addr


def _url(scheme: Literal["http", "https"], host: str, port: int, path: str) -> str:
    with contextlib.suppress(ValueError):
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    default = (scheme, port) in (("http", 80), ("https", 443))
    return urllib.parse.urlunsplit((scheme, host if default else f"{host}:{port}", path, "", ""))
