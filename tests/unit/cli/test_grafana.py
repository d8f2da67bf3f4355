"""The generated project's Grafana dashboards query only series a running Manager exports: every
metric name in their PromQL is on the /metrics of a Manager (on kubeop.testing.FakeCluster, with
a controller and a webhook) scraped over HTTP."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from kubeop.scaffold.grafana import DASHBOARDS

from ..manager.test_metrics_exposition import scrape  # noqa: F401 - the fixture
from .conftest import new_project

_LABELS = re.compile(r"\{[^}]*\}")
_GROUPING = re.compile(r"\b(?:by|without)\s*\([^)]*\)")
_RANGE = re.compile(r"\[[^\]]*\]")
_NAME = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*(\(?)")


def queried_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (not its functions, labels or numbers)."""
    bare = _RANGE.sub(" ", _GROUPING.sub(" ", _LABELS.sub(" ", expr)))
    return {m.group(1) for m in _NAME.finditer(bare) if not m.group(2)}  # a name before "(" is a function


def test_queried_names_are_the_metrics() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (name, le) "
        '(rate(workqueue_work_duration_seconds_bucket{job="$job"}[5m])))'
    )
    assert queried_names(expr) == {"workqueue_work_duration_seconds_bucket"}
    assert queried_names('time() - process_start_time_seconds{job="$job"}') == {"process_start_time_seconds"}


def test_init_writes_the_dashboards(tmp_path: Path) -> None:
    project = new_project(tmp_path)
    for path in DASHBOARDS:
        board = json.loads((project.root / path).read_text())
        assert board["title"].startswith("guestbook-operator: ") and board["panels"]
        assert all(t["expr"] for p in board["panels"] for t in p["targets"])


async def test_every_metric_the_dashboards_query_is_exported(
    tmp_path: Path,
    scrape: Callable[[], Awaitable[str]],  # noqa: F811 - the fixture
) -> None:
    project = new_project(tmp_path)
    queried: set[str] = set()
    for path in DASHBOARDS:
        board = json.loads((project.root / path).read_text())
        for panel in board["panels"]:
            for target in panel["targets"]:
                queried |= queried_names(target["expr"])
    assert (
        "process_resident_memory_bytes" in queried and "controller_runtime_webhook_requests_total" in queried
    )
    text = await scrape()
    exported = {s.name for family in text_string_to_metric_families(text) for s in family.samples}
    assert sorted(queried - exported) == []
