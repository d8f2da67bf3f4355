"""The fault suite's own invariant check, on hand-made objects (no control plane)."""

from __future__ import annotations

from typing import Any

from .support import GROUP, OWNER_LABEL, problems


def w(
    name: str, value: str, *, uid: str | None = None, gen: int = 1, observed: int | None = 1
) -> dict[str, Any]:
    status = {} if observed is None else {"observedGeneration": observed}
    return {
        "metadata": {"name": name, "uid": uid or f"uid-{name}", "generation": gen},
        "spec": {"value": value},
        "status": status,
    }


def cm(name: str, value: str, owner: str | None = None, *, owners: int = 1) -> dict[str, Any]:
    ref = {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "name": name, "uid": owner or f"uid-{name}"}
    refs = [dict(ref, controller=True) for _ in range(owners)]
    return {
        "metadata": {"name": name, "labels": {OWNER_LABEL: name}, "ownerReferences": refs},
        "data": {"value": value},
    }


def test_converged_state_has_no_problems() -> None:
    assert problems([w("a", "1"), w("b", "2")], [cm("a", "1"), cm("b", "2")], {"a": "1", "b": "2"}) == []


def test_each_broken_invariant_is_reported() -> None:
    found = problems(
        [w("a", "1"), w("b", "2", gen=2), w("c", "3"), w("d", "4")],
        [cm("a", "old"), cm("b", "2"), cm("gone", "x"), cm("d", "4", owners=2)],
        {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"},
    )
    text = "\n".join(found)
    assert "Widget a: ConfigMap has value 'old'" in text
    assert "Widget b: status.observedGeneration 1 != generation 2" in text
    assert "Widget c: no ConfigMap" in text
    assert "orphan: ConfigMap gone" in text
    assert "ConfigMap d has 2 controller references" in text
    assert "1 Widgets missing: ['e']" in text


def test_duplicates_lost_writes_and_allowed_orphans() -> None:
    twin = cm("a", "1")
    twin["metadata"]["name"] = "a-twin"
    found = problems([w("a", "1")], [cm("a", "1"), twin], {"a": "2"})
    assert any("2 ConfigMaps" in p for p in found)
    assert any("lost a write" in p for p in found)
    assert problems([w("a", "1")], [cm("a", "1"), cm("old", "1")], allow_orphans=True) == []
