"""The per-controller rings: fixed memory, the last steps only, rates and percentiles per step."""

from __future__ import annotations

import pytest

from kubeop.dashboard.ring import SAMPLES, Buckets, percentile


def test_percentile_is_the_nearest_rank() -> None:
    assert percentile([], 0.5) is None
    assert percentile([3.0], 0.99) == 3.0
    values = [float(i) for i in range(1, 101)]
    assert percentile(values, 0.5) == 50.0
    assert percentile(values, 0.99) == 99.0
    assert percentile(list(reversed(values)), 1.0) == 100.0


def test_series_are_per_step_oldest_first() -> None:
    ring = Buckets(step=5.0, length=4)
    ring.reconciled(100.0, 0.010, failed=False)
    ring.reconciled(101.0, 0.030, failed=True)
    ring.added(102.0, 5)
    ring.reconciled(112.0, 0.020, failed=False)
    series = ring.series(113.0)
    assert series["reconciles"] == [0.0, 2 / 5, 0.0, 1 / 5]
    assert series["adds"] == [0.0, 1.0, 0.0, 0.0]
    assert series["errors"] == [None, 0.5, None, 0.0]
    assert series["p99"] == [None, 0.030, None, 0.020]


def test_old_steps_are_forgotten_not_counted_again() -> None:
    ring = Buckets(step=1.0, length=3)
    ring.reconciled(10.0, 0.1, failed=True)
    assert ring.recent(10.5, 3)["errors"] == 1.0
    # three steps later the slot is reused: nothing of step 10 remains
    ring.reconciled(13.0, 0.2, failed=False)
    recent = ring.recent(13.5, 3)
    assert recent["errors"] == 0.0 and recent["p50"] == 0.2
    assert ring.series(20.0)["reconciles"] == [0.0, 0.0, 0.0]


def test_a_step_keeps_a_bounded_number_of_durations() -> None:
    ring = Buckets(step=60.0, length=2)
    for i in range(SAMPLES * 3):
        ring.reconciled(0.5, float(i), failed=False)
    assert ring.series(0.5)["reconciles"][-1] == SAMPLES * 3 / 60.0
    assert len(ring._buckets[0].durations) == SAMPLES


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="step > 0"):
        Buckets(step=0, length=10)
    with pytest.raises(ValueError, match="length >= 2"):
        Buckets(step=1, length=1)


def test_a_steps_percentiles_follow_its_durations_and_a_reused_slot_forgets_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ring = Buckets(step=1.0, length=2)
    ring.reconciled(10.1, 0.5, failed=False)
    assert ring.series(10.2)["p50"] == [None, 0.5]
    ring.reconciled(10.3, 0.1, failed=False)
    ring.reconciled(10.4, 0.2, failed=False)
    assert ring.series(10.5)["p50"] == [None, 0.2]  # the current step's newest durations count
    sorts = []
    real_sorted = sorted
    monkeypatch.setattr("builtins.sorted", lambda v: sorts.append(len(v)) or real_sorted(v))
    for now in (11.1, 11.2, 11.3):  # step 10 is finished: sorted once, not on every page
        assert ring.series(now)["p99"] == [0.5, None]
    assert sorts == []  # already sorted when it was the current step and unchanged since
    ring.reconciled(12.0, 0.9, failed=False)  # step 12 reuses step 10's slot
    assert ring.series(12.5)["p50"] == [None, 0.9]
    assert ring.recent(12.5, 2) == {"reconciles": 1 / 1.5, "adds": 0.0, "errors": 0.0, "p50": 0.9, "p99": 0.9}
