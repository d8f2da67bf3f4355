from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubeop.webhook import jsonpatch

keys = st.sampled_from(["a", "b", "app.kubernetes.io/name", "x~y", "", "spec"])
scalars = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=3)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
documents = st.dictionaries(keys, json_values, max_size=5)


@settings(max_examples=400)
@given(documents, documents)
def test_applying_the_diff_gives_the_changed_document(a: dict[str, Any], b: dict[str, Any]) -> None:
    ops = jsonpatch.diff(a, b)
    out = jsonpatch.apply(a, ops)
    assert out == b
    assert [type(v) for v in _leaves(out)] == [type(v) for v in _leaves(b)]


@given(documents)
def test_equal_documents_have_an_empty_patch(a: dict[str, Any]) -> None:
    assert jsonpatch.diff(a, a) == []


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for k in sorted(value) for leaf in _leaves(value[k])]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def test_smallest_operations_with_escaped_keys() -> None:
    a = {"metadata": {"labels": {"app.kubernetes.io/name": "x"}}, "spec": {"image": "i"}}
    b = {
        "metadata": {"labels": {"app.kubernetes.io/name": "y", "a~b": "z"}},
        "spec": {"image": "i", "replicas": 1},
    }
    assert jsonpatch.diff(a, b) == [
        {"op": "replace", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "y"},
        {"op": "add", "path": "/metadata/labels/a~0b", "value": "z"},
        {"op": "add", "path": "/spec/replicas", "value": 1},
    ]


def test_a_changed_list_is_replaced_whole_and_types_matter() -> None:
    assert jsonpatch.diff({"l": [1, 2]}, {"l": [1, 3]}) == [{"op": "replace", "path": "/l", "value": [1, 3]}]
    assert jsonpatch.diff({"v": 1}, {"v": True}) == [{"op": "replace", "path": "/v", "value": True}]
    assert jsonpatch.diff({"v": 1}, {"v": 1.0}) == [{"op": "replace", "path": "/v", "value": 1.0}]
    assert jsonpatch.diff({"v": 1}, {}) == [{"op": "remove", "path": "/v"}]
