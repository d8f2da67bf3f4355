"""RESTMapper: an index from kinds and names to served resources, built from discovery data.

Pure and synchronous; :mod:`kubeop.client.discovery` fetches the data and rebuilds the mapper.
Lookups follow kubectl: a kind resolves to the preferred version of its group unless a version
is given, and a name can be a plural, singular, short name or kind, optionally qualified as
``name.group`` or ``name.version.group``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kubeop.core.gvk import GroupVersionKind, GroupVersionResource
from kubeop.core.resource import ApiResource

__all__ = ["RESTMapper"]


class RESTMapper:
    """Answers "which resource serves this kind?" without I/O.

    ``preferred`` maps a group to its versions, most preferred first (the server's order).
    """

    def __init__(self, resources: Iterable[ApiResource], preferred: Mapping[str, Sequence[str]]) -> None:
        self._by_gvk: dict[GroupVersionKind, ApiResource] = {}
        self._by_gvr: dict[GroupVersionResource, ApiResource] = {}
        self._preferred = {g: list(vs) for g, vs in preferred.items()}
        for res in resources:
            # Several resources may return the same kind (e.g. a kind served under two plurals);
            # the first listed is the canonical one.
            self._by_gvk.setdefault(res.gvk, res)
            self._by_gvr[res.gvr] = res

    @property
    def resources(self) -> list[ApiResource]:
        return list(self._by_gvr.values())

    @property
    def groups(self) -> Mapping[str, Sequence[str]]:
        return self._preferred

    def _version_order(self, group: str) -> list[str]:
        return self._preferred.get(group, [])

    def for_kind(self, group: str, kind: str, version: str | None = None) -> ApiResource | None:
        """The resource for a kind; without ``version`` the group's preferred version that has it."""
        if version:
            return self._by_gvk.get(GroupVersionKind(group, version, kind))
        for v in self._version_order(group):
            res = self._by_gvk.get(GroupVersionKind(group, v, kind))
            if res is not None:
                return res
        return None

    def for_gvk(self, gvk: GroupVersionKind) -> ApiResource | None:
        return self._by_gvk.get(gvk)

    def for_gvr(self, gvr: GroupVersionResource) -> ApiResource | None:
        return self._by_gvr.get(gvr)

    def find(self, name: str) -> ApiResource | None:
        """kubectl-style lookup: ``deploy``, ``deployments``, ``Deployment``, ``deployments.apps``,
        ``deployments.v1.apps``. When several groups serve the name, the core group wins, then
        groups in discovery order (as kubectl does for ``events``)."""
        if "." not in name:
            return self._find_in(name, None, None)
        short, rest = name.split(".", 1)
        found = self._find_in(short, rest, None)
        if found is None and "." in rest:
            version, group = rest.split(".", 1)
            found = self._find_in(short, group, version)
        return found

    def _find_in(self, name: str, group: str | None, version: str | None) -> ApiResource | None:
        lowered = name.lower()
        groups = [group] if group is not None else list(self._preferred)
        if group is None and "" in groups:
            groups.remove("")
            groups.insert(0, "")
        for g in groups:
            versions = [version] if version else self._version_order(g)
            for v in versions:
                for res in self._by_gvr.values():
                    if res.group != g or res.version != v:
                        continue
                    if lowered in (res.plural, res.singular, res.kind.lower()) or lowered in res.short_names:
                        return res
        return None

    def kinds_in_group(self, group: str) -> list[str]:
        return sorted({r.kind for r in self._by_gvr.values() if r.group == group})
