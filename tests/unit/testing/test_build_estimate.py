"""The cold build's progress line: n/N packages and the time left, from the last build's count."""

from __future__ import annotations

import sys
from pathlib import Path

from kubeop.testing import binaries as bins

ETCD = bins.COMPONENTS["etcd"]


def test_first_build_has_no_estimate() -> None:
    assert bins.BuildEstimate().line(42, 75) == "42 packages compiled in 1m15s (first build: no estimate yet)"


def test_start_uses_the_last_builds_rate() -> None:
    estimate = bins.BuildEstimate(packages=400, seconds=600)
    assert estimate.line(0, 0) == "[--------------------] 0/400 packages, ~10 min left (0m00s)"


def test_later_uses_this_builds_rate() -> None:
    estimate = bins.BuildEstimate(packages=400, seconds=600)
    # 200 packages in 60 s on this machine now: 200 left at 0.3 s each is 60 s, so ~1 min.
    assert estimate.line(200, 60) == "[##########----------] 200/400 packages, ~1 min left (1m00s)"
    assert estimate.line(390, 100).endswith("390/400 packages, <1 min left (1m40s)")


def test_more_packages_than_last_time_never_shows_negative_time() -> None:
    line = bins.BuildEstimate(packages=100, seconds=60).line(130, 80)
    assert line.startswith("[####################] 130/130 packages, <1 min left")


def test_no_duration_yet_counts_without_minutes() -> None:
    assert bins.BuildEstimate(packages=400).line(3, 2).endswith("3/400 packages, no estimate yet (0m02s)")


def test_record_keeps_the_largest_count_and_a_full_builds_duration(tmp_path: Path) -> None:
    assert bins.load_estimate(ETCD, tmp_path) == bins.BuildEstimate()
    bins.record_build(ETCD, 300, 90.04, tmp_path)
    assert bins.load_estimate(ETCD, tmp_path) == bins.BuildEstimate(300, 90.0)
    # Go's build cache helped: fewer packages compiled, faster; the estimate keeps the cold numbers.
    bins.record_build(ETCD, 20, 5, tmp_path)
    assert bins.load_estimate(ETCD, tmp_path) == bins.BuildEstimate(300, 90.0)
    bins.record_build(ETCD, 310, 120, tmp_path)
    assert bins.load_estimate(ETCD, tmp_path) == bins.BuildEstimate(310, 120.0)
    bins.record_build(ETCD, 0, 3, tmp_path)  # everything came from Go's build cache
    assert bins.load_estimate(ETCD, tmp_path) == bins.BuildEstimate(310, 120.0)
    (tmp_path / "bin" / "build-stats.json").write_text("{broken")
    assert bins.load_estimate(ETCD, tmp_path) == bins.BuildEstimate()


def test_go_output_is_counted_and_reported(tmp_path: Path) -> None:
    script = (
        "import time\nfor i in range(6):\n    print(f'example.com/pkg{i}', flush=True)\n    time.sleep(0.05)"
    )
    said: list[str] = []
    count = bins._run_go(
        [sys.executable, "-c", script],
        tmp_path,
        {},
        "etcd-v0",
        said.append,
        bins.BuildEstimate(packages=6, seconds=1),
        interval=0.1,
    )
    assert count == 6
    assert said and all("/6 packages" in line and line.startswith("  etcd-v0: [") for line in said)
