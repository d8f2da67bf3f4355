"""Indexer: keyed storage, the namespace index, custom indices, and indices that never go stale."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeop.cache import NAMESPACE_INDEX, DeletedFinalStateUnknown, Indexer, label_index, object_key
from kubeop.core.keys import key_of


def obj(name: str, namespace: str = "ns", rv: str = "1", **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "resourceVersion": rv, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta}


def test_keys_match_core_and_client_go() -> None:
    assert object_key(obj("a", "ns")) == "ns/a" == str(key_of(obj("a", "ns")))
    assert object_key(obj("node-1", "")) == "node-1" == str(key_of(obj("node-1", "")))
    assert object_key(DeletedFinalStateUnknown("ns/gone", None)) == "ns/gone"
    with pytest.raises(ValueError, match=r"ConfigMap has no metadata\.name"):
        object_key({"kind": "ConfigMap", "metadata": {}})


def test_store_hands_out_the_stored_objects_themselves() -> None:
    store = Indexer()
    a = obj("a")
    store.add(a)
    assert store.get("ns/a") is a and store.get_by_key("ns/a") is a
    assert store.list()[0] is a and store.by_index(NAMESPACE_INDEX, "ns")[0] is a
    assert "ns/a" in store and len(store) == 1 and store.list_keys() == ["ns/a"]
    assert store.get("ns/missing") is None


def test_update_delete_replace() -> None:
    store = Indexer()
    store.add(obj("a"))
    newer = obj("a", rv="2")
    store.update(newer)
    assert store.get("ns/a") is newer and len(store) == 1
    assert store.put("ns/b", obj("b")) is None
    assert store.put("ns/b", obj("b", rv="3"))["metadata"]["resourceVersion"] == "1"  # type: ignore[index]
    store.delete(DeletedFinalStateUnknown("ns/a", None))
    store.delete(obj("never-there"))
    assert store.list_keys() == ["ns/b"]
    assert store.delete_key("ns/b") is not None and len(store) == 0
    store.replace([obj("x", "one"), obj("y", "two")], "10")
    assert sorted(store.list_keys()) == ["one/x", "two/y"]
    assert store.index_keys(NAMESPACE_INDEX, "ns") == []
    assert store.index_keys(NAMESPACE_INDEX, "one") == ["one/x"]


def test_namespace_index_is_built_in() -> None:
    store = Indexer()
    store.add(obj("a", "x"))
    store.add(obj("b", "x"))
    store.add(obj("c", "y"))
    store.add(obj("node", ""))
    assert sorted(store.index_keys(NAMESPACE_INDEX, "x")) == ["x/a", "x/b"]
    assert store.index_keys(NAMESPACE_INDEX, "") == ["node"]
    assert sorted(store.list_index_values(NAMESPACE_INDEX)) == ["", "x", "y"]


def test_custom_index_follows_updates_and_drops_empty_values() -> None:
    store = Indexer({"app": label_index("app")})
    store.add(obj("a", app="web"))
    store.add(obj("b", app="web"))
    store.add(obj("c"))  # no label: not indexed
    assert sorted(o["metadata"]["name"] for o in store.by_index("app", "web")) == ["a", "b"]
    store.update(obj("a", app="db"))
    assert store.index_keys("app", "web") == ["ns/b"] and store.index_keys("app", "db") == ["ns/a"]
    store.delete(obj("b"))
    assert store.list_index_values("app") == ["db"]
    assert [o["metadata"]["name"] for o in store.index("app", obj("z", app="db"))] == ["a"]


def test_multi_valued_index_and_index_lookup() -> None:
    def owners(o: dict[str, Any]) -> list[str]:
        return sorted(o["metadata"].get("labels", {}).values())

    store = Indexer({"owners": owners})
    store.add(obj("a", x="p", y="q"))
    store.add(obj("b", x="q"))
    assert sorted(store.index_keys("owners", "q")) == ["ns/a", "ns/b"]
    assert sorted(o["metadata"]["name"] for o in store.index("owners", obj("t", x="p", y="q"))) == ["a", "b"]


def test_indexers_can_be_added_to_a_filled_store_but_not_replaced() -> None:
    store = Indexer()
    store.add(obj("a", app="web"))
    store.add_indexers({"app": label_index("app")})
    assert store.index_keys("app", "web") == ["ns/a"]
    assert set(store.get_indexers()) == {NAMESPACE_INDEX, "app"}
    with pytest.raises(ValueError, match="already present: app"):
        store.add_indexers({"app": label_index("other")})
    with pytest.raises(KeyError, match="no index named 'nope'"):
        store.by_index("nope", "x")


ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "delete", "replace"]),
        st.sampled_from(["a", "b", "c", "d"]),
        st.sampled_from(["x", "y", ""]),
        st.sampled_from(["web", "db", None]),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops)
def test_indices_always_equal_a_rebuild_from_scratch(
    operations: list[tuple[str, str, str, str | None]],
) -> None:
    store = Indexer({"app": label_index("app")})
    model: dict[str, dict[str, Any]] = {}
    for op, name, ns, app in operations:
        o = obj(name, ns, **({"app": app} if app else {}))
        if op == "add":
            store.add(o)
            model[object_key(o)] = o
        elif op == "delete":
            store.delete(o)
            model.pop(object_key(o), None)
        else:
            batch = [o, obj("z", ns)]
            store.replace(batch)
            model = {object_key(b): b for b in batch}
    assert sorted(store.list_keys()) == sorted(model)
    fresh = Indexer({"app": label_index("app")})
    fresh.replace(model.values())
    for index in (NAMESPACE_INDEX, "app"):
        assert sorted(store.list_index_values(index)) == sorted(fresh.list_index_values(index))
        for value in fresh.list_index_values(index):
            assert sorted(store.index_keys(index, value)) == sorted(fresh.index_keys(index, value))


@settings(max_examples=200, deadline=None)
@given(ops)
def test_the_namespace_index_equals_the_namespaces_of_the_stored_objects(
    operations: list[tuple[str, str, str, str | None]],
) -> None:
    """Whether the index keeps sets (two namespaces or more) or not (one), it answers alike."""
    store = Indexer()
    model: dict[str, dict[str, Any]] = {}
    for op, name, ns, _ in operations:
        o = obj(name, ns)
        if op == "add":
            store.add(o)
            model[object_key(o)] = o
        elif op == "delete":
            store.delete(o)
            model.pop(object_key(o), None)
        else:
            batch = [o, obj("z", ns)] if name != "d" else []
            store.replace(batch)
            model = {object_key(b): b for b in batch}
        expected: dict[str, set[str]] = {}
        for key, stored in model.items():
            expected.setdefault(stored["metadata"].get("namespace") or "", set()).add(key)
        assert sorted(store.list_index_values(NAMESPACE_INDEX)) == sorted(expected)
        for value in ("x", "y", "", "absent"):
            keys = expected.get(value, set())
            assert sorted(store.index_keys(NAMESPACE_INDEX, value)) == sorted(keys)
            assert sorted(object_key(b) for b in store.by_index(NAMESPACE_INDEX, value)) == sorted(keys)
            probe = obj("probe", value if value != "absent" else "q")
            assert sorted(object_key(b) for b in store.index(NAMESPACE_INDEX, probe)) == sorted(
                expected.get(probe["metadata"].get("namespace") or "", set())
            )


def test_a_store_of_one_namespace_keeps_no_namespace_sets() -> None:
    store = Indexer()
    store.replace([obj(f"o{i}", "ns") for i in range(10)])
    assert store._indices[NAMESPACE_INDEX] == {}
    assert len(store.by_index(NAMESPACE_INDEX, "ns")) == 10
    store.add(obj("other", "elsewhere"))
    assert store.index_keys(NAMESPACE_INDEX, "elsewhere") == ["elsewhere/other"]
    assert len(store._indices[NAMESPACE_INDEX]["ns"]) == 10
    store.delete(obj("other", "elsewhere"))
    assert store._indices[NAMESPACE_INDEX] == {}  # one namespace again
    assert sorted(store.list_index_values(NAMESPACE_INDEX)) == ["ns"]
