"""The one patch engine (kubeop.core.patching) that the aggregated API server and the fake
cluster share: RFC 6902's strictness, RFC 7386, strategic merge by list rules."""

from __future__ import annotations

from typing import Any

import pytest

from kubeop.core.patching import ListRule, PatchError, json_patch, merge_patch, strategic_merge_patch

DOC: dict[str, Any] = {"a": {"b": [1, 2, 3]}, "c/d": 1, "e~f": 2, "t": True}


def fails(ops: list[dict[str, Any]], code: int) -> str:
    with pytest.raises(PatchError) as exc:
        json_patch(DOC, ops)
    assert exc.value.code == code, exc.value.message
    return exc.value.message


def test_every_operation_on_a_copy() -> None:
    ops = [
        {"op": "add", "path": "/a/b/-", "value": 4},
        {"op": "add", "path": "/a/b/0", "value": 0},
        {"op": "remove", "path": "/a/b/1"},
        {"op": "replace", "path": "/c~1d", "value": 10},
        {"op": "copy", "from": "/e~0f", "path": "/g"},
        {"op": "move", "from": "/g", "path": "/h"},
        {"op": "test", "path": "/h", "value": 2},
        {"op": "test", "path": "/a/b", "value": [0, 2, 3, 4.0]},
    ]
    assert json_patch(DOC, ops) == {"a": {"b": [0, 2, 3, 4]}, "c/d": 10, "e~f": 2, "t": True, "h": 2}
    assert DOC["a"]["b"] == [1, 2, 3]
    assert json_patch(DOC, [{"op": "replace", "path": "", "value": [1]}]) == [1]


@pytest.mark.parametrize(
    ("ops", "words"),
    [
        ([{"op": "remove", "path": "/a/b/01"}], "'01' in '/a/b/01' is not an array index"),
        ([{"op": "remove", "path": "/a/b/-"}], "'-' in '/a/b/-' names no item"),
        ([{"op": "add", "path": "/a/b/4", "value": 1}], "index 4 in '/a/b/4' is out of range"),
        ([{"op": "replace", "path": "/x", "value": 1}], "'/x' does not exist"),
        ([{"op": "add", "path": "/x/y", "value": 1}], "'/x/y' does not exist (no 'x')"),
        ([{"op": "test", "path": "/t", "value": 1}], "the test failed"),
        ([{"op": "move", "from": "/a", "path": "/a/z"}], "into its own child"),
        ([{"op": "add", "path": "/c~1d/x", "value": 1}], "parent is a scalar"),
    ],
)
def test_operations_that_do_not_apply_are_422_naming_the_path(ops: list[dict[str, Any]], words: str) -> None:
    message = fails(ops, 422)
    assert words in message and message.startswith("JSON patch operation 0")


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "add", "path": "/x"}],
        [{"op": "frobnicate", "path": "/x"}],
        [{"op": "copy", "path": "/x"}],
        [{"op": "remove", "path": "a"}],
        [{"op": "remove", "path": "/~2"}],
        [{"path": "/a"}],
    ],
)
def test_malformed_operations_are_400(ops: list[dict[str, Any]]) -> None:
    fails(ops, 400)


def test_a_patch_that_is_not_a_list_is_400() -> None:
    with pytest.raises(PatchError) as exc:
        json_patch(DOC, {"op": "add"})
    assert exc.value.code == 400


def test_merge_patch() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}, "l": [1]}, {"a": {"b": None, "d": 3}, "l": [2]}) == {
        "a": {"c": 2, "d": 3},
        "l": [2],
    }
    assert merge_patch({"a": 1}, [1]) == [1]


def rules(path: tuple[str, ...]) -> ListRule | None:
    return {"items": ListRule("name"), "tags": ListRule()}.get(path[-1])


def test_strategic_merge_by_rules() -> None:
    current = {
        "spec": {
            "items": [{"name": "a", "v": 1}, {"name": "b", "v": 1}],
            "tags": ["x"],
            "other": [1, 2],
        }
    }
    patch = {
        "spec": {
            "items": [{"name": "b", "v": 2}, {"name": "c", "v": 3}, {"name": "a", "$patch": "delete"}],
            "tags": ["y", "x"],
            "other": [3],
        }
    }
    assert strategic_merge_patch(current, patch, rules) == {
        "spec": {"items": [{"name": "b", "v": 2}, {"name": "c", "v": 3}], "tags": ["x", "y"], "other": [3]}
    }
    replaced = strategic_merge_patch(current, {"spec": {"$patch": "replace", "tags": []}}, rules)
    assert replaced == {"spec": {"tags": []}}


@pytest.mark.parametrize(
    ("patch", "words"),
    [
        ({"spec": {"items": [{"v": 1}]}}, "has no merge key 'name'"),
        ({"spec": {"$setElementOrder/items": []}}, "is not implemented"),
        ({"spec": {"$patch": "merge-ish"}}, "unknown $patch"),
    ],
)
def test_strategic_merge_refusals(patch: dict[str, Any], words: str) -> None:
    with pytest.raises(PatchError) as exc:
        strategic_merge_patch({"spec": {"items": []}}, patch, rules)
    assert exc.value.code == 422 and words in exc.value.message


def test_copies_that_grow_the_document_without_bound_are_refused() -> None:
    doc = {"spec": {"a": "x" * 1000}}
    doubling = [{"op": "copy", "from": "/spec", "path": f"/spec/c{n}"} for n in range(20)]
    with pytest.raises(PatchError) as refused:
        json_patch(doc, doubling)  # 951 bytes of patch would make ~1 GB
    assert refused.value.code == 413 and "copy operations copy over" in refused.value.message
    assert "JSON patch operation 11 (copy" in refused.value.message  # the one over the limit, named
    few = json_patch(doc, doubling[:3])  # a handful of copies is fine
    assert set(few["spec"]) == {"a", "c0", "c1", "c2"}
