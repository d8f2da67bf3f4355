"""Time-bucketed ring buffers: the last ``length`` steps of ``step`` seconds of one controller.

    ring = Buckets(step=5.0, length=60)         # the last 5 minutes, in 5-second steps
    ring.reconciled(now, seconds=0.012, failed=False)
    ring.added(now, 3)
    ring.series(now)["p99"]                     # oldest step first, 60 values

Memory is fixed: ``length`` buckets, each keeping at most :data:`SAMPLES` durations (the first
ones of its step: percentiles of a busy step are of its first ``SAMPLES`` reconciles).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["SAMPLES", "Buckets", "percentile"]

SAMPLES = 256
"""Durations kept per bucket, for its percentiles."""


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1, nearest rank) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))
    return ordered[rank]


@dataclass(slots=True)
class _Bucket:
    index: int = -1
    reconciles: int = 0
    errors: int = 0
    adds: int = 0
    durations: list[float] = field(default_factory=list)

    def reset(self, index: int) -> None:
        self.index, self.reconciles, self.errors, self.adds = index, 0, 0, 0
        self.durations.clear()


class Buckets:
    """Counters and durations per step over the last ``length`` steps (see the module docstring)."""

    def __init__(self, *, step: float = 5.0, length: int = 60) -> None:
        if step <= 0 or length < 2:
            raise ValueError(f"Buckets needs step > 0 and length >= 2, not step={step!r} length={length!r}")
        self.step, self.length = step, length
        self._buckets = [_Bucket() for _ in range(length)]

    def _at(self, now: float) -> _Bucket:
        index = int(now // self.step)
        bucket = self._buckets[index % self.length]
        if bucket.index != index:
            bucket.reset(index)
        return bucket

    def reconciled(self, now: float, seconds: float, *, failed: bool) -> None:
        bucket = self._at(now)
        bucket.reconciles += 1
        bucket.errors += failed
        if len(bucket.durations) < SAMPLES:
            bucket.durations.append(seconds)

    def added(self, now: float, count: int) -> None:
        if count > 0:
            self._at(now).adds += count

    def series(self, now: float) -> dict[str, list[float | None]]:
        """Per step, oldest first (the current, partial step last): ``reconciles`` and ``adds``
        per second, ``errors`` (the share of reconciles that failed), ``p50`` and ``p99``
        durations in seconds (None: no reconcile in that step)."""
        last = int(now // self.step)
        out: dict[str, list[float | None]] = {k: [] for k in ("reconciles", "adds", "errors", "p50", "p99")}
        for index in range(last - self.length + 1, last + 1):
            bucket = self._buckets[index % self.length]
            live = bucket.index == index
            count = bucket.reconciles if live else 0
            out["reconciles"].append(count / self.step)
            out["adds"].append((bucket.adds if live else 0) / self.step)
            out["errors"].append(bucket.errors / count if count else None)
            durations = bucket.durations if live else []
            out["p50"].append(percentile(durations, 0.5))
            out["p99"].append(percentile(durations, 0.99))
        return out

    def recent(self, now: float, seconds: float) -> dict[str, float | None]:
        """Over the last ``seconds`` (whole steps, the current one included): reconciles and adds
        per second, error rate, p50 and p99."""
        steps = max(1, min(self.length, round(seconds / self.step)))
        last = int(now // self.step)
        reconciles = errors = adds = 0
        durations: list[float] = []
        for index in range(last - steps + 1, last + 1):
            bucket = self._buckets[index % self.length]
            if bucket.index == index:
                reconciles += bucket.reconciles
                errors += bucket.errors
                adds += bucket.adds
                durations.extend(bucket.durations)
        span = (steps - 1) * self.step + (now - last * self.step) or self.step
        return {
            "reconciles": reconciles / span,
            "adds": adds / span,
            "errors": errors / reconciles if reconciles else None,
            "p50": percentile(durations, 0.5),
            "p99": percentile(durations, 0.99),
        }
