"""Time-bucketed ring buffers: the last ``length`` steps of ``step`` seconds of one controller.

    ring = Buckets(step=5.0, length=60)         # the last 5 minutes, in 5-second steps
    ring.reconciled(now, seconds=0.012, failed=False)
    ring.added(now, 3)
    ring.series(now)["p99"]                     # oldest step first, 60 values

Memory is fixed: ``length`` buckets, each keeping at most :data:`SAMPLES` durations (the first
ones of its step: percentiles of a busy step are of its first ``SAMPLES`` reconciles).

Recording is O(1) (a counter and at most one list append); the percentiles are computed when a
page asks, once per bucket and number of durations (a finished step is sorted once, the current
one when it changed), one sort for both quantiles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["SAMPLES", "Buckets", "percentile"]

SAMPLES = 256
"""Durations kept per bucket, for its percentiles."""


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1, nearest rank) of ``values``; None when empty."""
    return _ranked(sorted(values), q) if values else None


def _ranked(ordered: list[float], q: float) -> float | None:
    """The ``q`` quantile (nearest rank) of the already sorted ``ordered``; None when empty."""
    if not ordered:
        return None
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))]


_NO_QUANTILES: tuple[int, float | None, float | None] = (-1, None, None)


@dataclass(slots=True)
class _Bucket:
    index: int = -1
    reconciles: int = 0
    errors: int = 0
    adds: int = 0
    durations: list[float] = field(default_factory=list)
    quantiles: tuple[int, float | None, float | None] = _NO_QUANTILES
    """(number of durations they are of, p50, p99): computed when asked, kept until it changes."""

    def reset(self, index: int) -> None:
        self.index, self.reconciles, self.errors, self.adds = index, 0, 0, 0
        self.durations.clear()
        self.quantiles = _NO_QUANTILES

    def p50_p99(self) -> tuple[float | None, float | None]:
        durations = self.durations
        seen, p50, p99 = self.quantiles
        if seen != len(durations):
            ordered = sorted(durations)
            p50, p99 = _ranked(ordered, 0.5), _ranked(ordered, 0.99)
            self.quantiles = (len(durations), p50, p99)
        return p50, p99


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
            p50, p99 = bucket.p50_p99() if live else (None, None)
            out["p50"].append(p50)
            out["p99"].append(p99)
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
        durations.sort()
        return {
            "reconciles": reconciles / span,
            "adds": adds / span,
            "errors": errors / reconciles if reconciles else None,
            "p50": _ranked(durations, 0.5),
            "p99": _ranked(durations, 0.99),
        }
