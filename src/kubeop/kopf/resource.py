"""``kopf.Resource``: one served resource as kopf describes it, the ``resource`` kwarg of the handlers.

kubeop's own record of a served resource is :class:`kubeop.core.resource.ApiResource`; handlers
written for kopf get this class instead, with kopf's fields (``shortcuts``, ``preferred``...),
equality and hashing by (group, version, plural), its ``repr`` (``kopfexamples.v1.kopf.dev``),
iteration as ``(group, version, plural)`` (``@kopf.on.event(*resource)``) and :meth:`get_url`.
:func:`of_api_resource` and :meth:`Resource.api_resource` convert between the two.
"""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

from kubeop.core.resource import ApiResource

__all__ = ["Resource", "of_api_resource"]


@dataclass(frozen=True, eq=False, repr=False)
class Resource:
    """A specific built-in or custom resource: ``Resource('kopf.dev', 'v1', 'kopfexamples')``.

    ``group`` is ``""`` for the core group. Only ``group``, ``version`` and ``plural`` address it;
    the other names are what selectors match and what logs show.
    """

    group: str
    version: str
    plural: str
    kind: str | None = None
    singular: str | None = None
    shortcuts: Collection[str] = field(default=frozenset())
    categories: Collection[str] = field(default=frozenset())
    subresources: Collection[str] = field(default=frozenset())
    namespaced: bool | None = None
    preferred: bool = True
    """Whether it is its group's preferred version: only those match a selector without a version."""
    verbs: Collection[str] = field(default=frozenset())

    def __hash__(self) -> int:
        return hash((self.group, self.version, self.plural))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resource):
            return (self.group, self.version, self.plural) == (other.group, other.version, other.plural)
        return NotImplemented

    def __repr__(self) -> str:
        main, *subs = self.plural.split("/")
        name = f"{main}.{self.version}.{self.group}".strip(".")
        return name + (f"/{'/'.join(subs)}" if subs else "")

    def __iter__(self) -> Iterator[str]:
        return iter((self.group, self.version, self.plural))

    def get_url(
        self,
        *,
        server: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
        params: dict[str, str] | None = None,
    ) -> str:
        """The API path of the resource's list (``name`` None) or of one object, cluster-wide
        (``namespace`` None) or in a namespace, with ``subresource`` and query ``params``, prefixed
        with ``server`` if given. Raises ValueError for a combination the API has no path for."""
        if subresource is not None and name is None:
            raise ValueError("Subresources can be used only with specific resources by their name.")
        if not self.namespaced and namespace is not None:
            raise ValueError("Specific namespaces are not supported for cluster-scoped resources.")
        if self.namespaced and namespace is None and name is not None:
            raise ValueError("Specific namespaces are required for specific namespaced resources.")
        in_namespace = bool(self.namespaced and namespace is not None)
        parts = [
            "/api" if self.group == "" and self.version == "v1" else "/apis",
            self.group,
            self.version,
            "namespaces" if in_namespace else None,
            namespace if in_namespace else None,
            self.plural,
            name,
            subresource,
        ]
        query = urllib.parse.urlencode(params, encoding="utf-8") if params else ""
        url = "/".join(p for p in parts if p) + ("?" if query else "") + query
        return url if server is None else server.rstrip("/") + "/" + url.lstrip("/")

    def api_resource(self) -> ApiResource:
        """The same resource as kubeop's :class:`~kubeop.core.resource.ApiResource` (for
        :class:`kubeop.Client` calls from a handler)."""
        return ApiResource(
            self.group,
            self.version,
            self.plural,
            kind=self.kind or "",
            namespaced=bool(self.namespaced),
            singular=self.singular or "",
            short_names=tuple(sorted(self.shortcuts)),
            verbs=tuple(sorted(self.verbs)),
            subresources=tuple(sorted(self.subresources)),
            categories=tuple(sorted(self.categories)),
        )


@functools.lru_cache(maxsize=1024)
def of_api_resource(resource: ApiResource, *, preferred: bool = True) -> Resource:
    """kopf's record of a resource kubeop's discovery found (``preferred``: of its group's
    preferred version); remembered, as handlers get it on every call."""
    return Resource(
        group=resource.group,
        version=resource.version,
        plural=resource.plural,
        kind=resource.kind or None,
        singular=resource.singular or None,
        shortcuts=frozenset(resource.short_names),
        categories=frozenset(resource.categories),
        subresources=frozenset(resource.subresources),
        namespaced=resource.namespaced,
        preferred=preferred,
        verbs=frozenset(resource.verbs),
    )
