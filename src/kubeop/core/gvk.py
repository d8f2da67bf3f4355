"""Group/version/kind and group/version/resource identifiers.

Kubernetes names a *type* by group, version and kind (``apps/v1 Deployment``) and an HTTP
*collection* by group, version and resource (``apps/v1 deployments``). Objects carry only
``apiVersion`` and ``kind``; turning those into a URL needs a resource, which is what the REST
mapper (kubeop.client.discovery) or an explicit :class:`~kubeop.core.resource.ApiResource` supplies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["GroupVersionKind", "GroupVersionResource", "join_api_version", "split_api_version"]


def split_api_version(api_version: str) -> tuple[str, str]:
    """Split ``"apps/v1"`` into ``("apps", "v1")`` and ``"v1"`` into ``("", "v1")``.

    The core ("legacy") group has the empty name and its apiVersion carries no slash.
    """
    if not api_version:
        raise ValueError("apiVersion is empty")
    group, sep, version = api_version.rpartition("/")
    if sep and not group:
        raise ValueError(f"malformed apiVersion {api_version!r}: empty group before '/'")
    if not version:
        raise ValueError(f"malformed apiVersion {api_version!r}: empty version")
    if "/" in group:
        raise ValueError(f"malformed apiVersion {api_version!r}: more than one '/'")
    return group, version


def join_api_version(group: str, version: str) -> str:
    """The inverse of :func:`split_api_version`: the core group is written without a slash."""
    return f"{group}/{version}" if group else version


@dataclass(frozen=True, slots=True)
class GroupVersionKind:
    """A type: ``GroupVersionKind("apps", "v1", "Deployment")``; the core group is ``""``."""

    group: str
    version: str
    kind: str

    @classmethod
    def from_api_version(cls, api_version: str, kind: str) -> GroupVersionKind:
        """The GroupVersionKind of an ``apiVersion`` (``apps/v1``, ``v1``) and a kind."""
        group, version = split_api_version(api_version)
        return cls(group, version, kind)

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> GroupVersionKind:
        """The GVK an object dict declares; raises ValueError naming what is missing."""
        api_version = obj.get("apiVersion")
        kind = obj.get("kind")
        if not isinstance(api_version, str) or not api_version:
            raise ValueError(f"object has no apiVersion (kind={kind!r}, name={_name(obj)!r})")
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"object has no kind (apiVersion={api_version!r}, name={_name(obj)!r})")
        return cls.from_api_version(api_version, kind)

    @property
    def api_version(self) -> str:
        """``group/version``, or just ``version`` for the core group."""
        return join_api_version(self.group, self.version)

    def __str__(self) -> str:
        return f"{self.api_version}, Kind={self.kind}"


@dataclass(frozen=True, slots=True)
class GroupVersionResource:
    """An HTTP collection: ``GroupVersionResource("apps", "v1", "deployments")``."""

    group: str
    version: str
    resource: str

    @property
    def api_version(self) -> str:
        """``group/version``, or just ``version`` for the core group."""
        return join_api_version(self.group, self.version)

    def __str__(self) -> str:
        return f"{self.api_version}, Resource={self.resource}"


def _name(obj: Mapping[str, Any]) -> Any:
    meta = obj.get("metadata")
    return meta.get("name") if isinstance(meta, Mapping) else None
