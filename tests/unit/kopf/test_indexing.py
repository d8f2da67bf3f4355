"""``@kopf.index``: the index kept from an object stream, and the decorator's checks."""

from __future__ import annotations

from typing import Any

import pytest

import kubeop.kopf as kopf
from kubeop.kopf.indexing import Indexers, indexing_handlers


def pod(name: str, phase: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": name, "labels": labels}, "status": {"phase": phase}}


async def test_index_follows_objects_changes_and_deletions() -> None:
    reg = kopf.Registry()

    @kopf.index("pods", registry=reg, id="is_running")
    def is_running(namespace: str, name: str, status: Any, **_: Any) -> Any:
        return {(namespace, name): status.get("phase") == "Running"}

    @kopf.index("pods", registry=reg, id="by_app", labels={"app": kopf.PRESENT})
    async def by_app(labels: Any, name: str, **_: Any) -> Any:
        return {labels["app"]: name}

    @kopf.index("pods", registry=reg, id="phase")
    def plain(status: Any, **_: Any) -> Any:
        return status.get("phase")  # not a mapping: under the key None

    indexers = Indexers(indexing_handlers(reg), {})
    await indexers.index(pod("a", "Running", app="web"))
    await indexers.index(pod("b", "Pending", app="web"))
    await indexers.index(pod("c", "Running"))
    running, by_app_index, phase = (indexers.indices[k] for k in ("is_running", "by_app", "phase"))
    assert dict(running) == {
        ("ns", "a"): running[("ns", "a")],
        ("ns", "b"): running[("ns", "b")],
        ("ns", "c"): running[("ns", "c")],
    }
    assert list(running[("ns", "a")]) == [True] and list(running[("ns", "b")]) == [False]
    assert sorted(by_app_index["web"]) == ["a", "b"] and "c" not in by_app_index.get("web", ())
    assert sorted(phase[None]) == ["Pending", "Running", "Running"]

    await indexers.index(pod("b", "Running"))  # loses its label: out of by_app
    assert list(by_app_index["web"]) == ["a"] and list(running[("ns", "b")]) == [True]
    indexers.discard(pod("a", "Running"))
    assert "web" not in by_app_index and ("ns", "a") not in running
    assert len(running) == 2


def test_index_decorator_checks_name_the_handler() -> None:
    reg = kopf.Registry()
    with pytest.raises(TypeError, match=r"@kopf.index of '.*fn': unknown argument\(s\) interval"):

        @kopf.index("pods", registry=reg, interval=3)
        def fn(**_: Any) -> None: ...

    @kopf.index("pods", registry=reg, id="twice")
    def twice(**_: Any) -> None: ...

    with pytest.raises(ValueError, match="'twice' is registered twice"):
        kopf.index("pods", registry=reg, id="twice")(twice)


def test_subhandler_outside_a_handler_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="inside a running handler"):
        kopf.subhandler(id="x")
    with pytest.raises(RuntimeError, match="inside a running handler"):
        kopf.register(lambda **_: None)


def test_a_field_a_builtin_kind_does_not_have_is_an_error_naming_the_handler() -> None:
    reg = kopf.Registry()
    with pytest.raises(ValueError, match=r"on\.update of '.*typo'.*deployments.apps has no spec.replica$"):

        @kopf.on.update("deployments.apps", registry=reg, field="spec.replica")
        def typo(**_: Any) -> None: ...

    with pytest.raises(ValueError, match=r"@kopf.index of '.*nope'.*pods has no spec.containerz"):

        @kopf.index("pods", registry=reg, field="spec.containerz")
        def nope(**_: Any) -> None: ...

    # existing paths, free-form maps below a known part, and custom resources pass
    kopf.on.update("deployments.apps", registry=reg, field="spec.replicas")(lambda **_: None)
    kopf.on.field("pods", registry=reg, field="metadata.labels.app")(lambda **_: None)
    kopf.on.field("configmaps", registry=reg, field="data.key")(lambda **_: None)
    kopf.on.field("widgets.example.com", registry=reg, field="spec.anything")(lambda **_: None)
