"""kopf's resource selectors resolved against kubeop.testing.FakeCluster's discovery: the forms
kopf accepts (('v1', 'Secret') for the core group, short names, categories, EVERYTHING, keywords),
kopf's case rules, and errors for ambiguous or unknown names."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

import kubeop.kopf as kopf
from kubeop.kopf.running import _resolve, build_manager, run_manager
from kubeop.kopf.selectors import AmbiguousResource, Selector, UnresolvedResource
from kubeop.testing import FakeCluster
from tests.support.crds import widget_crd


def crd(group: str, *, shorts: tuple[str, ...] = (), categories: tuple[str, ...] = ()) -> dict[str, Any]:
    manifest = copy.deepcopy(widget_crd(group, free_spec=True))
    manifest["spec"]["names"].update(shortNames=list(shorts), categories=list(categories))
    return manifest


def names(resolved: dict[str, Any]) -> dict[str, list[str]]:
    return {k: [f"{r.plural}.{r.version}.{r.group}" for r in v] for k, v in resolved.items()}


async def test_v1_and_a_kind_is_the_core_group_and_its_handler_runs() -> None:
    cluster = FakeCluster()
    reg = kopf.Registry()
    seen: list[str] = []
    handled = asyncio.Event()

    @kopf.on.create("v1", "Secret", registry=reg)
    async def created(name: str, **_: Any) -> None:
        seen.append(name)
        handled.set()

    async with cluster.client() as api:
        resolved = await _resolve(reg, api)
        assert names(resolved) == {"Secret.v1.": ["secrets.v1."]}
        manager = build_manager(registry=reg, client=api, _resolved=resolved)
        assert [c.name for c in manager.controllers] == ["kopf-secrets.v1."]
        stop = asyncio.Event()
        task = asyncio.create_task(run_manager(manager, stop))
        try:
            await api.create(
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s1", "namespace": "default"}}
            )
            await asyncio.wait_for(handled.wait(), 10)
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)
    assert seen == ["s1"]


async def test_short_names_categories_and_everything_select_as_kopf() -> None:
    cluster = FakeCluster()
    cluster.add_crd(crd("sel.example.com", shorts=("wdg",), categories=("things", "all")))
    reg = kopf.Registry()
    for args, options in [
        (("wdg",), {}),
        ((), {"category": "things"}),
        ((), {"shortcut": "wdg", "group": "sel.example.com"}),
        (("sel.example.com/v1", "Widget"), {}),
        ((kopf.EVERYTHING,), {}),
    ]:
        kopf.on.event(*args, registry=reg, id=repr((args, options)), **options)(lambda **_: None)
    async with cluster.client() as api:
        resolved = names(await _resolve(reg, api))
    widgets = ["widgets.v1.sel.example.com"]
    assert resolved["wdg"] == widgets
    assert resolved["Selector(category='things')"] == widgets
    assert resolved["wdg.sel.example.com"] == widgets
    assert resolved["Widget.v1.sel.example.com"] == widgets
    everything = resolved["Selector(any_name=<Marker.EVERYTHING: 1>)"]
    assert {"widgets.v1.sel.example.com", "secrets.v1.", "pods.v1."} <= set(everything)
    assert not [r for r in everything if r.startswith("events.")]  # kopf never serves events so


async def test_a_kind_in_two_groups_is_ambiguous_and_a_group_settles_it() -> None:
    cluster = FakeCluster()
    cluster.add_crd(crd("a.example.com"), crd("b.example.com"))
    reg = kopf.Registry()
    kopf.on.create("Widget", registry=reg)(lambda **_: None)
    async with cluster.client() as api:
        with pytest.raises(AmbiguousResource, match=r"widgets.v1.a.example.com, widgets.v1.b.example.com"):
            await _resolve(reg, api)
        settled = kopf.Registry()
        kopf.on.create("b.example.com", "Widget", registry=settled)(lambda **_: None)
        assert names(await _resolve(settled, api)) == {"Widget.b.example.com": ["widgets.v1.b.example.com"]}


async def test_names_match_case_sensitively_as_in_kopf() -> None:
    cluster = FakeCluster()
    async with cluster.client() as api:
        for name, found in [("secret", True), ("Secret", True), ("secrets", True), ("Secrets", False)]:
            reg = kopf.Registry()
            kopf.on.create(name, registry=reg)(lambda **_: None)
            if found:
                assert names(await _resolve(reg, api)) == {name: ["secrets.v1."]}
            else:
                with pytest.raises(UnresolvedResource, match=r"Secrets.*case"):
                    await _resolve(reg, api)


def test_positional_and_keyword_forms_parse_as_kopf() -> None:
    def fields(s: Selector) -> tuple[Any, ...]:
        return (s.group, s.version, s.any_name)

    assert fields(Selector("v1", "Secret")) == ("", "v1", "Secret")
    assert fields(Selector("pods")) == (None, None, "pods")
    assert fields(Selector("pods.v1")) == (None, "v1", "pods")
    assert fields(Selector("deployments.v1.apps")) == ("apps", "v1", "deployments")
    assert fields(Selector("kex.kopf.dev")) == ("kopf.dev", None, "kex")
    assert fields(Selector("kopf.dev/v1", "kex")) == ("kopf.dev", "v1", "kex")
    assert fields(Selector("kopf.dev", "kex")) == ("kopf.dev", None, "kex")
    assert fields(Selector("kopf.dev", "v1", "kex")) == ("kopf.dev", "v1", "kex")
    assert fields(Selector("v1beta1", "kex")) == ("v1beta1", None, "kex")  # only 'v1' means core
    assert Selector(kind="Pod").kind == "Pod" and Selector(category="all").is_specific is False
    with pytest.raises(TypeError, match="ambiguous resource specification"):
        Selector("pods", kind="Pod")
    with pytest.raises(TypeError, match="name the resource"):
        Selector(group="apps")
    with pytest.raises(TypeError, match="must not be empty"):
        Selector(kind="")
    with pytest.raises(TypeError, match="at most 3"):
        Selector("a", "b", "c", "d")


def test_a_bad_selector_is_an_error_naming_the_handler() -> None:
    with pytest.raises(TypeError, match=r"@kopf.on.create of .*fn.*ambiguous resource specification"):

        @kopf.on.create("pods", plural="pods", registry=kopf.Registry())
        def fn(**_: Any) -> None: ...


def test_a_category_without_discovery_is_a_clear_error_at_build() -> None:
    reg = kopf.Registry()
    kopf.on.create(category="all", registry=reg)(lambda **_: None)
    with pytest.raises(ValueError, match=r"Selector\(category='all'\) select resources by discovery"):
        build_manager(registry=reg)


async def test_a_name_and_a_keyword_with_the_same_text_stay_different_selectors() -> None:
    cluster = FakeCluster()
    reg = kopf.Registry()
    kopf.on.event("secrets", registry=reg)(lambda **_: None)
    kopf.on.event(kind="secrets", registry=reg)(lambda **_: None)  # no kind is named so
    assert reg.resources() == ["secrets", "Selector(kind='secrets')"]
    async with cluster.client() as api:
        with pytest.raises(UnresolvedResource, match=r"Selector\(kind='secrets'\)"):
            await _resolve(reg, api)
