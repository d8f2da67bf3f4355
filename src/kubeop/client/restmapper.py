"""RESTMapper: an index from kinds and names to served resources, built from discovery data.

Pure and synchronous; :mod:`kubeop.client.discovery` fetches the data and rebuilds the mapper.
Lookups follow kubectl: a kind resolves to the preferred version of its group unless a version
is given, and a name can be a plural, singular, short name or kind, optionally qualified as
``name.group`` or ``name.version.group``.

:func:`resource_key` is the one rule for when two ways of naming a resource are the same
resource: the client, the shared informer factory, the reconciler client and the controller all
ask it, so ``"deployments"``, ``"Deployment.apps"``, a ``Deployment`` model and the discovered
ApiResource are one informer, one watch and one set of remembered writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kubeop.core.gvk import GroupVersionKind, GroupVersionResource
from kubeop.core.model import is_model_class, model_gvk, model_resource
from kubeop.core.resource import ApiResource

__all__ = ["RESTMapper", "ResourceKey", "resource_key"]

ResourceKey = tuple[str, ...]
"""The identity of a resource, from :func:`resource_key`: ``(group, version, kind)`` once the
kind is known (the canonical form); ``("plural", group, version, plural)`` for an ApiResource
without a kind that discovery does not know yet; ``("name", name)`` (lowercased) for a
kubectl-style name discovery has not resolved. Plain tuples: the reconciler client computes one
per read."""


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
        """Every resource discovery found, one per group, version and plural."""
        return list(self._by_gvr.values())

    @property
    def groups(self) -> Mapping[str, Sequence[str]]:
        """Each API group's versions, the preferred one first."""
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
        """The resource serving a group, version and kind, or None."""
        return self._by_gvk.get(gvk)

    def for_gvr(self, gvr: GroupVersionResource) -> ApiResource | None:
        """The resource of a group, version and plural, or None."""
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
        """The kinds a group serves, sorted (for an error message naming what exists)."""
        return sorted({r.kind for r in self._by_gvr.values() if r.group == group})


def resource_key(what: object, mapper: RESTMapper | None = None) -> ResourceKey:
    """Which resource ``what`` names, without I/O: the key two namings of one resource share.

    ``what`` is an :class:`ApiResource`, a :class:`GroupVersionKind`, a kubectl-style name
    (plural, singular, short name or kind, optionally ``.group`` or ``.version.group``), a model
    class or instance, or an object dict (its ``apiVersion`` and ``kind``). ``mapper`` is the
    discovery loaded so far: with it names, kindless resources and group-preferred versions
    resolve to the canonical ``(group, version, kind)``; without it (or when it does not know
    the name) the key is only equal to the same naming (see :data:`ResourceKey`). Raises
    TypeError for anything else.
    """
    if type(what) is ApiResource or isinstance(what, ApiResource):
        if what.kind:
            return (what.group, what.version, what.kind)
        found = mapper.for_gvr(what.gvr) if mapper is not None else None
        if found is not None and found.kind:
            return (found.group, found.version, found.kind)
        return ("plural", what.group, what.version, what.plural)
    if isinstance(what, GroupVersionKind):
        if what.version or mapper is None:
            return (what.group, what.version, what.kind)
        found = mapper.for_kind(what.group, what.kind)
        return (what.group, found.version if found is not None else "", what.kind)
    if isinstance(what, str):
        found = mapper.find(what) if mapper is not None else None
        if found is not None and found.kind:
            return (found.group, found.version, found.kind)
        return ("name", what.lower())
    if isinstance(what, Mapping):
        api_version, kind = what.get("apiVersion"), what.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
            raise ValueError("the object has no apiVersion/kind: set them to name its resource")
        return resource_key(GroupVersionKind.from_api_version(api_version, kind), mapper)
    cls = what if isinstance(what, type) else type(what)
    if is_model_class(cls):
        declared = model_resource(cls)
        return resource_key(declared if declared is not None else model_gvk(cls), mapper)
    raise TypeError(
        f"cannot name a resource with {type(what).__name__} {what!r:.60}: give an ApiResource, a "
        "GroupVersionKind, a name such as 'deployments.apps', a model class or an object dict"
    )
