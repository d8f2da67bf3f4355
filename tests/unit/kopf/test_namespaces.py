"""kopf's namespace patterns (globs, negations, lists, regexes) and how kubeop.kopf watches them:
one informer per plain name, one filtered cluster-wide informer for patterns."""

from __future__ import annotations

import re

import pytest

from kubeop.cache import DeletedFinalStateUnknown, FuncHandler
from kubeop.kopf.namespaces import Namespaces, filtered, is_exact, match_namespace


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("ns1", "ns1", True),
        ("ns1", "ns10", False),
        ("team-*", "team-a", True),
        ("team-*", "teams", False),
        ("team-?", "team-a", True),
        ("team-?", "team-ab", False),
        ("!kube-*", "default", True),  # a leading negation implies "*" first
        ("!kube-*", "kube-system", False),
        ("*, !kube-*", "kube-public", False),
        ("ns1,ns2", "ns2", False),  # later inclusive globs only re-match what the first matched
        ("ns*, ns2", "ns2", True),
        # kopf's own examples of the algorithm:
        ("myapp-*, !*-pr-*, *pr-123", "myapp-test", True),
        ("myapp-*, !*-pr-*, *pr-123", "myapp-pr-123", True),
        ("myapp-*, !*-pr-*, *pr-123", "myapp-pr-456", False),
        ("myapp-*, !*-pr-*, *pr-123", "otherapp-pr-123", False),
        ("!*-pr-*, *pr-123", "otherapp-pr-123", True),
        ("!*-pr-*, *pr-123", "anyapp-anything", True),
        ("!*-pr-*, *pr-123", "myapp-pr-456", False),
        ("Team-*", "team-a", False),  # case-sensitive, as namespace names are lower case anyway
        (re.compile(r"team-\d+"), "team-12", True),
        (re.compile(r"team-\d+"), "team-12x", False),  # a regex matches the whole name
    ],
)
def test_patterns_match_as_kopf(pattern: str | re.Pattern[str], name: str, expected: bool) -> None:
    assert match_namespace(name, pattern) is expected


def test_plain_names_get_an_informer_each_and_patterns_one_filtered_informer() -> None:
    assert Namespaces.of().targets() == [None] and Namespaces.of(clusterwide=True).clusterwide
    named = Namespaces.of(namespaces=["a", "b", "a"])
    assert named.exact and named.targets() == ["a", "b"]
    assert Namespaces.of(namespace="a").targets() == ["a"]
    patterned = Namespaces.of(namespaces=["a", "team-*", "!kube-*"])
    assert not patterned.exact and patterned.targets() == [None]
    assert [is_exact(p) for p in ("a", "a*", "!a", "a,b", "a?", re.compile("a"))] == [True] + [False] * 5
    assert patterned.matches("a") and patterned.matches("team-x") and patterned.matches(None)
    assert not Namespaces.of(namespaces=["team-*"]).matches("kube-system")


def test_bad_arguments_are_named() -> None:
    with pytest.raises(TypeError, match="not both"):
        Namespaces.of(namespaces=["a"], namespace="b")
    with pytest.raises(TypeError, match="cluster-wide or namespaced"):
        Namespaces.of(namespaces=["a"], clusterwide=True)
    with pytest.raises(TypeError, match="give a list"):
        Namespaces.of(namespaces="team-*")
    with pytest.raises(ValueError, match="empty glob"):
        Namespaces.of(namespaces=["a,,b"])
    with pytest.raises(ValueError, match="empty glob"):
        Namespaces.of(namespaces=["!"])
    with pytest.raises(TypeError, match="namespace pattern 3"):
        Namespaces.of(namespaces=[3])  # type: ignore[list-item]


def obj(namespace: str | None, name: str = "x") -> dict[str, object]:
    return {"metadata": {"name": name, **({"namespace": namespace} if namespace else {})}}


def test_predicates_and_filtered_handlers_pass_the_served_namespaces_only() -> None:
    patterned = Namespaces.of(namespaces=["team-*"])
    only = patterned.predicate(None)
    assert only is not None
    assert only.create(obj("team-a")) and not only.create(obj("other"))
    assert only.update(obj("other"), obj("team-a")) and not only.delete(obj("other"))
    assert only.create(obj(None))  # cluster-scoped objects are served whatever the namespaces
    assert Namespaces.of(namespaces=["a"]).predicate("a") is None  # one informer sees only "a"
    assert Namespaces.of().predicate(None) is None
    named = Namespaces.of(namespaces=["a", "b"])
    in_b = named.predicate("b")
    in_a = named.predicate("a")
    assert in_a is not None and in_b is not None
    assert in_b.create(obj("b")) and not in_b.create(obj(None)) and in_a.create(obj(None))

    seen: list[str] = []
    handler = FuncHandler(
        on_add=lambda o, initial: seen.append(f"add {o['metadata']['name']}"),
        on_update=lambda old, new: seen.append(f"update {new['metadata']['name']}"),
        on_delete=lambda o: seen.append("delete"),
    )
    f = filtered(handler, patterned, None)
    f.on_add(obj("team-a", "in"), False)
    f.on_add(obj("other", "out"), True)
    f.on_update(obj("team-a", "in"), obj("team-a", "in"))
    f.on_delete(DeletedFinalStateUnknown("other/out", obj("other", "out")))
    f.on_delete(DeletedFinalStateUnknown("team-a/in", obj("team-a", "in")))
    assert seen == ["add in", "update in", "delete"]
    assert filtered(handler, Namespaces.of(namespaces=["a"]), "a") is handler
