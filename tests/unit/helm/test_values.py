"""Release values: the spec with override values on top, in Helm's --set syntax and typing."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubeop.helm.values import ValuesError, parse_path, release_values, set_path, typed_value


def test_the_spec_is_the_values() -> None:
    spec = {"image": "php:8.3", "service": {"port": 80}, "hosts": [{"name": "a"}]}
    values = release_values(spec)
    assert values == spec
    values["service"]["port"] = 81
    assert spec["service"]["port"] == 80  # a deep copy: the cached object is never touched


def test_no_spec_gives_empty_values() -> None:
    assert release_values(None) == {}
    assert release_values({}, {}) == {}


def test_overrides_win_over_the_spec_and_merge_into_maps() -> None:
    spec = {"image": {"repository": "php", "tag": "8.3"}, "replicas": 2}
    values = release_values(spec, {"image.tag": "8.4", "image.pullPolicy": "Always", "replicas": "5"})
    assert values == {"image": {"repository": "php", "tag": "8.4", "pullPolicy": "Always"}, "replicas": 5}


def test_override_replaces_a_scalar_in_its_way() -> None:
    assert release_values({"image": "php:8.3"}, {"image.tag": "8.4"}) == {"image": {"tag": "8.4"}}


def test_override_list_elements() -> None:
    spec = {"hosts": [{"name": "a", "port": 1}]}
    values = release_values(spec, {"hosts[0].name": "b", "hosts[2].name": "c", "extra[1]": "x"})
    assert values == {"hosts": [{"name": "b", "port": 1}, None, {"name": "c"}], "extra": [None, "x"]}


def test_override_nested_lists() -> None:
    assert release_values({}, {"m[1][0]": "v"}) == {"m": [None, ["v"]]}


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        ("true", True), ("TRUE", True), ("False", False), ("null", None), ("NULL", None),
        ("0", 0), ("42", 42), ("-7", -7), ("+3", 3), ("007", "007"), ("1.5", "1.5"), ("1e3", "1e3"),
        ("9223372036854775807", 9223372036854775807), ("9223372036854775808", "9223372036854775808"),
        ("", ""), ("text", "text"), ("a,b", "a,b"), ("{a,1,true}", ["a", 1, True]), ("{}", []),
    ],
)  # fmt: skip
def test_typed_values_follow_helm_set(raw: str, value: Any) -> None:
    assert typed_value(raw) == value
    assert type(typed_value(raw)) is type(value)


@pytest.mark.parametrize(
    ("key", "path"),
    [
        ("a", ["a"]),
        ("a.b.c", ["a", "b", "c"]),
        ("a[0]", ["a", 0]),
        ("a[0].b", ["a", 0, "b"]),
        ("a[1][2]", ["a", 1, 2]),
        (r"nodeSelector.kubernetes\.io/os", ["nodeSelector", "kubernetes.io/os"]),
        (r"a\[0\]", ["a[0]"]),
    ],
)
def test_parse_path(key: str, path: list[Any]) -> None:
    assert parse_path(key) == path


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("", "empty name"),
        (".a", "empty name"),
        ("a.", "empty name"),
        ("a..b", "empty name"),
        ("[0]", "empty name"),
        ("a[", "never closed"),
        ("a[x]", "not a number"),
        ("a[0]b", "expected '.' or '['"),
        ("a\\", "lone backslash"),
    ],
)
def test_parse_path_rejects(key: str, problem: str) -> None:
    with pytest.raises(ValuesError) as info:
        parse_path(key)
    assert problem in str(info.value)


def test_set_path_in_place() -> None:
    values: dict[str, Any] = {"a": {"b": 1}}
    before = copy.deepcopy(values)
    set_path(values, ["a", "c"], 2)
    assert values == {"a": {"b": 1, "c": 2}} != before
    with pytest.raises(ValuesError):
        set_path(values, [0], 1)
