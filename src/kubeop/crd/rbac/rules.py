"""PolicyRule: one RBAC permission, declared in code next to the code that needs it.

::

    @rbac_rule(groups="apps", resources="deployments", verbs="get;list;watch;create;update;patch")
    @rbac_rule(groups="", resources="events", verbs=["create", "patch"])
    async def reconcile(req: Request, ctx: Context) -> Result: ...

    declared_rules(reconcile)            # -> [PolicyRule(...), PolicyRule(...)]
    declared_rules(my_controllers_module)  # every decorated function and class in a module

:func:`normalize_rules` merges rules the way kubebuilder's generator does: verbs of the same
group, resource and resource names are united, and resources with identical verbs share a rule,
so the generated ClusterRole is short and stable however the declarations are spread.
"""

from __future__ import annotations

import re
import types
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubeop.crd.errors import DeclarationError

__all__ = ["PolicyRule", "declared_rules", "normalize_rules", "rbac_rule"]

T = TypeVar("T")

_ATTR = "__kubeop_rbac_rules__"
KNOWN_VERBS = frozenset(
    {"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "*"}
    | {"use", "bind", "escalate", "impersonate", "approve", "sign", "attest", "post", "put", "head"}
)
_RESOURCE = re.compile(r"^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?(/(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?))?)$")


def _split(value: str | Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(v.strip() for v in re.split(r"[;,]", value) if v.strip()) if value else ("",)
    return tuple(value)


@dataclass(frozen=True)
class PolicyRule:
    """An RBAC rule: verbs allowed on resources of API groups (or on non-resource URLs).

    ``api_groups`` uses ``""`` for the core group. A rule instance is also a decorator that
    records itself on the decorated function or class (see :func:`declared_rules`).
    """

    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        for name in ("api_groups", "resources", "verbs", "resource_names", "non_resource_urls"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, _split(value) if name != "api_groups" else (value,))
            else:
                object.__setattr__(self, name, tuple(value))
        if not self.verbs:
            raise DeclarationError("a PolicyRule needs verbs, e.g. verbs=('get', 'list', 'watch')")
        unknown = [v for v in self.verbs if v not in KNOWN_VERBS]
        if unknown:
            raise DeclarationError(f"unknown RBAC verbs {unknown}; use {', '.join(sorted(KNOWN_VERBS))}")
        if self.non_resource_urls:
            if self.resources or self.api_groups:
                raise DeclarationError("a PolicyRule covers either resources or non_resource_urls, not both")
            bad = [u for u in self.non_resource_urls if not u.startswith("/")]
            if bad:
                raise DeclarationError(f"non_resource_urls must start with '/', got {bad}")
            return
        if not self.resources:
            raise DeclarationError("a PolicyRule needs resources (or non_resource_urls)")
        bad = [r for r in self.resources if not _RESOURCE.match(r)]
        if bad:
            raise DeclarationError(
                f"resources {bad} are not lower-case plural names (like 'deployments' or 'crontabs/status')"
            )
        if not self.api_groups:
            raise DeclarationError("a PolicyRule on resources needs api_groups ('' is the core group)")

    def to_dict(self) -> dict[str, Any]:
        """The rule as it appears in a Role or ClusterRole."""
        out: dict[str, Any] = {}
        if self.non_resource_urls:
            out["nonResourceURLs"] = list(self.non_resource_urls)
        else:
            out["apiGroups"] = list(self.api_groups)
            out["resources"] = list(self.resources)
            if self.resource_names:
                out["resourceNames"] = list(self.resource_names)
        out["verbs"] = list(self.verbs)
        return out

    def __call__(self, target: T) -> T:
        """Record this rule on ``target`` (a function or class) and return it unchanged."""
        holder: Any = getattr(target, "__func__", target)
        existing = holder.__dict__.get(_ATTR, ()) if hasattr(holder, "__dict__") else ()
        setattr(holder, _ATTR, (self, *existing))  # decorators apply bottom-up; keep source order
        return target


def rbac_rule(
    *,
    groups: str | Iterable[str] = "",
    resources: str | Iterable[str] = (),
    verbs: str | Iterable[str],
    resource_names: str | Iterable[str] = (),
    urls: str | Iterable[str] = (),
) -> PolicyRule:
    """A PolicyRule with kubebuilder-marker spelling: lists as ``"a;b"`` strings or iterables.

    ``groups=""`` (the default) is the core group. Use it as a decorator next to the code that
    needs the permission, or collect the returned rules yourself.
    """
    if urls:
        return PolicyRule(verbs=_split(verbs), non_resource_urls=_split(urls))
    group_list = (groups,) if isinstance(groups, str) and ";" not in groups else _split(groups)
    return PolicyRule(
        group_list, _split(resources), _split(verbs), _split(resource_names) if resource_names else ()
    )


def declared_rules(*sources: Any) -> list[PolicyRule]:
    """The rules recorded with ``@rbac_rule`` / ``@PolicyRule(...)`` on functions, classes and methods.

    A module is searched for decorated functions and classes at its top level (imported ones
    included), and a class for decorated methods too. Rules come out in declaration order, duplicates removed.
    """
    found: list[PolicyRule] = []
    seen_objects: set[int] = set()

    def visit(obj: Any) -> None:
        holder = getattr(obj, "__func__", obj)
        if id(holder) in seen_objects:
            return
        seen_objects.add(id(holder))
        if isinstance(holder, types.ModuleType):
            for value in vars(holder).values():
                if isinstance(value, type | types.FunctionType):
                    visit(value)
            return
        found.extend(getattr(holder, "__dict__", {}).get(_ATTR, ()))
        if isinstance(holder, type):
            for value in vars(holder).values():
                if isinstance(value, types.FunctionType | classmethod | staticmethod):
                    visit(value)

    for source in sources:
        visit(source)
    return list(dict.fromkeys(found))


def normalize_rules(rules: Iterable[PolicyRule]) -> list[PolicyRule]:
    """Merge and sort rules: one rule per group and verb set, verbs and resources sorted.

    ``"*"`` among a resource's verbs swallows the others. Resource-name-scoped rules stay
    separate from unscoped ones (merging them would widen or narrow the grant).
    """
    verbs_of: dict[tuple[str, str, tuple[str, ...]], set[str]] = {}
    urls_of: dict[str, set[str]] = {}
    for rule in rules:
        for url in rule.non_resource_urls:
            urls_of.setdefault(url, set()).update(rule.verbs)
        for group in rule.api_groups:
            for resource in rule.resources:
                key = (group, resource, tuple(sorted(rule.resource_names)))
                verbs_of.setdefault(key, set()).update(rule.verbs)
    grouped: dict[tuple[str, tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for (group, resource, names), verbs in verbs_of.items():
        grouped.setdefault((group, names, _verbs(verbs)), []).append(resource)
    out = [
        PolicyRule((group,), tuple(sorted(resources)), verbs, names)
        for (group, names, verbs), resources in grouped.items()
    ]
    out.sort(key=lambda r: (r.api_groups, r.resources, r.resource_names, r.verbs))
    by_verbs: dict[tuple[str, ...], list[str]] = {}
    for url, verbs in urls_of.items():
        by_verbs.setdefault(_verbs(verbs), []).append(url)
    out.extend(PolicyRule(verbs=v, non_resource_urls=tuple(sorted(u))) for v, u in sorted(by_verbs.items()))
    return out


def _verbs(verbs: set[str]) -> tuple[str, ...]:
    return ("*",) if "*" in verbs else tuple(sorted(verbs))
