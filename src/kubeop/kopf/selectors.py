"""kopf's resource selectors: which served resources a handler's positional and keyword arguments
name, parsed and matched exactly as kopf 1.45.2 does.

Positional forms: ``('pods')``, ``('pods.v1')``, ``('deployments.v1.apps')``, ``('kex.kopf.dev')``,
``('kopf.dev', 'kopfexamples')``, ``('kopf.dev/v1', 'kopfexamples')``, ``('v1', 'Secret')`` (the
core group), ``('kopf.dev', 'v1', 'kopfexamples')``, :data:`EVERYTHING`, or a callable
``fn(resource) -> bool`` (given a :class:`kopf.Resource <kubeop.kopf.resource.Resource>`).
Keywords: ``group=``, ``version=``, ``kind=``, ``plural=``, ``singular=``, ``shortcut=``,
``category=``, ``any_name=``. A name matches case-sensitively the kind, the plural, the singular
or a short name; categories and :data:`EVERYTHING` select many resources (core and
``events.k8s.io`` events are never part of :data:`EVERYTHING`). Without a version only the
group's preferred version matches; a specific name served by the core group and by others means
the core group's (as kubectl does); a specific name still served by two resources is ambiguous
and is an error at start (kopf logs it and serves neither). :meth:`Selector.check` and
:meth:`Selector.select` take kubeop's ``ApiResource`` or kopf's ``Resource``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from kubeop.core.resource import ApiResource
from kubeop.kopf.resource import Resource, of_api_resource

__all__ = ["EVERYTHING", "AmbiguousResource", "Marker", "Selector", "UnresolvedResource"]

# ``pods.v1``, ``deployments.v1.apps``, ``kex.v1beta1.kopf.dev``: a name, then a version.
_GROUP_VERSION = re.compile(r"^[^.]*\.v\d+(?:(?:alpha|beta)\d+)?(?:\..*)?$")


class Marker(enum.Enum):
    """kopf's marker for selecting every served resource."""

    EVERYTHING = enum.auto()


EVERYTHING = Marker.EVERYTHING
"""``@kopf.on.event(kopf.EVERYTHING)``: all resources of all groups (events excluded)."""


class UnresolvedResource(LookupError):
    """A specific selector matches no resource the server serves."""


class AmbiguousResource(LookupError):
    """A specific selector matches several resources: name the API group."""


Arg = str | Marker | Callable[[Resource], bool] | None
R = TypeVar("R", ApiResource, Resource)


@dataclass(frozen=True, init=False)
class Selector:
    """A handler's resource specification; :meth:`select` finds what it names in discovery."""

    group: str | None = None
    version: str | None = None
    kind: str | None = None
    plural: str | None = None
    singular: str | None = None
    shortcut: str | None = None
    category: str | None = None
    any_name: str | Marker | None = None
    fn: Callable[[Resource], bool] | None = None

    def __init__(
        self,
        *args: Arg,
        group: str | None = None,
        version: str | None = None,
        kind: str | None = None,
        plural: str | None = None,
        singular: str | None = None,
        shortcut: str | None = None,
        category: str | None = None,
        any_name: str | Marker | None = None,
    ) -> None:
        if len(args) > 3:
            raise TypeError(
                f"too many positional arguments {args!r}: a resource is named by at most 3 "
                "(group, version, name)"
            )
        fn: Callable[[Resource], bool] | None = None
        a1, a2, a3 = (*args, None, None, None)[:3]
        if callable(a1) and not isinstance(a1, Marker):
            if a2 is not None or a3 is not None:
                raise TypeError("a callable resource filter cannot have any other selectors")
            fn = a1
        elif a1 is None and a2 is None and a3 is None:
            pass
        elif a1 is EVERYTHING and a2 is None and a3 is None:
            any_name = EVERYTHING
        elif isinstance(a1, str) and a2 is None and a3 is None and _GROUP_VERSION.fullmatch(a1):
            parts = a1.split(".")
            if len(parts) >= 3:
                group = a1.split(".", 2)[2]
            version, any_name = parts[1], parts[0]
        elif isinstance(a1, str) and a2 is None and a3 is None and "." in a1:
            group, any_name = a1.split(".", 1)[1], a1.split(".")[0]
        elif a2 is None and a3 is None:
            any_name = a1
        elif isinstance(a1, str) and a3 is None and "/" in a1:
            group, version, any_name = a1.rsplit("/", 1)[0], a1.rsplit("/")[-1], cast(Any, a2)
        elif a1 == "v1" and a3 is None:
            group, version, any_name = "", "v1", cast(Any, a2)
        elif a3 is None:
            group, any_name = cast(Any, a1), cast(Any, a2)
        else:
            group, version, any_name = cast(Any, a1), cast(Any, a2), cast(Any, a3)
        values = {
            "group": group,
            "version": version,
            "kind": kind,
            "plural": plural,
            "singular": singular,
            "shortcut": shortcut,
            "category": category,
            "any_name": any_name,
            "fn": fn,
        }
        for key, value in values.items():
            object.__setattr__(self, key, value)
        names = [kind, plural, singular, shortcut, category, any_name, fn]
        given = [n for n in names if n is not None]
        if len(given) > 1:
            raise TypeError(
                f"ambiguous resource specification with {given}: give one of a name, kind=, plural=, "
                "singular=, shortcut=, category= or kopf.EVERYTHING"
            )
        if not given:
            raise TypeError(
                "name the resource: on.create('plural'), on.create('group', 'plural'), "
                "on.create('v1', 'Kind'), on.create('group/version', 'plural') or a keyword (kind=...)"
            )
        if any(n == "" for n in names):
            raise TypeError("resource names must not be empty strings: pass None or a name")

    def __repr__(self) -> str:
        shown = {k: getattr(self, k) for k in _FIELDS if getattr(self, k) is not None}
        return f"Selector({', '.join(f'{k}={v!r}' for k, v in shown.items())})"

    @property
    def is_specific(self) -> bool:
        """Whether it names one resource (a name or kind), not many (a category, everything)."""
        return (
            self.kind is not None
            or self.shortcut is not None
            or self.plural is not None
            or self.singular is not None
            or (self.any_name is not None and not isinstance(self.any_name, Marker))
        )

    @property
    def key(self) -> str:
        """A stable name for the registry: kubectl's ``name[.version].group`` when there is one."""
        name = self.any_name if isinstance(self.any_name, str) else None
        name = name or self.kind or self.plural or self.singular or self.shortcut
        if name is None or (self.version is not None and self.group is None):
            return repr(self)
        if self.group is None:
            return name
        if self.version is None:
            return f"{name}.{self.group}"
        return f"{name}.{self.version}.{self.group}"

    def check(
        self,
        resource: ApiResource | Resource,
        *,
        preferred: bool | None = None,
        categories: Collection[str] | None = None,
    ) -> bool:
        """Whether ``resource`` matches, as kopf's ``check``: a kopf :class:`Resource` knows whether
        it is of a preferred version and its categories; for an ``ApiResource`` they are given
        (default: preferred, its own categories)."""
        res = resource if isinstance(resource, Resource) else None
        shortcuts = res.shortcuts if res is not None else cast(ApiResource, resource).short_names
        if preferred is None:
            preferred = res.preferred if res is not None else True
        if categories is None:
            categories = resource.categories
        if self.group is not None and self.group != resource.group:
            return False
        if self.version is None:
            if not (preferred or self.fn is not None):
                return False
        elif self.version != resource.version:
            return False
        names = (resource.kind, resource.plural, resource.singular)
        if self.kind is not None and self.kind != resource.kind:
            return False
        if self.plural is not None and self.plural != resource.plural:
            return False
        if self.singular is not None and self.singular != resource.singular:
            return False
        if self.category is not None and self.category not in categories:
            return False
        if self.shortcut is not None and self.shortcut not in shortcuts:
            return False
        if self.any_name is EVERYTHING:
            if _is_events(resource, shortcuts, preferred):
                return False
        elif self.any_name is not None and not (self.any_name in names or self.any_name in shortcuts):
            return False
        if self.fn is None:
            return True
        if res is None:
            res = of_api_resource(cast(ApiResource, resource), preferred=preferred)
        return bool(self.fn(res)) and not _is_events(resource, shortcuts, preferred)

    def select(self, resources: Iterable[R], preferred: Mapping[str, Sequence[str]] | None = None) -> set[R]:
        """The resources it matches; ``preferred`` is discovery's versions per group, preferred
        first (without it, kopf's Resources say themselves whether they are preferred, and
        ApiResources are). A specific name served by the core group hides the other groups'
        (kubectl's rule)."""
        found = {
            r
            for r in resources
            if self.check(r, preferred=None if preferred is None else _is_preferred(r, preferred))
        }
        if self.is_specific:
            core = {r for r in found if r.group == ""}
            found = core or found
        return found

    def resolve(
        self, resources: Iterable[R], preferred: Mapping[str, Sequence[str]] | None = None
    ) -> list[R]:
        """:meth:`select`, sorted, and for a specific selector exactly one resource or an error."""
        found = sorted(self.select(resources, preferred), key=lambda r: (r.group, r.version, r.plural))
        if self.is_specific and not found:
            raise UnresolvedResource(
                f"no served resource matches {self!r}: check the name's case (kopf matches the kind, "
                "plural, singular and short names exactly) and that the CRD is installed"
            )
        if self.is_specific and len(found) > 1:
            names = ", ".join(f"{r.plural}.{r.version}.{r.group}" for r in found)
            raise AmbiguousResource(
                f"{self!r} is ambiguous: it matches {names}; name the API group "
                "(e.g. on.create('group', 'plural') or group=...)"
            )
        return found


_FIELDS = ("group", "version", "kind", "plural", "singular", "shortcut", "category", "any_name", "fn")


def _is_preferred(resource: ApiResource | Resource, preferred: Mapping[str, Sequence[str]]) -> bool:
    versions = preferred.get(resource.group)
    return not versions or versions[0] == resource.version


def _is_events(resource: ApiResource | Resource, shortcuts: Collection[str], preferred: bool) -> bool:
    """kopf's exclusion of ``Selector('v1', 'events')`` and ``Selector('events.k8s.io', 'events')``."""
    named = "events" in (resource.kind, resource.plural, resource.singular) or "events" in shortcuts
    core = resource.group == "" and resource.version == "v1"
    return named and (core or (resource.group == "events.k8s.io" and preferred))


_KNOWN: dict[str, Selector] = {}


def selector_key(selector: Selector) -> str:
    """The registry's name for ``selector`` (remembered, so :func:`selector_of` finds it again)."""
    key = selector.key
    if _KNOWN.setdefault(key, selector) != selector:  # ('pods') and kind='pods' differ: keep both
        key = repr(selector)
        _KNOWN.setdefault(key, selector)
    return key


def selector_of(key: str) -> Selector:
    """The selector a handler's resource name stands for (a plain name: kopf's parse of it)."""
    found = _KNOWN.get(key)
    return found if found is not None else Selector(key)


def resolve_all(
    keys: Iterable[str],
    resources: Iterable[ApiResource],
    preferred: Mapping[str, Sequence[str]],
    *,
    patching: Collection[str] = (),
    unwatched: Collection[str] = (),
) -> dict[str, list[ApiResource]]:
    """Each key's resources, as kopf serves them: only watchable ones (``list`` and ``watch``), and
    for the keys in ``patching`` (handlers that store state) only patchable ones; the keys in
    ``unwatched`` (admission handlers only) take them whatever their verbs."""
    served = list(resources)
    out: dict[str, list[ApiResource]] = {}
    for key in keys:
        selector = selector_of(key)
        found = selector.resolve(served, preferred)
        if key in unwatched:
            out[key] = found
            continue
        usable = [r for r in found if _watchable(r) and (key not in patching or "patch" in r.verbs)]
        if selector.is_specific and not usable:
            (res,) = found
            raise UnresolvedResource(
                f"{selector!r} resolves to {res.plural}.{res.version}.{res.group}, which cannot be "
                f"served: it lacks the {'patch, ' if key in patching else ''}list and watch verbs"
            )
        out[key] = usable
    return out


def _watchable(resource: ApiResource) -> bool:
    # Resources from a hand-made discovery without verbs are assumed to support everything.
    return not resource.verbs or ("list" in resource.verbs and "watch" in resource.verbs)
