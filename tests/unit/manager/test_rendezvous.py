"""Rendezvous hashing: balanced, stable across processes, minimal movement on join and leave."""

from __future__ import annotations

import collections
import subprocess
import sys

from kubeop.manager.rendezvous import owner

KEYS = [f"ns-{i % 7}/widget-{i}" for i in range(20_000)]


def shares(members: list[str]) -> collections.Counter[str | None]:
    return collections.Counter(owner(k, members) for k in KEYS)


def test_no_members_owns_nothing() -> None:
    assert owner("ns/a", []) is None


def test_balance_within_five_percent_of_the_mean() -> None:
    for n in (2, 3, 5, 8):
        members = [f"operator-{i}_{i * 7919:x}" for i in range(n)]
        counts = shares(members)
        mean = len(KEYS) / n
        assert set(counts) == set(members)
        assert all(abs(c - mean) / mean < 0.05 for c in counts.values()), counts


def test_join_moves_only_keys_to_the_newcomer_about_one_in_n() -> None:
    before = ["a", "b", "c"]
    after = [*before, "d"]
    moved = [k for k in KEYS if owner(k, before) != owner(k, after)]
    assert all(owner(k, after) == "d" for k in moved)
    assert abs(len(moved) / len(KEYS) - 1 / 4) < 0.02


def test_leave_moves_only_the_leavers_keys() -> None:
    before = ["a", "b", "c", "d"]
    after = ["a", "b", "d"]
    moved = [k for k in KEYS if owner(k, before) != owner(k, after)]
    assert moved and all(owner(k, before) == "c" for k in moved)
    assert len(moved) == sum(1 for k in KEYS if owner(k, before) == "c")


def test_order_of_members_does_not_matter() -> None:
    assert all(owner(k, ["a", "b", "c"]) == owner(k, ["c", "a", "b"]) for k in KEYS[:1000])


def test_same_answer_in_another_process() -> None:
    # hash() is salted per process; the owner must not be.
    code = "from kubeop.manager.rendezvous import owner; print(owner('ns/w1', ['a', 'b', 'c', 'd']))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=None)
    assert out.stdout.strip() == owner("ns/w1", ["a", "b", "c", "d"])
