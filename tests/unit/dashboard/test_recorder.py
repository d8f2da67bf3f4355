"""The recorder: reconciles drained from the journal into bounded histories, failures and rings."""

from __future__ import annotations

import logging

import pytest

from kubeop.controller import Request
from kubeop.controller.journal import ControllerLoad, ReconcileRecord
from kubeop.dashboard import Recorder
from kubeop.dashboard.aggregate import Sources, errors, overview
from kubeop.dashboard.recorder import ObjectKey


def _record(
    name: str,
    *,
    at: float = 1000.0,
    error: BaseException | None = None,
    retry_in: float | None = None,
    attempts: int = 0,
    outcome: str | None = None,
    rid: str = "r1",
) -> ReconcileRecord:
    return ReconcileRecord(
        "widgets",
        "Widget",
        Request(name=name, namespace="ns"),
        at,
        0.004,
        outcome or ("error" if error is not None else "success"),
        error,
        0.0,
        retry_in,
        attempts,
        rid,
    )


def _raise(message: str) -> BaseException:
    try:
        raise ValueError(message)
    except ValueError as exc:
        return exc


def test_a_failing_object_is_kept_with_attempts_and_next_retry_until_it_succeeds() -> None:
    recorder = Recorder()
    journal = recorder.journal.records
    journal.append(_record("a", error=_raise("bad spec"), retry_in=0.5, attempts=1))
    journal.append(_record("a", at=1001.0, error=_raise("bad spec"), retry_in=1.0, attempts=2))
    recorder.drain(1002.0)
    (failure,) = recorder.failing.values()
    assert failure.error == "ValueError: bad spec"
    assert failure.attempts == 2 and failure.since == 1000.0
    assert failure.next_retry == pytest.approx(1001.004 + 1.0)
    assert "raise ValueError(message)" in failure.traceback
    page = errors(recorder, 1002.0)
    assert [g["error"] for g in page["groups"]] == ["ValueError: bad spec"]
    assert page["groups"][0]["objects"][0]["name"] == "a"

    journal.append(_record("a", at=1003.0))
    recorder.drain(1004.0)
    assert not recorder.failing
    assert errors(recorder, 1004.0)["groups"] == []


def test_errors_are_grouped_most_objects_first() -> None:
    recorder = Recorder()
    for name, message in (("a", "x"), ("b", "y"), ("c", "y")):
        recorder.journal.records.append(_record(name, error=_raise(message), retry_in=1.0))
    groups = errors(recorder, 1001.0)["groups"]
    assert [(g["error"], len(g["objects"])) for g in groups] == [("ValueError: y", 2), ("ValueError: x", 1)]


def test_a_terminal_error_is_shown_as_not_retried() -> None:
    recorder = Recorder()
    recorder.journal.records.append(_record("a", error=_raise("no"), outcome="terminal"))
    (obj,) = errors(recorder, 1001.0)["groups"][0]["objects"]
    assert obj["terminal"] is True and obj["next_retry"] is None


def test_memory_is_bounded_by_objects_and_reconciles_per_object() -> None:
    recorder = Recorder(objects=3, reconciles_per_object=2)
    for i in range(10):
        recorder.journal.records.append(_record(f"o{i}", at=1000.0 + i, error=_raise("e")))
    for i in range(5):
        recorder.journal.records.append(_record("o9", at=1020.0 + i))
    recorder.drain(1030.0)
    assert list(recorder.history) == [ObjectKey("Widget", "ns", n) for n in ("o7", "o8", "o9")]
    assert len(recorder.history[ObjectKey("Widget", "ns", "o9")]) == 2
    assert len(recorder.failing) <= 3


def test_the_journal_is_bounded_when_nobody_drains_it() -> None:
    recorder = Recorder(journal_size=5)
    for i in range(50):
        recorder.journal.records.append(_record(f"o{i}"))
    assert len(recorder.journal.records) == 5
    assert recorder.drain(2000.0) == 5


def test_rates_and_queue_load_in_the_overview() -> None:
    recorder = Recorder()
    depth = [4]
    load = ControllerLoad(lambda: depth[0], lambda: 1, 2, "Widget")
    recorder.journal.register("widgets", load, None).new_adds_metric("widgets").inc()
    for i in range(10):
        recorder.journal.records.append(_record(f"o{i}", at=1000.0 + i * 0.1))
    page = overview(recorder, Sources(cluster=lambda: None, name="op"), now=1001.0)
    (row,) = page["controllers"]
    assert (row["name"], row["kind"], row["depth"], row["busy"], row["workers"]) == (
        "widgets",
        "Widget",
        4,
        1,
        2,
    )
    assert row["reconciles_per_s"] > 0 and row["adds_per_s"] > 0
    assert row["error_rate"] == 0.0 and row["p50"] == pytest.approx(0.004)
    assert len(row["spark"]["reconciles"]) == recorder.steps
    assert page["api"] == {"server": "", "probe": "not running"} and page["cache"] == []


def test_log_lines_of_reconciles_are_kept_by_reconcile_id() -> None:
    recorder = Recorder(log_lines=2)
    logger = logging.getLogger("test.dashboard.recorder")
    logger.setLevel(logging.INFO)
    recorder.install(logger)
    try:
        logger.info("not a reconcile's")
        for n in range(3):
            logger.info("line %d", n, extra={"reconcile_id": "abc"})
    finally:
        recorder.uninstall(logger)
    logger.info("after", extra={"reconcile_id": "abc"})
    assert [line.message for line in recorder.log_lines("abc")] == ["line 1", "line 2"]
    assert not logger.handlers


def test_sizes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="objects"):
        Recorder(objects=0)
