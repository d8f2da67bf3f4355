"""Grafana dashboards for a generated project (what kubebuilder's grafana plugin scaffolds):
``grafana/controller-runtime-metrics.json`` (reconciles, work queues, webhooks, API requests)
and ``grafana/controller-resources-metrics.json`` (the process's CPU, memory, file descriptors
and uptime). Import them into Grafana with a Prometheus data source that scrapes the operator
(config/prometheus's ServiceMonitor); ``$job`` picks the operator's scrape job.

Every series they query is one a kubeop Manager exports, under controller-runtime's (and the Go
process collector's) names, so a dashboard made for a Go operator reads a kubeop one too.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DASHBOARDS", "dashboards"]

_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
_SELECTOR = 'job="$job"'

# (title, unit, [(PromQL, legend)]) per panel, two panels a row
_RUNTIME: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "Reconciles per second",
        "ops",
        [
            (
                f"sum by (controller, result) (rate(controller_runtime_reconcile_total{{{_SELECTOR}}}[5m]))",
                "{{controller}} {{result}}",
            )
        ],
    ),
    (
        "Reconcile errors per second",
        "ops",
        [
            (
                f"sum by (controller) (rate(controller_runtime_reconcile_errors_total{{{_SELECTOR}}}[5m]))",
                "{{controller}}",
            )
        ],
    ),
    (
        "Reconcile time (p50, p99)",
        "s",
        [
            (
                f"histogram_quantile({q}, sum by (controller, le) "
                f"(rate(controller_runtime_reconcile_time_seconds_bucket{{{_SELECTOR}}}[5m])))",
                f"{{{{controller}}}} p{int(q * 100)}",
            )
            for q in (0.5, 0.99)
        ],
    ),
    (
        "Workers in use / maximum",
        "short",
        [
            (
                f"sum by (controller) (controller_runtime_active_workers{{{_SELECTOR}}})",
                "{{controller}} active",
            ),
            (
                f"sum by (controller) (controller_runtime_max_concurrent_reconciles{{{_SELECTOR}}})",
                "{{controller}} max",
            ),
        ],
    ),
    (
        "Work queue depth",
        "short",
        [(f"sum by (name) (workqueue_depth{{{_SELECTOR}}})", "{{name}}")],
    ),
    (
        "Work queue adds and retries per second",
        "ops",
        [
            (f"sum by (name) (rate(workqueue_adds_total{{{_SELECTOR}}}[5m]))", "{{name}} adds"),
            (f"sum by (name) (rate(workqueue_retries_total{{{_SELECTOR}}}[5m]))", "{{name}} retries"),
        ],
    ),
    (
        "Time in queue / at work (p99)",
        "s",
        [
            (
                f"histogram_quantile(0.99, sum by (name, le) "
                f"(rate(workqueue_queue_duration_seconds_bucket{{{_SELECTOR}}}[5m])))",
                "{{name}} queued",
            ),
            (
                f"histogram_quantile(0.99, sum by (name, le) "
                f"(rate(workqueue_work_duration_seconds_bucket{{{_SELECTOR}}}[5m])))",
                "{{name}} working",
            ),
        ],
    ),
    (
        "Unfinished work / longest running processor",
        "s",
        [
            (f"sum by (name) (workqueue_unfinished_work_seconds{{{_SELECTOR}}})", "{{name}} unfinished"),
            (
                f"max by (name) (workqueue_longest_running_processor_seconds{{{_SELECTOR}}})",
                "{{name}} longest",
            ),
        ],
    ),
    (
        "Webhook requests per second",
        "ops",
        [
            (
                "sum by (webhook, code) "
                f"(rate(controller_runtime_webhook_requests_total{{{_SELECTOR}}}[5m]))",
                "{{webhook}} {{code}}",
            )
        ],
    ),
    (
        "Webhook latency (p99) and requests in flight",
        "s",
        [
            (
                f"histogram_quantile(0.99, sum by (webhook, le) "
                f"(rate(controller_runtime_webhook_latency_seconds_bucket{{{_SELECTOR}}}[5m])))",
                "{{webhook}} p99",
            ),
            (
                f"sum by (webhook) (controller_runtime_webhook_requests_in_flight{{{_SELECTOR}}})",
                "{{webhook}} in flight",
            ),
        ],
    ),
    (
        "API server requests per second",
        "ops",
        [
            (
                f"sum by (method, code) (rate(rest_client_requests_total{{{_SELECTOR}}}[5m]))",
                "{{method}} {{code}}",
            )
        ],
    ),
    (
        "API server request latency (p99)",
        "s",
        [
            (
                f"histogram_quantile(0.99, sum by (verb, le) "
                f"(rate(rest_client_request_duration_seconds_bucket{{{_SELECTOR}}}[5m])))",
                "{{verb}}",
            )
        ],
    ),
]

_RESOURCES: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("CPU (cores)", "short", [(f"rate(process_cpu_seconds_total{{{_SELECTOR}}}[5m])", "{{pod}}")]),
    (
        "Memory",
        "bytes",
        [
            (f"process_resident_memory_bytes{{{_SELECTOR}}}", "{{pod}} resident"),
            (f"process_virtual_memory_bytes{{{_SELECTOR}}}", "{{pod}} virtual"),
        ],
    ),
    (
        "Open file descriptors / limit",
        "short",
        [
            (f"process_open_fds{{{_SELECTOR}}}", "{{pod}} open"),
            (f"process_max_fds{{{_SELECTOR}}}", "{{pod}} limit"),
        ],
    ),
    ("Uptime", "s", [(f"time() - process_start_time_seconds{{{_SELECTOR}}}", "{{pod}}")]),
]

#: file path in the project -> (title, uid suffix, panels)
DASHBOARDS = {
    "grafana/controller-runtime-metrics.json": ("Controller runtime", "runtime", _RUNTIME),
    "grafana/controller-resources-metrics.json": ("Controller resources", "resources", _RESOURCES),
}


def dashboards(project_name: str) -> dict[str, str]:
    """The dashboards' files (path -> JSON text) for ``project_name``."""
    return {
        path: json.dumps(_dashboard(project_name, title, uid, panels), indent=2) + "\n"
        for path, (title, uid, panels) in DASHBOARDS.items()
    }


def _dashboard(
    project_name: str, title: str, uid: str, panels: list[tuple[str, str, list[tuple[str, str]]]]
) -> dict[str, Any]:
    return {
        "title": f"{project_name}: {title}",
        "uid": f"{project_name}-{uid}"[:40],
        "tags": ["kubeop", project_name],
        "schemaVersion": 39,
        "editable": True,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {
            "list": [
                {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus"},
                {
                    "name": "job",
                    "label": "Job",
                    "type": "query",
                    "datasource": _DATASOURCE,
                    "query": "label_values(controller_runtime_reconcile_total, job)"
                    if uid == "runtime"
                    else "label_values(process_start_time_seconds, job)",
                    "refresh": 1,
                },
            ]
        },
        "panels": [_panel(i, *panel) for i, panel in enumerate(panels)],
    }


def _panel(index: int, title: str, unit: str, queries: list[tuple[str, str]]) -> dict[str, Any]:
    return {
        "id": index + 1,
        "type": "timeseries",
        "title": title,
        "datasource": _DATASOURCE,
        "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": _DATASOURCE, "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(queries)
        ],
    }
