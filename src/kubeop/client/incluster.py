"""In-cluster configuration from the pod's service account.

The token is given as ``token_file``, never read once into memory: bound service-account tokens
rotate (the kubelet rewrites the file well before expiry), and the client re-reads the file
periodically and after a 401.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from kubeop.client.config import ClientConfig, ConfigError

__all__ = ["SERVICE_ACCOUNT_DIR", "in_cluster_config", "is_in_cluster"]

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def is_in_cluster(env: Mapping[str, str] | None = None) -> bool:
    """Whether the process runs in a pod: the service host and port variables Kubernetes sets are there."""
    env = os.environ if env is None else env
    return bool(env.get("KUBERNETES_SERVICE_HOST") and env.get("KUBERNETES_SERVICE_PORT"))


def in_cluster_config(
    *, env: Mapping[str, str] | None = None, sa_dir: str = SERVICE_ACCOUNT_DIR, **overrides: Any
) -> ClientConfig:
    """Config for a pod: server from KUBERNETES_SERVICE_HOST/PORT, CA, token and namespace files."""
    env = os.environ if env is None else env
    host = env.get("KUBERNETES_SERVICE_HOST")
    port = env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ConfigError(
            "not running in a cluster: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are not set"
        )
    token_file = os.path.join(sa_dir, "token")
    if not os.path.exists(token_file):
        raise ConfigError(f"in-cluster config: service account token {token_file} does not exist")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    namespace = "default"
    ns_file = os.path.join(sa_dir, "namespace")
    if os.path.exists(ns_file):
        try:
            with open(ns_file, encoding="utf-8") as f:
                namespace = f.read().strip() or "default"
        except (OSError, UnicodeDecodeError) as e:
            reason = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
            raise ConfigError(f"in-cluster config: cannot read {ns_file}: {reason}") from None
    ca_file = os.path.join(sa_dir, "ca.crt")
    settings: dict[str, Any] = {
        "server": f"https://{host}:{port}",
        "token_file": token_file,
        "ca_file": ca_file if os.path.exists(ca_file) else None,
        "namespace": namespace,
        "source": f"in-cluster service account ({sa_dir})",
    }
    if (
        overrides.get("insecure_skip_tls_verify")
        and "ca_data" not in overrides
        and "ca_file" not in overrides
    ):
        settings["ca_file"] = None  # an insecure override drops the service account's CA
    settings.update(overrides)
    return ClientConfig(**settings)
