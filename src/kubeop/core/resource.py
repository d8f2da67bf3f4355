"""ApiResource: everything needed to build a URL for a kind, without asking the server.

Hot paths (a controller's own kind, the kinds it owns) can name their resources explicitly and
never touch discovery; everything else resolves a GVK through the REST mapper, which produces
these same values.

Group, version and plural become segments of every request path, so they are checked here, once
per resource instead of once per request: a group is empty (the core group) or a DNS-1123
subdomain, a version a DNS-1123 label, a plural letters, digits, '_', '-' and '.' starting with a
letter, digit or '_' (so never '.', '..', or anything that needs escaping).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kubeop.core.gvk import GroupVersionKind, GroupVersionResource, join_api_version

__all__ = ["ApiResource"]

_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
_GROUP = re.compile(rf"{_LABEL}(?:\.{_LABEL})*").fullmatch
_VERSION = re.compile(_LABEL).fullmatch
_PLURAL = re.compile(r"[A-Za-z0-9_][-A-Za-z0-9_.]{0,252}").fullmatch

GROUP_RULE = "empty (the core group) or a DNS-1123 subdomain (lowercase letters, digits, '-' and '.')"
VERSION_RULE = "a DNS-1123 label (lowercase letters, digits and '-', at most 63 characters), e.g. 'v1'"
PLURAL_RULE = (
    "letters, digits, '_', '-' and '.', starting with a letter, digit or '_' (at most 253 characters)"
)


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)``, cut to about ``limit`` characters: bad values can be megabytes long."""
    text = repr(value) if isinstance(value, str) else f"{type(value).__name__} {value!r:.{limit}}"
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def invalid(field: str, value: object, rule: str) -> ValueError:
    """The ValueError for a value that may not go into a request: which field, what, what is allowed."""
    return ValueError(f"invalid {field} {shown(value)}: must be {rule}")


def check_group(group: object) -> str:
    if isinstance(group, str) and (not group or (len(group) <= 253 and _GROUP(group))):
        return group
    raise invalid("API group", group, GROUP_RULE)


def check_version(version: object) -> str:
    if isinstance(version, str) and _VERSION(version):
        return version
    raise invalid("API version", version, VERSION_RULE)


def check_plural(plural: object) -> str:
    if isinstance(plural, str) and _PLURAL(plural):
        return plural
    raise invalid("resource (plural)", plural, PLURAL_RULE)


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
    categories: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        check_group(self.group)
        check_version(self.version)
        check_plural(self.plural)

    def __hash__(self) -> int:
        # Equal resources have equal (group, version, plural); hashing three strings instead of
        # nine fields matters where resources key hot dicts (the reconciler client's caches).
        return hash((self.group, self.version, self.plural))

    @property
    def api_version(self) -> str:
        """``group/version``, or just ``version`` for the core group."""
        return join_api_version(self.group, self.version)

    @property
    def gvk(self) -> GroupVersionKind:
        """The resource's group, version and kind."""
        return GroupVersionKind(self.group, self.version, self.kind)

    @property
    def gvr(self) -> GroupVersionResource:
        """The resource's group, version and plural."""
        return GroupVersionResource(self.group, self.version, self.plural)

    @property
    def display_name(self) -> str:
        """``deployments.apps`` / ``configmaps``: the name kubectl and the server use in messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def __str__(self) -> str:
        return f"{self.display_name} ({self.api_version})"
