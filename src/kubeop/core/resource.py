"""ApiResource: everything needed to build a URL for a kind, without asking the server.

Hot paths (a controller's own kind, the kinds it owns) can name their resources explicitly and
never touch discovery; everything else resolves a GVK through the REST mapper, which produces
these same values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubeop.core.gvk import GroupVersionKind, GroupVersionResource, join_api_version

__all__ = ["ApiResource"]


@dataclass(frozen=True, slots=True)
class ApiResource:
    """One served resource: ``ApiResource("apps", "v1", "deployments", kind="Deployment")``.

    ``kind`` is optional for addressing (paths need only group, version, plural and scope) but is
    used to fill in ``apiVersion``/``kind`` on objects we send and to name things in errors.
    ``subresources`` and ``verbs`` are informational; they come from discovery when known.
    """

    group: str
    version: str
    plural: str
    kind: str = ""
    namespaced: bool = True
    singular: str = ""
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    subresources: tuple[str, ...] = field(default=())

    def __hash__(self) -> int:
        # Equal resources have equal (group, version, plural); hashing three strings instead of
        # nine fields matters where resources key hot dicts (the reconciler client's caches).
        return hash((self.group, self.version, self.plural))

    @property
    def api_version(self) -> str:
        return join_api_version(self.group, self.version)

    @property
    def gvk(self) -> GroupVersionKind:
        return GroupVersionKind(self.group, self.version, self.kind)

    @property
    def gvr(self) -> GroupVersionResource:
        return GroupVersionResource(self.group, self.version, self.plural)

    @property
    def display_name(self) -> str:
        """``deployments.apps`` / ``configmaps``: the name kubectl and the server use in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def __str__(self) -> str:
        return f"{self.display_name} ({self.api_version})"
