"""kubeop.kopf's resource selectors against kopf 1.45.2's own, on generated (args, discovery) pairs.

kopf's ``kopf/_cogs/structs/references.py`` imports only the standard library, so it is loaded as
it is from the pinned sdist (fetched at test time, never kept in the repo) and both selectors are
asked the same questions: does the specification parse (or fail with TypeError), is it specific,
which resources does it select, and is it ambiguous. No control plane is needed.
"""

from __future__ import annotations

import importlib.util
import sys
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubeop.core.resource import ApiResource
from kubeop.kopf import selectors
from tests.e2e.kopf.sdist import KOPF_VERSION, kopf_sdist

MEMBER = f"kopf-{KOPF_VERSION}/kopf/_cogs/structs/references.py"


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    where = tmp_path_factory.mktemp("kopf-references")
    with tarfile.open(kopf_sdist()) as tar:
        member = tar.getmember(MEMBER)
        source = tar.extractfile(member)
        assert source is not None
        path = where / "references.py"
        path.write_bytes(source.read())
    spec = importlib.util.spec_from_file_location("_kopf_references", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while building the classes
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


# Small pools, so that names collide across groups, versions and name kinds.
GROUPS = ["", "apps", "kopf.dev", "zalando.org", "events.k8s.io", "metrics.k8s.io"]
VERSIONS = ["v1", "v1beta1", "v2"]
NAMES = [
    ("pods", "Pod", "pod", ("po",)),
    ("events", "Event", "event", ("ev",)),
    ("secrets", "Secret", "", ()),
    ("kopfexamples", "KopfExample", "kopfexample", ("kex", "kexes")),
    ("widgets", "Widget", "widget", ("w", "po")),
    ("deployments", "Deployment", "deployment", ("deploy",)),
]
CATEGORIES = ["all", "kopf", "x"]
VERBS = [
    ("list", "watch", "patch", "get"),
    ("list", "watch", "get"),
    ("create",),
    (),
]


@st.composite
def discoveries(draw: st.DrawFn) -> tuple[list[ApiResource], dict[str, list[str]]]:
    found: dict[tuple[str, str, str], ApiResource] = {}
    for _ in range(draw(st.integers(0, 10))):
        group = draw(st.sampled_from(GROUPS))
        version = "v1" if group == "" else draw(st.sampled_from(VERSIONS))
        plural, kind, singular, shorts = draw(st.sampled_from(NAMES))
        found.setdefault(
            (group, version, plural),
            ApiResource(
                group,
                version,
                plural,
                kind=kind,
                singular=singular,
                short_names=tuple(draw(st.lists(st.sampled_from(shorts), unique=True))) if shorts else (),
                categories=tuple(draw(st.lists(st.sampled_from(CATEGORIES), unique=True, max_size=2))),
                verbs=draw(st.sampled_from(VERBS)),
            ),
        )
    resources = list(found.values())
    preferred: dict[str, list[str]] = {}
    for r in resources:
        preferred.setdefault(r.group, [])
        if r.version not in preferred[r.group]:
            preferred[r.group].append(r.version)
    for versions in preferred.values():  # any version may be the preferred one
        order = draw(st.permutations(versions))
        versions[:] = order
    return resources, preferred


def _in_kopf_group(resource: Any) -> bool:
    return bool(resource.group == "kopf.dev")


def _everything_v2(resource: Any) -> bool:
    return bool(resource.version == "v2")


FILTERS: list[Callable[[Any], bool]] = [_in_kopf_group, _everything_v2]

NAME_TEXT = st.sampled_from(
    [
        *(n for p, k, s, sh in NAMES for n in (p, k, s, *sh) if n),
        "POD",
        "Pods",
        "secret",
        "pods.v1",
        "pods.v1.apps",
        "pods.v2.metrics.k8s.io",
        "kex.kopf.dev",
        "kopfexamples.v1beta1.kopf.dev",
        "events.events.k8s.io",
        "deployments.apps",
        "v1",
        "",
    ]
)
GROUP_TEXT = st.sampled_from([*GROUPS, "v1", "kopf.dev/v1", "apps/v1", "v1beta1", "events.k8s.io/v1"])
VERSION_TEXT = st.sampled_from([*VERSIONS, ""])
MARKER = st.just("EVERYTHING")  # replaced by each implementation's own marker


@st.composite
def specifications(draw: st.DrawFn) -> tuple[tuple[Any, ...], dict[str, Any]]:
    form = draw(st.integers(0, 6))
    args: tuple[Any, ...]
    if form == 0:
        args = ()
    elif form == 1:
        args = (draw(st.one_of(NAME_TEXT, MARKER)),)
    elif form == 2:
        args = (draw(GROUP_TEXT), draw(st.one_of(NAME_TEXT, MARKER)))
    elif form == 3:
        args = (draw(GROUP_TEXT), draw(VERSION_TEXT), draw(st.one_of(NAME_TEXT, MARKER)))
    elif form == 4:
        args = (draw(st.sampled_from(FILTERS)),)
    elif form == 5:
        args = (draw(GROUP_TEXT), draw(VERSION_TEXT), draw(NAME_TEXT), draw(NAME_TEXT))
    else:
        args = (draw(st.sampled_from(FILTERS)), draw(NAME_TEXT))
    keywords = draw(
        st.dictionaries(
            st.sampled_from(
                ["group", "version", "kind", "plural", "singular", "shortcut", "category", "any_name"]
            ),
            st.one_of(NAME_TEXT, st.sampled_from(CATEGORIES), st.sampled_from(GROUPS), MARKER),
            max_size=2,
        )
    )
    return args, keywords


def _with_marker(values: Any, marker: Any) -> Any:
    if isinstance(values, dict):
        return {k: marker if v == "EVERYTHING" else v for k, v in values.items()}
    return tuple(marker if v == "EVERYTHING" else v for v in values)


def _plain(value: Any) -> Any:
    """Each side's EVERYTHING marker as one comparable value."""
    return "<EVERYTHING>" if getattr(value, "name", None) == "EVERYTHING" else value


def _kopf_resource(references: ModuleType, r: ApiResource, preferred: dict[str, list[str]]) -> Any:
    return references.Resource(
        group=r.group,
        version=r.version,
        plural=r.plural,
        kind=r.kind or None,
        singular=r.singular,  # '' for built-ins, as kopf's scanning passes it
        shortcuts=frozenset(r.short_names),
        categories=frozenset(r.categories),
        preferred=True if r.group == "" else preferred[r.group][0] == r.version,
        verbs=frozenset(r.verbs),
    )


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=specifications(), discovery=discoveries())
def test_kubeop_selects_what_kopf_selects(
    references: ModuleType,
    spec: tuple[tuple[Any, ...], dict[str, Any]],
    discovery: tuple[list[ApiResource], dict[str, list[str]]],
) -> None:
    args, keywords = spec
    resources, preferred = discovery
    try:
        theirs = references.Selector(
            *_with_marker(args, references.EVERYTHING), **_with_marker(keywords, references.EVERYTHING)
        )
    except TypeError:
        with pytest.raises(TypeError):
            selectors.Selector(
                *_with_marker(args, selectors.EVERYTHING), **_with_marker(keywords, selectors.EVERYTHING)
            )
        return
    ours = selectors.Selector(
        *_with_marker(args, selectors.EVERYTHING), **_with_marker(keywords, selectors.EVERYTHING)
    )
    assert ours.is_specific == theirs.is_specific
    for name in ("group", "version", "kind", "plural", "singular", "shortcut", "category", "any_name"):
        assert _plain(getattr(ours, name)) == _plain(getattr(theirs, name)), name
    kopf_resources = [_kopf_resource(references, r, preferred) for r in resources]
    expected = {(r.group, r.version, r.plural) for r in theirs.select(kopf_resources)}
    got = {(r.group, r.version, r.plural) for r in ours.select(resources, preferred)}
    assert got == expected
    if theirs.is_specific and len(expected) > 1:  # kopf: "Ambiguous resources will not be served"
        with pytest.raises(selectors.AmbiguousResource):
            ours.resolve(resources, preferred)
    elif theirs.is_specific and not expected:  # kopf: "Unresolved resources cannot be served"
        with pytest.raises(selectors.UnresolvedResource):
            ours.resolve(resources, preferred)
    else:
        assert {(r.group, r.version, r.plural) for r in ours.resolve(resources, preferred)} == expected


def test_the_sdist_module_is_kopfs(references: ModuleType) -> None:
    """The comparison runs against kopf's file, not something else that happens to import."""
    assert Path(references.__file__ or "").name == "references.py"
    assert references.Selector("v1", "Secret").group == ""
    assert references.EVERYTHING.name == "EVERYTHING"
