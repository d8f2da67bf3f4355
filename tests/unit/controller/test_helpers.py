"""Pure helpers: compare-before-write, ownership, conditions, predicates, handlers."""

from __future__ import annotations

from typing import Any

import pytest

from kubeop.controller import (
    GenerationChanged,
    LabelChanged,
    OwnershipError,
    Request,
    and_,
    contains,
    enqueue_for_owner,
    enqueue_from_map,
    label_selector,
    merge_desired,
    not_,
    or_,
    set_condition,
    set_controller_reference,
)

from .fakes import app


def test_contains_ignores_server_defaults() -> None:
    current = {
        "spec": {
            "replicas": 1,
            "template": {
                "spec": {
                    "containers": [
                        {"name": "c", "image": "x", "terminationMessagePath": "/dev/termination-log"}
                    ]
                }
            },
        },
        "status": {},
    }
    assert contains(current, {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    assert not contains(
        current, {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "y"}]}}}}
    )
    assert not contains(current, {"spec": {"template": {"spec": {"containers": []}}}})
    assert contains({"data": {"a": "1"}}, {"metadata": {"labels": {}}, "data": {"a": "1"}})
    assert not contains({"data": {"a": "1"}}, {"data": {"a": "1", "b": "2"}})


def test_merge_desired_keeps_foreign_metadata() -> None:
    current = {
        "metadata": {"name": "x", "resourceVersion": "7", "labels": {"other": "1"}},
        "data": {"a": "1"},
        "status": {"s": 1},
    }
    desired = {"metadata": {"name": "x", "labels": {"mine": "2"}}, "data": {"a": "2"}, "status": {"s": 2}}
    merged = merge_desired(current, desired)
    assert merged["metadata"] == {"name": "x", "resourceVersion": "7", "labels": {"other": "1", "mine": "2"}}
    assert merged["data"] == {"a": "2"}
    assert merged["status"] == {"s": 1}
    assert current["metadata"]["labels"] == {"other": "1"}  # the cached object is untouched


def test_controller_reference_rules() -> None:
    owner = app("owner")
    child: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": "default"},
    }
    assert set_controller_reference(owner, child)
    assert not set_controller_reference(owner, child)
    ref = child["metadata"]["ownerReferences"][0]
    assert ref["controller"] is True and ref["blockOwnerDeletion"] is True and ref["uid"] == "uid-owner"
    with pytest.raises(OwnershipError, match="already controlled"):
        set_controller_reference(app("other"), child)
    with pytest.raises(OwnershipError, match="cross-namespace"):
        set_controller_reference(
            app("o", ns="elsewhere"), {"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
        )
    with pytest.raises(OwnershipError, match="cluster-scoped"):
        set_controller_reference(owner, {"kind": "ClusterRole", "metadata": {"name": "r"}})


def test_set_condition_moves_transition_time_only_on_status_change() -> None:
    conds: list[dict[str, Any]] = []
    assert set_condition(conds, "Ready", True, "Available", observed_generation=1)
    first = conds[0]["lastTransitionTime"]
    assert not set_condition(conds, "Ready", True, "Available", observed_generation=1)
    assert set_condition(conds, "Ready", True, "Available", observed_generation=2)
    assert conds[0]["lastTransitionTime"] == first
    assert set_condition(conds, "Ready", False, "Broken", "it broke")
    assert conds[0]["status"] == "False" and conds[0]["message"] == "it broke"
    with pytest.raises(ValueError, match="CamelCase"):
        set_condition(conds, "Ready", True, "")


def test_predicates_compose() -> None:
    a1, a2 = app("a", generation=1), app("a", generation=2)
    assert not GenerationChanged.update(a1, app("a", generation=1, rv="9"))
    assert GenerationChanged.update(a1, a2)
    labelled = app("a")
    labelled["metadata"]["labels"] = {"tier": "web"}
    assert LabelChanged.update(a1, labelled)
    sel = label_selector("tier in (web, api)")
    assert sel.create(labelled) and not sel.create(a1)
    assert and_(GenerationChanged, LabelChanged).update(a1, a2) is False
    assert or_(GenerationChanged, LabelChanged).update(a1, a2) is True
    assert not_(GenerationChanged).update(a1, a2) is False


def test_handlers_map_objects_to_requests() -> None:
    child = {
        "metadata": {
            "name": "c",
            "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "controller": True},
                {"apiVersion": "example.com/v1", "kind": "App", "name": "nc", "controller": False},
            ],
        }
    }
    assert list(enqueue_for_owner("apps", "Deployment").map(child)) == [Request("ns", "d")]
    assert list(enqueue_for_owner("example.com", "App").map(child)) == []
    assert list(enqueue_for_owner("example.com", "App", only_controller=False).map(child)) == [
        Request("ns", "nc")
    ]
    h = enqueue_from_map(lambda o: ["ns/x", ("ns", "y"), Request("", "z")])
    assert list(h.map(child)) == [Request("ns", "x"), Request("ns", "y"), Request("", "z")]


def test_context_logger_does_not_clash_with_log_record_fields(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from kubeop.controller import Context

    ctx = Context(Request("ns", "obj"), None, None, "ctl")  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO):
        ctx.log.info("deployment %s", "created")
    assert caplog.records[-1].object_name == "obj"  # type: ignore[attr-defined]
