"""kubeop.apiserver: serve an API group of your own behind kube-apiserver (API aggregation).

Declare the kinds as CustomResource models (as for a CRD), pick a storage, and run an
:class:`APIServer` (a Manager runnable); :func:`apiserver_manifests` writes the APIService,
Service and RBAC that put it behind kube-apiserver. See docs/concepts/aggregation.md.
"""

from __future__ import annotations

from kubeop.apiserver.auth import RequestHeaderConfig
from kubeop.apiserver.etcd import EtcdStorage
from kubeop.apiserver.manifests import apiserver_manifests
from kubeop.apiserver.memory import MemoryStorage
from kubeop.apiserver.server import APIServer
from kubeop.apiserver.sqlite import SQLiteStorage
from kubeop.apiserver.status import StatusError
from kubeop.apiserver.storage import ListOptions, ListPage, Storage, StorageEvent, WatchOptions

__all__ = [
    "APIServer",
    "EtcdStorage",
    "ListOptions",
    "ListPage",
    "MemoryStorage",
    "RequestHeaderConfig",
    "SQLiteStorage",
    "StatusError",
    "Storage",
    "StorageEvent",
    "WatchOptions",
    "apiserver_manifests",
]
