"""kubeop.client: a fast async Kubernetes client.

``Client`` (every verb; plain dicts, your own model classes, or models generated from the
server's OpenAPI with ``await client.model("deployments.apps")``), ``SyncClient`` for scripts, configuration
(``load_config``, ``load_kubeconfig``, ``in_cluster_config``, ``ClientConfig``), discovery and the
REST mapper, and the transport pieces (auth, rate limit, retry) for those who assemble their own.
"""

from kubeop.client.auth import Auth, BasicAuth, Credentials, ExecAuth, NoAuth, StaticToken, TokenFile
from kubeop.client.client import Client, ObjectList, ResourceLike
from kubeop.client.config import ClientConfig, ConfigError, ExecConfig, load_config
from kubeop.client.discovery import Discovery, UnknownResource
from kubeop.client.incluster import in_cluster_config, is_in_cluster
from kubeop.client.kubeconfig import KubeConfig, default_kubeconfig_paths, load_kubeconfig
from kubeop.client.ratelimit import TokenBucket
from kubeop.client.restmapper import ResourceKey, RESTMapper, resource_key
from kubeop.client.retry import RetryPolicy
from kubeop.client.sync import SyncClient
from kubeop.client.transport import ApiConnectionError, HttpTransport, Transport
from kubeop.client.watch import WatchEvent

__all__ = [
    "ApiConnectionError",
    "Auth",
    "BasicAuth",
    "Client",
    "ClientConfig",
    "ConfigError",
    "Credentials",
    "Discovery",
    "ExecAuth",
    "ExecConfig",
    "HttpTransport",
    "KubeConfig",
    "NoAuth",
    "ObjectList",
    "RESTMapper",
    "ResourceKey",
    "ResourceLike",
    "RetryPolicy",
    "StaticToken",
    "SyncClient",
    "TokenBucket",
    "TokenFile",
    "Transport",
    "UnknownResource",
    "WatchEvent",
    "default_kubeconfig_paths",
    "in_cluster_config",
    "is_in_cluster",
    "load_config",
    "load_kubeconfig",
    "resource_key",
]
