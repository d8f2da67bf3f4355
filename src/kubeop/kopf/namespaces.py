"""kopf's namespace selection: ``--namespace`` repeated, globs and negations, ``--all-namespaces``.

A pattern is kopf's: comma-separated globs (``*`` and ``?``), an exclusive glob starts with
``!``, and a pattern whose first glob is exclusive starts with an implied ``*``. The first
inclusive glob matches, exclusive ones un-match, and later inclusive ones re-match only what
the first one matched (``"myapp-*, !*-pr-*, *pr-123"`` takes ``myapp-pr-123`` but neither
``myapp-pr-456`` nor ``otherapp-pr-123``). A compiled regular expression must match the whole
name. A namespace is served when it matches any of the patterns.

How they are watched on kubeop (:meth:`Namespaces.targets`):

* no patterns, or ``clusterwide``: one informer for all namespaces;
* only plain names (``-n a -n b``): one informer per namespace, so a namespaced Role in each
  is all the RBAC the operator needs (as kopf's fallback for exact names);
* any glob, negation or regex: one cluster-wide informer whose events are filtered by the
  patterns (:meth:`Namespaces.predicate`). kopf lists and watches the namespaces and starts a
  watch per matching namespace; one shared informer needs no namespace watch, sees a namespace
  created later at once and keeps serving one that is terminating, at the price of RBAC to list
  and watch the resource cluster-wide (which an operator given patterns usually has, since kopf
  too needs to list namespaces cluster-wide) and of caching the objects of other namespaces.

Cluster-scoped resources are served whatever the namespaces, as kopf does.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubeop.controller.predicate import Predicate

__all__ = ["NamespacePattern", "Namespaces", "filtered", "is_exact", "match_namespace"]

NamespacePattern = str | re.Pattern[str]


def is_exact(pattern: NamespacePattern) -> bool:
    """A plain namespace name: no glob, negation, list or regex."""
    return isinstance(pattern, str) and not any(c in pattern for c in "!*?,")


def match_namespace(name: str, pattern: NamespacePattern) -> bool:
    """Whether ``name`` matches one kopf namespace pattern (see the module docstring)."""
    if isinstance(pattern, re.Pattern):
        return pattern.fullmatch(name) is not None
    globs = [glob.strip() for glob in pattern.split(",")]
    if globs[0].startswith("!"):
        globs.insert(0, "*")
    first = matched = fnmatch.fnmatchcase(name, globs[0])
    for glob in globs[1:]:
        if glob.startswith("!"):
            matched = matched and not fnmatch.fnmatchcase(name, glob[1:])
        else:
            matched = matched or (first and fnmatch.fnmatchcase(name, glob))
    return matched


def _check(pattern: object) -> NamespacePattern:
    if isinstance(pattern, re.Pattern):
        return pattern
    if not isinstance(pattern, str):
        raise TypeError(
            f"namespace pattern {pattern!r}: give a name, a glob such as 'team-*', or a re.Pattern"
        )
    globs = [glob.strip() for glob in pattern.split(",")]
    if any(not glob.lstrip("!") for glob in globs):
        raise ValueError(
            f"namespace pattern {pattern!r} has an empty glob: write e.g. 'team-*' or 'team-*,!team-test'"
        )
    return pattern


@dataclass(frozen=True)
class Namespaces:
    """The namespaces an operator serves: ``patterns`` (any matches), or all of them."""

    patterns: tuple[NamespacePattern, ...] = ()

    @classmethod
    def of(
        cls,
        *,
        namespaces: Iterable[NamespacePattern] = (),
        namespace: NamespacePattern | None = None,
        clusterwide: bool = False,
    ) -> Namespaces:
        """kopf's ``namespaces=``/``namespace=``/``clusterwide=`` arguments, checked."""
        if isinstance(namespaces, str | re.Pattern):
            raise TypeError(f"namespaces={namespaces!r}: give a list, e.g. namespaces=[{namespaces!r}]")
        given = list(namespaces)
        patterns = [*given, *([namespace] if namespace else [])]
        if given and namespace:
            raise TypeError("give namespaces=[...] or namespace=, not both")
        if clusterwide and patterns:
            raise TypeError(
                "the operator is either cluster-wide or namespaced: clusterwide=True with namespaces"
            )
        return cls(tuple(dict.fromkeys(_check(p) for p in patterns)))

    @property
    def clusterwide(self) -> bool:
        return not self.patterns

    @property
    def exact(self) -> bool:
        """Only plain names: one informer per namespace."""
        return all(is_exact(p) for p in self.patterns)

    def targets(self) -> list[str | None]:
        """The namespaces to start informers in (None: all namespaces)."""
        if self.clusterwide or not self.exact:
            return [None]
        return [str(p) for p in self.patterns]

    def matches(self, namespace: str | None) -> bool:
        """Whether objects in ``namespace`` are served (None: a cluster-scoped object: always)."""
        if namespace is None or self.clusterwide:
            return True
        return any(match_namespace(namespace, p) for p in self.patterns)

    def predicate(self, target: str | None) -> Predicate | None:
        """The event filter of the informer in ``target`` (None when it sees nothing else): for
        patterns, the objects of the matching namespaces; for several plain names, a
        cluster-scoped resource's objects (which every such informer sees) pass in the first
        namespace's informer only."""
        if self.clusterwide or (target is not None and len(self.targets()) == 1):
            return None
        if target is None:
            return _predicate(self.matches)
        first = self.targets()[0]
        return _predicate(lambda ns: ns == target or (ns is None and target == first))

    def __str__(self) -> str:
        return "all namespaces" if self.clusterwide else ", ".join(map(_shown, self.patterns))


def _namespace(obj: Any) -> str | None:
    if not isinstance(obj, Mapping):
        obj = getattr(obj, "obj", None) or {}  # a tombstone: its last known state
    return (obj.get("metadata") or {}).get("namespace") or None


class _Filtered:
    """An informer event handler that passes on the events of the served namespaces only."""

    __slots__ = ("admit", "handler")

    def __init__(self, handler: Any, admit: Callable[[str | None], bool]) -> None:
        self.handler, self.admit = handler, admit

    def on_add(self, obj: Any, is_in_initial_list: bool) -> None:
        if self.admit(_namespace(obj)):
            self.handler.on_add(obj, is_in_initial_list)

    def on_update(self, old: Any, new: Any) -> None:
        if self.admit(_namespace(new)):
            self.handler.on_update(old, new)

    def on_delete(self, obj: Any) -> None:
        if self.admit(_namespace(obj)):
            self.handler.on_delete(obj)


def filtered(handler: Any, scope: Namespaces, target: str | None) -> Any:
    """``handler`` limited to what ``scope`` serves in the informer of ``target`` (as is when
    the informer sees nothing else)."""
    if scope.clusterwide or (target is not None and len(scope.targets()) == 1):
        return handler
    if target is None:
        return _Filtered(handler, scope.matches)
    first = scope.targets()[0]
    return _Filtered(handler, lambda ns: ns == target or (ns is None and target == first))


def _shown(pattern: NamespacePattern) -> str:
    return f"re:{pattern.pattern}" if isinstance(pattern, re.Pattern) else pattern


def _predicate(admit: Callable[[str | None], bool]) -> Predicate:
    def one(obj: Mapping[str, Any]) -> bool:
        return admit(_namespace(obj))

    def two(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        return one(new)

    return Predicate(create=one, update=two, delete=one, generic=one)
