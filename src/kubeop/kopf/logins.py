"""kopf's login functions: the credentials of another client's configuration, as kopf reads them.

Each returns a :class:`~kubeop.kopf.ConnectionInfo` (or None when its source is absent), to be
returned from an ``@kopf.on.login`` handler. ``login_via_client`` and ``login_via_async_client``
load the ``kubernetes`` / ``kubernetes_asyncio`` library's configuration (in-cluster, else the
kubeconfig), which also configures that library's default client for the handlers, as under
kopf. Neither library nor pykube is a dependency: they are imported when the function runs.
"""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Sequence
from typing import Any

import yaml

from kubeop.kopf.activities import ConnectionInfo, LoginError

__all__ = [
    "login_via_async_client",
    "login_via_client",
    "login_via_pykube",
    "login_with_kubeconfig",
    "login_with_service_account",
]

PRIORITY_OF_CLIENT = 10
PRIORITY_OF_ASYNC_CLIENT = 15
PRIORITY_OF_PYKUBE = 20
PRIORITY_OF_KUBECONFIG = 10
PRIORITY_OF_SERVICE_ACCOUNT = 20
SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def _trust_env(settings: Any) -> bool:
    return bool(getattr(getattr(settings, "networking", None), "trust_env", False))


def _scheme_token(header: str | None) -> tuple[str | None, str | None]:
    """An Authorization header value as (scheme, token): ``"Bearer abc"`` or a bare ``"abc"``."""
    parts: Sequence[str] = header.split(" ", 1) if header else []
    if not parts:
        return None, None
    return (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1])


def _from_client_config(config: Any, header: str | None, settings: Any, priority: int) -> ConnectionInfo:
    scheme, token = _scheme_token(header)
    return ConnectionInfo(
        server=config.host,
        ca_path=config.ssl_ca_cert,
        insecure=not config.verify_ssl,
        username=config.username or None,
        password=config.password or None,
        scheme=scheme,
        token=token,
        certificate_path=config.cert_file,
        private_key_path=config.key_file,
        proxy_url=getattr(config, "proxy", None) if priority == PRIORITY_OF_ASYNC_CLIENT else None,
        trust_env=_trust_env(settings),
        priority=priority,
    )


def _optional(package: str, *modules: str) -> Any:
    """``package`` with ``modules`` imported, untyped (whether or not the library and its stubs are
    installed), or None when it is not installed."""
    try:
        for module in modules:
            importlib.import_module(module)
        return importlib.import_module(package)
    except ImportError:
        return None


def login_via_client(*, logger: Any, settings: Any = None, **_: Any) -> ConnectionInfo | None:
    """The ``kubernetes`` library's configuration (None if the library is not installed)."""
    kubernetes = _optional("kubernetes", "kubernetes.config", "kubernetes.client")
    if kubernetes is None:
        return None
    try:
        kubernetes.config.load_incluster_config()
        logger.debug("Client is configured in cluster with service account.")
    except kubernetes.config.ConfigException:
        try:
            kubernetes.config.load_kube_config()
            logger.debug("Client is configured via kubeconfig file.")
        except kubernetes.config.ConfigException:
            raise LoginError(
                "Cannot authenticate the client library neither in-cluster, nor via kubeconfig."
            ) from None
    config = kubernetes.client.Configuration.get_default_copy()
    header = config.get_api_key_with_prefix("BearerToken") or config.get_api_key_with_prefix("authorization")
    return _from_client_config(config, header, settings, PRIORITY_OF_CLIENT)


async def login_via_async_client(*, logger: Any, settings: Any = None, **_: Any) -> ConnectionInfo | None:
    """The ``kubernetes_asyncio`` library's configuration (None if it is not installed)."""
    kubernetes_asyncio = _optional(
        "kubernetes_asyncio", "kubernetes_asyncio.config", "kubernetes_asyncio.client"
    )
    if kubernetes_asyncio is None:
        return None
    try:
        kubernetes_asyncio.config.load_incluster_config()
        logger.debug("Async client is configured in cluster with service account.")
    except kubernetes_asyncio.config.ConfigException:
        try:
            await kubernetes_asyncio.config.load_kube_config()
            logger.debug("Async client is configured via kubeconfig file.")
        except kubernetes_asyncio.config.ConfigException:
            raise LoginError(
                "Cannot authenticate the async client library neither in-cluster, nor via kubeconfig."
            ) from None
    config = kubernetes_asyncio.client.Configuration.get_default_copy()
    header = config.get_api_key_with_prefix("BearerToken")
    if inspect.isawaitable(header):
        header = await header
    return _from_client_config(config, header, settings, PRIORITY_OF_ASYNC_CLIENT)


def login_via_pykube(*, logger: Any, settings: Any = None, **_: Any) -> ConnectionInfo | None:
    """pykube's configuration (in-cluster, else the kubeconfig; None if pykube is not installed)."""
    try:
        import pykube  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        return None
    try:
        config = pykube.KubeConfig.from_service_account()
        logger.debug("Pykube is configured in cluster with service account.")
    except FileNotFoundError:
        try:
            config = pykube.KubeConfig.from_file()
            logger.debug("Pykube is configured via kubeconfig file.")
        except (pykube.PyKubeError, FileNotFoundError):
            raise LoginError("Cannot authenticate pykube neither in-cluster, nor via kubeconfig.") from None
    provider_token = None
    if config.user.get("auth-provider"):
        pykube.HTTPClient(config).get(version="", base="/")  # lets pykube refresh the provider's token
        provider_token = config.user.get("auth-provider", {}).get("config", {}).get("access-token")
    ca = config.cluster.get("certificate-authority")
    cert = config.user.get("client-certificate")
    key = config.user.get("client-key")
    return ConnectionInfo(
        server=config.cluster.get("server"),
        ca_path=ca.filename() if ca else None,
        insecure=config.cluster.get("insecure-skip-tls-verify"),
        username=config.user.get("username"),
        password=config.user.get("password"),
        token=config.user.get("token") or provider_token,
        certificate_path=cert.filename() if cert else None,
        private_key_path=key.filename() if key else None,
        default_namespace=config.namespace,
        proxy_url=config.cluster.get("proxy-url"),
        trust_env=_trust_env(settings),
        priority=PRIORITY_OF_PYKUBE,
    )


def login_with_service_account(*, settings: Any = None, **_: Any) -> ConnectionInfo | None:
    """The pod's service account token (None outside a pod), for ``https://kubernetes.default.svc``."""
    token_path = os.path.join(SERVICE_ACCOUNT, "token")
    if not os.path.exists(token_path):
        return None
    with open(token_path, encoding="utf-8") as f:
        token = f.read().strip()
    namespace = None
    ns_path = os.path.join(SERVICE_ACCOUNT, "namespace")
    if os.path.exists(ns_path):
        with open(ns_path, encoding="utf-8") as f:
            namespace = f.read().strip()
    ca_path = os.path.join(SERVICE_ACCOUNT, "ca.crt")
    return ConnectionInfo(
        server="https://kubernetes.default.svc",
        ca_path=ca_path if os.path.exists(ca_path) else None,
        token=token or None,
        default_namespace=namespace or None,
        trust_env=_trust_env(settings),
        priority=PRIORITY_OF_SERVICE_ACCOUNT,
    )


def login_with_kubeconfig(*, settings: Any = None, **_: Any) -> ConnectionInfo | None:
    """The current context of ``$KUBECONFIG`` (its files merged, the first one winning) or
    ``~/.kube/config``; None when there is neither. Only static credentials: no exec plugins."""
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig and os.path.exists(os.path.expanduser("~/.kube/config")):
        kubeconfig = "~/.kube/config"
    if not kubeconfig:
        return None
    paths = [os.path.expanduser(p.strip()) for p in kubeconfig.split(os.pathsep) if p.strip()]
    current: str | None = None
    sections: dict[str, dict[str, Any]] = {"contexts": {}, "clusters": {}, "users": {}}
    inner = {"contexts": "context", "clusters": "cluster", "users": "user"}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            config = yaml.safe_load(f.read()) or {}
        if current is None:
            current = config.get("current-context")
        for section, items in sections.items():
            for item in config.get(section) or []:
                items.setdefault(item["name"], item.get(inner[section]) or {})
    if current is None:
        raise LoginError("Current context is not set in kubeconfigs.")
    try:
        context = sections["contexts"][current]
        cluster = sections["clusters"][context["cluster"]]
        user = sections["users"][context["user"]]
    except KeyError as exc:
        raise LoginError(f"The kubeconfigs {paths} have no {exc} for the context {current!r}.") from None
    provider_token = (user.get("auth-provider") or {}).get("config", {}).get("access-token")
    return ConnectionInfo(
        server=cluster.get("server"),
        ca_path=cluster.get("certificate-authority"),
        ca_data=cluster.get("certificate-authority-data"),
        insecure=cluster.get("insecure-skip-tls-verify"),
        certificate_path=user.get("client-certificate"),
        certificate_data=user.get("client-certificate-data"),
        private_key_path=user.get("client-key"),
        private_key_data=user.get("client-key-data"),
        username=user.get("username"),
        password=user.get("password"),
        token=user.get("token") or provider_token,
        default_namespace=context.get("namespace"),
        proxy_url=cluster.get("proxy-url"),
        trust_env=_trust_env(settings),
        priority=PRIORITY_OF_KUBECONFIG,
    )
