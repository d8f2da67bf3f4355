"""Shaped dicts (kubeop.cache.shapes) and the default transform that makes cached objects of them."""

from __future__ import annotations

import copy
import sys
from typing import Any

import orjson
import pytest

from kubeop.cache import compact
from kubeop.cache import shapes as shapes_module
from kubeop.cache.shapes import shaped

pytestmark = pytest.mark.skipif(not shapes_module._enabled, reason="no key-sharing dicts on this interpreter")

META_KEYS = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "ownerReferences")


@pytest.fixture(autouse=True)
def fresh_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shapes_module, "_shapes", {})
    monkeypatch.setattr(shapes_module, "_seen", set())


def meta(i: int) -> dict[str, Any]:
    return dict(zip(META_KEYS, (f"cm{i}", "ns", f"uid-{i}", str(i), "2026-11-24T08:00:00Z", []), strict=True))


def test_a_shape_is_learned_the_second_time_and_then_shared() -> None:
    first = meta(1)
    assert shaped(first) is first  # seen once: left as it is
    second, third = shaped(meta(2)), shaped(meta(3))
    assert type(second) is dict and second == meta(2) and list(second) == list(META_KEYS)
    assert sys.getsizeof(second) < sys.getsizeof(meta(2))
    assert sys.getsizeof(third) == sys.getsizeof(second)
    assert orjson.dumps(second) == orjson.dumps(meta(2))
    assert copy.deepcopy(second) == meta(2)


def test_a_shaped_dict_is_a_dict_when_changed() -> None:
    shaped(meta(0))
    d = shaped(meta(1))
    d["labels"] = {"a": "b"}
    d["extra"] = 1
    del d["uid"]
    d["name"] = "other"
    expected = meta(1) | {"labels": {"a": "b"}, "extra": 1, "name": "other"}
    del expected["uid"]
    assert d == expected and list(d) == list(expected)
    assert d.pop("extra") == 1 and "extra" not in d
    d.clear()
    assert d == {}
    assert shaped(meta(2)) == meta(2)  # other dicts of the shape are untouched


def test_any_string_is_a_key() -> None:
    d = {"": 1, "app.kubernetes.io/name": "x", "a b": 2, "\u00e9": 3, "class": 4}
    shaped(d)
    out = shaped(d)
    assert out == d and list(out) == list(d) and sys.getsizeof(out) < sys.getsizeof(d)


def test_other_orders_and_subsets_are_other_shapes() -> None:
    reordered = dict(reversed(list(meta(1).items())))
    for _ in range(2):
        out = shaped(dict(reordered))
        assert out == reordered and list(out) == list(reordered)
    assert len(shapes_module._shapes) == 1


def test_what_is_not_shaped() -> None:
    odd: list[dict[str, Any]] = [
        {},
        {"__dict__": 1, "a": 2},  # would name an attribute of the instance
        {"__class__": 1},
        {1: "not a string key"},
        {f"k{i}": i for i in range(shapes_module.MAX_KEYS + 1)},
    ]
    for d in odd:
        for _ in range(3):
            assert shaped(d) is d
    assert all(cls is None for cls in shapes_module._shapes.values())


def test_the_tables_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shapes_module, "SHAPES_MAX", 3)
    monkeypatch.setattr(shapes_module, "_SEEN_MAX", 10)
    for i in range(50):
        d = {f"key{i}": i}
        shaped(d)
        shaped(d)
        assert len(shapes_module._seen) <= 10
    assert len(shapes_module._shapes) == 3
    late = {"key49": 49}
    assert shaped(late) is late  # no room for more classes: plain dicts from here on


def decoded(i: int) -> dict[str, Any]:
    obj = {
        "kind": "ConfigMap",
        "apiVersion": "v1",
        "metadata": {
            "name": f"w{i}",
            "namespace": "ns",
            "uid": f"uid-{i}",
            "resourceVersion": str(i),
            "creationTimestamp": "2026-11-24T08:00:00Z",
            "labels": {"app": "x", "id": str(i)},
            "annotations": {"note": "n"},
            "ownerReferences": [
                {"apiVersion": "example.com/v1", "kind": "Widget", "name": f"w{i}", "uid": f"o-{i}"},
                "not an owner",
            ],
            "managedFields": [{"manager": "kubectl"}],
        },
        "data": {"k": "v"},
    }
    result: dict[str, Any] = orjson.loads(orjson.dumps(obj))
    return result


def test_compact_objects_are_equal_and_smaller() -> None:
    plain = decoded(0)
    del plain["metadata"]["managedFields"]
    compact(decoded(0))
    obj = compact(decoded(1))
    expected = decoded(1)
    del expected["metadata"]["managedFields"]
    assert obj == expected and orjson.dumps(obj) == orjson.dumps(expected)
    m = obj["metadata"]
    for ours, theirs in (
        (obj, plain),
        (m, plain["metadata"]),
        (m["labels"], plain["metadata"]["labels"]),
        (m["annotations"], plain["metadata"]["annotations"]),
        (m["ownerReferences"][0], plain["metadata"]["ownerReferences"][0]),
    ):
        assert sys.getsizeof(ours) < sys.getsizeof(theirs)
    assert m["ownerReferences"][0]["name"] is m["name"]  # one string for an owner of the same name
    assert sys.getsizeof(obj["data"]) == sys.getsizeof(plain["data"])  # the content is kept as decoded


def test_compact_is_idempotent() -> None:
    once = compact(decoded(1))
    assert compact(once) == once
