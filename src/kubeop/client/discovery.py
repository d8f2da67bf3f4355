"""Discovery: which resources the server serves, cached, and refreshed when a lookup misses.

One round trip per refresh when the server supports aggregated discovery (``/api`` and ``/apis``
with ``Accept: ...;as=APIGroupDiscoveryList``, GA since Kubernetes 1.30); older servers get the
legacy walk (``/api``, ``/api/v1``, ``/apis``, then one request per group version). A lookup that
misses refreshes once (concurrent misses share one refresh), so a CRD installed after the client
started is found without a restart. Refreshes caused by misses are rate limited by a token bucket
(burst 5, 5 per second, as controller-runtime's dynamic REST mapper) so a loop asking for a kind
that does not exist cannot hammer the server, while an occasional miss is always re-checked.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kubeop.client.ratelimit import TokenBucket
from kubeop.client.restmapper import ResourceKey, RESTMapper, resource_key
from kubeop.client.transport import Transport
from kubeop.core.errors import ApiError
from kubeop.core.gvk import GroupVersionKind
from kubeop.core.request import ApiRequest
from kubeop.core.resource import ApiResource, check_group, check_version

__all__ = ["Discovery", "UnknownResource"]

log = logging.getLogger("kubeop.client.discovery")

_AGGREGATED = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)


class UnknownResource(LookupError):
    """No served resource matches a kind or name, even after refreshing discovery."""


class Discovery:
    """Cached discovery for one server, and the RESTMapper built from it."""

    def __init__(
        self,
        transport: Transport,
        *,
        miss_refresh_qps: float = 5.0,
        miss_refresh_burst: int = 5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._transport = transport
        self._mapper: RESTMapper | None = None
        self._refreshed_at: float | None = None
        self._miss_limiter = TokenBucket(miss_refresh_qps, miss_refresh_burst, clock=clock)
        self._clock = clock
        self._lock = asyncio.Lock()
        self.refreshes = 0

    async def mapper(self) -> RESTMapper:
        """The current mapper, loading discovery on first use."""
        if self._mapper is None:
            await self.refresh()
        assert self._mapper is not None
        return self._mapper

    def key(self, what: object) -> ResourceKey:
        """:func:`~kubeop.client.restmapper.resource_key` of ``what`` against the discovery loaded
        so far (no I/O: a name not resolved yet keys as itself)."""
        return resource_key(what, self._mapper)

    async def refresh(self) -> RESTMapper:
        """Reload discovery now (a refresh that finished while we waited for the lock counts)."""
        started = self._clock()
        async with self._lock:
            if self._mapper is not None and self._refreshed_at is not None and self._refreshed_at > started:
                return self._mapper
            resources, preferred = await self._load()
            self._mapper = RESTMapper(resources, preferred)
            self._refreshed_at = self._clock()
            self.refreshes += 1
            return self._mapper

    async def resource_for(self, gvk: GroupVersionKind) -> ApiResource:
        """The resource serving ``gvk``; an empty version means the group's preferred one."""
        mapper = await self.mapper()
        found = mapper.for_kind(gvk.group, gvk.kind, gvk.version or None)
        if found is None and self._miss_limiter.try_acquire():
            mapper = await self.refresh()
            found = mapper.for_kind(gvk.group, gvk.kind, gvk.version or None)
        if found is None:
            known = ", ".join(mapper.kinds_in_group(gvk.group)) or "none"
            group = gvk.group or "core"
            raise UnknownResource(
                f"unknown kind {gvk.kind!r} in apiVersion {gvk.api_version!r} on "
                f"{self._transport.config.server}: the server does not serve it (is the CRD installed?); "
                f"kinds in group {group!r}: {known}"
            )
        return found

    async def find(self, name: str) -> ApiResource:
        """kubectl-style lookup by plural, singular, short name or kind (``deploy``, ``cm.v1.``...)."""
        mapper = await self.mapper()
        found = mapper.find(name)
        if found is None and self._miss_limiter.try_acquire():
            mapper = await self.refresh()
            found = mapper.find(name)
        if found is None:
            raise UnknownResource(
                f"the server {self._transport.config.server} doesn't have a resource type {name!r}"
            )
        return found

    # -- loading ----------------------------------------------------------------------------------

    async def _load(self) -> tuple[list[ApiResource], dict[str, list[str]]]:
        core = await self._transport.request(
            ApiRequest("GET", "/api", accept=_AGGREGATED, target="discovery")
        )
        if isinstance(core, dict) and core.get("kind") == "APIGroupDiscoveryList":
            groups = await self._transport.request(
                ApiRequest("GET", "/apis", accept=_AGGREGATED, target="discovery")
            )
            resources: list[ApiResource] = []
            preferred: dict[str, list[str]] = {}
            for doc in (core, groups):
                _parse_aggregated(doc or {}, resources, preferred)
            return resources, preferred
        return await self._load_legacy(core or {})

    async def _load_legacy(self, core: Mapping[str, Any]) -> tuple[list[ApiResource], dict[str, list[str]]]:
        resources: list[ApiResource] = []
        preferred: dict[str, list[str]] = {"": list(core.get("versions") or ["v1"])}
        group_list = await self._transport.request(ApiRequest("GET", "/apis", target="discovery"))
        # Group and version names come from the server (an aggregated API can say anything) and
        # become paths here: skip what is not a valid group or version instead of requesting it.
        preferred[""] = [v for v in preferred[""] if _valid(check_version, v, "core")]
        paths = [("", v, f"/api/{v}") for v in preferred[""]]
        for group in (group_list or {}).get("groups") or ():
            name = group.get("name", "")
            if not name or not _valid(check_group, name, "group list"):
                continue
            versions = [
                v["version"] for v in group.get("versions") or () if _valid(check_version, v["version"], name)
            ]
            pref = (group.get("preferredVersion") or {}).get("version")
            if pref in versions:
                versions.remove(pref)
                versions.insert(0, pref)
            preferred[name] = versions
            paths.extend((name, v, f"/apis/{name}/{v}") for v in versions)

        async def one(group: str, version: str, path: str) -> list[ApiResource]:
            try:
                doc = await self._transport.request(ApiRequest("GET", path, target=f"discovery of {path}"))
            except ApiError as e:  # an aggregated API that is down must not hide everything else
                log.warning("discovery: skipping %s: %s", path, e)
                return []
            return _parse_resource_list(group, version, doc or {})

        for found in await asyncio.gather(*(one(*p) for p in paths)):
            resources.extend(found)
        return resources, preferred


def _valid(check: Callable[[object], str], value: object, where: str) -> bool:
    try:
        check(value)
    except ValueError as e:
        log.warning("discovery: skipping what the server listed in %s: %s", where, e)
        return False
    return True


def _parse_aggregated(
    doc: Mapping[str, Any], out: list[ApiResource], preferred: dict[str, list[str]]
) -> None:
    for item in doc.get("items") or ():
        group = (item.get("metadata") or {}).get("name") or ""
        if not _valid(check_group, group, "aggregated discovery"):
            continue
        versions = preferred.setdefault(group, [])
        for ver in item.get("versions") or ():
            version = ver.get("version")
            if not version or not _valid(check_version, version, group or "core"):
                continue
            versions.append(version)
            for r in ver.get("resources") or ():
                kind = (r.get("responseKind") or {}).get("kind") or ""
                try:
                    resource = ApiResource(
                        group=group,
                        version=version,
                        plural=r.get("resource", ""),
                        kind=kind,
                        namespaced=r.get("scope") == "Namespaced",
                        singular=r.get("singularResource") or "",
                        short_names=tuple(r.get("shortNames") or ()),
                        verbs=tuple(r.get("verbs") or ()),
                        subresources=tuple(s.get("subresource", "") for s in r.get("subresources") or ()),
                        categories=tuple(r.get("categories") or ()),
                    )
                except ValueError as e:  # a resource name that cannot be a path segment
                    log.warning("discovery: skipping a resource of %s/%s: %s", group, version, e)
                    continue
                out.append(resource)


def _parse_resource_list(group: str, version: str, doc: Mapping[str, Any]) -> list[ApiResource]:
    items = doc.get("resources") or ()
    subs: dict[str, list[str]] = {}
    for r in items:
        main, sep, sub = r.get("name", "").partition("/")
        if sep:
            subs.setdefault(main, []).append(sub)
    out = []
    for r in items:
        name = r.get("name", "")
        if "/" in name:
            continue
        try:
            resource = ApiResource(
                group=group,
                version=version,
                plural=name,
                kind=r.get("kind", ""),
                namespaced=bool(r.get("namespaced")),
                singular=r.get("singularName") or "",
                short_names=tuple(r.get("shortNames") or ()),
                verbs=tuple(r.get("verbs") or ()),
                subresources=tuple(subs.get(name, ())),
                categories=tuple(r.get("categories") or ()),
            )
        except ValueError as e:  # a resource name that cannot be a path segment
            log.warning("discovery: skipping a resource of %s/%s: %s", group or "core", version, e)
            continue
        out.append(resource)
    return out
