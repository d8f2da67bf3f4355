"""Reading YAML someone else wrote: what yaml.safe_load reads, but aliases may not blow a small
file up into a huge tree (the "billion laughs"), nor form cycles, nor nodes nest without end."""

from __future__ import annotations

import itertools
import re
import time

import pytest
import yaml

from kubeop.core.yaml_input import MAX_ALIAS_NODES, MAX_DEPTH, load_yaml, load_yaml_all

_NAMES = "abcdefghijklmnop"


def billion_laughs(levels: int = 9, width: int = 9) -> str:
    """~300 bytes whose aliases stand for width**levels strings."""
    lines = ["a: &a [" + ",".join(["lol"] * width) + "]"]
    pairs = itertools.pairwise(_NAMES[:levels])
    lines += [f"{n}: &{n} [" + ",".join([f"*{p}"] * width) + "]" for p, n in pairs]
    return "\n".join(lines) + "\n"


def test_the_billion_laughs_is_refused_at_once_naming_the_line() -> None:
    text = billion_laughs()
    assert len(text) < 400
    start = time.perf_counter()
    with pytest.raises(yaml.YAMLError) as err:
        load_yaml(text)
    assert time.perf_counter() - start < 1.0
    mark = err.value.problem_mark  # type: ignore[attr-defined]
    assert 2 <= mark.line + 1 <= 9
    assert f"more than {MAX_ALIAS_NODES:,} nodes" in str(err.value) and "billion laughs" in str(err.value)
    with pytest.raises(yaml.YAMLError, match="billion laughs"):
        load_yaml_all("ok: 1\n---\n" + text)


def test_aliases_that_stay_small_still_load_as_safe_load_reads_them() -> None:
    text = (
        "base: &base {image: nginx, ports: [80, 443]}\n"
        "web:\n  <<: *base\n  replicas: 2\n"
        "copy: *base\n"
        "names: &n [a, b]\nmore: [*n, *n]\n"
        "when: 2018-01-01\n"
    )
    assert load_yaml(text) == yaml.safe_load(text)
    docs = "a: &x 1\nb: *x\n---\n- &y {k: v}\n- *y\n"
    assert load_yaml_all(docs) == list(yaml.safe_load_all(docs))
    assert load_yaml("") is None and load_yaml_all("") == []
    # Aliases adding up to the budget are fine; one more node is not.
    # 4 levels of 10 add ~12,000 nodes through aliases; 5 levels ~123,000, over the budget.
    assert load_yaml(billion_laughs(levels=4, width=10))["d"][9][9][9][9] == "lol"
    with pytest.raises(yaml.YAMLError):
        load_yaml(billion_laughs(levels=5, width=10))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("a: &a [1, *a]\n", "the alias *a refers to a node it is inside (a cycle)"),
        ("a: &a {k: {j: *a}}\n", "the alias *a refers to a node it is inside (a cycle)"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), f"deeper than {MAX_DEPTH} levels"),
        ("a: *nope\n", "found undefined alias"),
        ("a: [1\n", "did not find expected"),
        ("!!python/object:os.system {}\n", "could not determine a constructor"),
    ],
)
def test_what_is_refused_is_a_yaml_error(text: str, says: str) -> None:
    with pytest.raises(yaml.YAMLError, match=re.escape(says)):
        load_yaml(text)


def test_nesting_up_to_the_limit_loads() -> None:
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    value = load_yaml(deep)
    for _ in range(MAX_DEPTH - 1):
        value = value[0]
    assert value == []
