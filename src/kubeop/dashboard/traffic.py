"""The webhooks' traffic, as the dashboard shows it: per webhook path, its requests, denials,
errors (5xx) and latency, in 5-second steps over the last minutes, and its requests in flight.

:class:`WebhookTraffic` is a :class:`~kubeop.webhook.registry.RequestListener`: the Manager adds
it to its webhooks for a run with the dashboard on (``Webhooks.add_listener``), and the webhooks
tell it of each request they answer, on the event loop (a few additions and one list append).

Memory is fixed per path (only the paths a webhook serves are told): ``length`` steps, each
keeping at most :data:`~kubeop.dashboard.ring.SAMPLES` latencies for the percentiles.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubeop.dashboard.ring import SAMPLES, percentile

__all__ = ["WebhookTraffic"]


@dataclass(slots=True)
class _Step:
    index: int = -1
    requests: int = 0
    denials: int = 0
    errors: int = 0
    latencies: list[float] = field(default_factory=list)


@dataclass(slots=True)
class _Path:
    steps: list[_Step]
    in_flight: int = 0
    requests: int = 0
    denials: int = 0
    errors: int = 0


class WebhookTraffic:
    """Requests, denials, errors and latency of each webhook path (see the module docstring)."""

    def __init__(
        self, *, step: float = 5.0, length: int = 60, clock: Callable[[], float] = time.time
    ) -> None:
        if step <= 0 or length < 2:
            raise ValueError(f"WebhookTraffic needs step > 0 and length >= 2, not {step!r}, {length!r}")
        self.step, self.length = step, length
        self._clock = clock
        self._paths: dict[str, _Path] = {}

    def _path(self, path: str) -> _Path:
        stats = self._paths.get(path)
        if stats is None:
            stats = self._paths[path] = _Path([_Step() for _ in range(self.length)])
        return stats

    # -- the RequestListener -----------------------------------------------------------------------
    def started(self, path: str) -> None:
        self._path(path).in_flight += 1

    def finished(self, path: str, status: int, seconds: float, denied: bool) -> None:
        stats = self._path(path)
        stats.in_flight = max(0, stats.in_flight - 1)
        error = status >= 500
        stats.requests += 1
        stats.denials += denied
        stats.errors += error
        index = int(self._clock() // self.step)
        step = stats.steps[index % self.length]
        if step.index != index:
            step.index, step.requests, step.denials, step.errors = index, 0, 0, 0
            step.latencies.clear()
        step.requests += 1
        step.denials += denied
        step.errors += error
        if len(step.latencies) < SAMPLES:
            step.latencies.append(seconds)

    # -- reading -----------------------------------------------------------------------------------
    def row(self, path: str, now: float, seconds: float) -> dict[str, Any]:
        """One path's row: totals since the run started, requests in flight, and over the last
        ``seconds`` (whole steps, the current one included) requests per second and p50/p99."""
        stats = self._paths.get(path)
        if stats is None:
            return {
                "requests": 0,
                "requests_per_s": 0.0,
                "in_flight": 0,
                "p50": None,
                "p99": None,
                "denials": 0,
                "errors": 0,
            }
        steps = max(1, min(self.length, round(seconds / self.step)))
        last = int(now // self.step)
        requests = 0
        latencies: list[float] = []
        for index in range(last - steps + 1, last + 1):
            step = stats.steps[index % self.length]
            if step.index == index:
                requests += step.requests
                latencies.extend(step.latencies)
        span = (steps - 1) * self.step + (now - last * self.step) or self.step
        return {
            "requests": stats.requests,
            "requests_per_s": requests / span,
            "in_flight": stats.in_flight,
            "p50": percentile(latencies, 0.5),
            "p99": percentile(latencies, 0.99),
            "denials": stats.denials,
            "errors": stats.errors,
        }

    @property
    def paths(self) -> list[str]:
        """The paths told of so far."""
        return list(self._paths)
