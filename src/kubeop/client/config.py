"""ClientConfig: everything needed to reach and authenticate to one API server.

Produced by :func:`~kubeop.client.kubeconfig.load_kubeconfig`, :func:`~kubeop.client.incluster.
in_cluster_config` or written by hand; the client never reads files or the environment on its
own, so tests and multi-cluster programs are explicit about where a connection comes from.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

__all__ = ["ClientConfig", "ConfigError", "ExecConfig", "load_config"]


class ConfigError(Exception):
    """The connection configuration is missing or wrong; the message names the file and field."""


@dataclass(frozen=True, slots=True)
class ExecConfig:
    """An exec credential plugin (``users[].user.exec`` in a kubeconfig).

    ``command`` is resolved like kubectl does: a path with a separator is relative to the
    kubeconfig file's directory, a bare name is looked up on PATH.
    """

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    api_version: str = "client.authentication.k8s.io/v1"
    provide_cluster_info: bool = False
    install_hint: str = ""
    interactive_mode: str = "IfAvailable"


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Connection, TLS, authentication and client-side limits for one API server.

    TLS is verified unless ``insecure_skip_tls_verify`` is set. CA and client certificate/key may
    be given inline (PEM bytes) or as file paths; inline wins when both are set. Of the
    credentials, a static ``token`` wins over ``token_file`` (re-read as it rotates), which wins
    over ``exec``; client certificates can be combined with any of them.

    ``qps``/``burst`` configure the client-side token bucket; ``qps=None`` disables it and leaves
    throttling to the server's priority and fairness. ``compression`` lets the server gzip large
    responses (it only does so above 128 KB). It is on by default, as in client-go, because it
    was measured to win even on loopback: a 10,000-object list arrives in fewer, larger chunks and
    costs the client less CPU than the uncompressed stream (bench/client/RESULTS.md).
    ``proxy_url`` sends requests through an HTTP(S) proxy (``proxy-url`` in a kubeconfig).
    ``source`` describes where the config came from (file and context) for error messages.
    """

    server: str
    namespace: str = "default"
    ca_data: bytes | None = None
    ca_file: str | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    client_cert_data: bytes | None = None
    client_cert_file: str | None = None
    client_key_data: bytes | None = None
    client_key_file: str | None = None
    token: str | None = None
    token_file: str | None = None
    username: str | None = None
    password: str | None = None
    exec: ExecConfig | None = None
    qps: float | None = 50.0
    burst: int = 100
    max_retries: int = 5
    request_timeout: float = 60.0
    connect_timeout: float = 10.0
    max_connections: int = 100
    compression: bool = True
    proxy_url: str | None = None
    user_agent: str = "kubeop"
    source: str = "explicit configuration"
    extra_headers: Sequence[tuple[str, str]] = ()

    def __post_init__(self) -> None:
        if not self.server:
            raise ConfigError(f"{self.source}: no server URL")
        if not self.server.startswith(("https://", "http://")):
            raise ConfigError(f"{self.source}: server {self.server!r} is not an http(s) URL")
        if self.qps is not None and self.qps <= 0:
            raise ConfigError(f"{self.source}: qps must be positive or None (no client-side limit)")
        if self.burst < 1:
            raise ConfigError(f"{self.source}: burst must be at least 1")
        if self.proxy_url and not self.proxy_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"{self.source}: proxy-url {self.proxy_url!r} is not supported (only http(s) proxies)"
            )

    def with_options(self, **changes: object) -> ClientConfig:
        """A copy with some fields changed (``config.with_options(qps=None, namespace="x")``)."""
        return replace(self, **changes)  # type: ignore[arg-type]


def load_config(*, context: str | None = None, kubeconfig: str | Sequence[str] | None = None) -> ClientConfig:
    """The config a program would use by default, in kubectl's order.

    An explicit ``kubeconfig`` path (or paths) first; otherwise ``$KUBECONFIG`` or
    ``~/.kube/config`` if it exists; otherwise the in-cluster service account. Raises
    :class:`ConfigError` saying what was tried when none is usable.
    """
    # Imported here: both modules build ClientConfig, so they import this one.
    from kubeop.client.incluster import in_cluster_config, is_in_cluster
    from kubeop.client.kubeconfig import default_kubeconfig_paths, load_kubeconfig

    if kubeconfig is not None:
        return load_kubeconfig(kubeconfig, context=context)
    paths = default_kubeconfig_paths()
    if any(os.path.exists(p) for p in paths):
        return load_kubeconfig(paths, context=context)
    if is_in_cluster():
        return in_cluster_config()
    raise ConfigError(
        f"no Kubernetes configuration found: tried kubeconfig {', '.join(paths) or '(none)'} "
        "and the in-cluster service account (KUBERNETES_SERVICE_HOST is not set)"
    )
