"""kubeop.apiserver: serve an API group of your own behind kube-apiserver (API aggregation)."""

from __future__ import annotations

from kubeop.apiserver.memory import MemoryStorage
from kubeop.apiserver.status import StatusError
from kubeop.apiserver.storage import ListOptions, ListPage, Storage, WatchEvent, WatchOptions

__all__ = ["ListOptions", "ListPage", "MemoryStorage", "StatusError", "Storage", "WatchEvent", "WatchOptions"]
