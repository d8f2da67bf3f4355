"""The watcher's retry delays: exponential with jitter, reset after a healthy period.

The values are client-go's reflector defaults (k8s.io/client-go/tools/cache/reflector.go):
0.8 s doubling up to 30 s, each delay stretched by a random factor in [1, 2) (jitter 1.0), and a
reset to 0.8 s once no delay was needed for 2 minutes. At the cap a failing watch costs the server
one request every 30-60 s: the ~98% load reduction client-go aims for when the API server is
unhealthy.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Backoff", "BackoffConfig"]


@dataclass(frozen=True, slots=True)
class BackoffConfig:
    initial: float = 0.8
    cap: float = 30.0
    factor: float = 2.0
    #: Each delay ``d`` becomes ``d * (1 + jitter * U[0, 1))``.
    jitter: float = 1.0
    #: Start again from ``initial`` when no delay was asked for during this long.
    reset_after: float = 120.0

    def __post_init__(self) -> None:
        if self.initial <= 0 or self.cap < self.initial or self.factor < 1 or self.jitter < 0:
            raise ValueError(f"invalid backoff {self}")


@dataclass(slots=True)
class Backoff:
    """Produces the next delay on each failure (``next_delay()``); ``reset()`` after success.

    Unlike client-go, whose backoff manager resets every ``reset_after`` since its last reset even
    while failures continue, the reset here needs ``reset_after`` *without* failures: a server
    that keeps failing stays at the cap.
    """

    config: BackoffConfig = field(default_factory=BackoffConfig)
    rng: random.Random = field(default_factory=random.Random)
    clock: Callable[[], float] = time.monotonic
    _duration: float = 0.0
    _last: float | None = None

    def next_delay(self) -> float:
        """The next delay: ``initial`` after a reset or a quiet spell longer than ``reset_after``, else the
        last one times ``factor``, at most ``cap`` (with jitter when configured).
        """
        cfg = self.config
        now = self.clock()
        if self._last is None or now - self._last > cfg.reset_after or self._duration <= 0:
            self._duration = cfg.initial
        self._last = now
        delay = self._duration
        self._duration = min(self._duration * cfg.factor, cfg.cap)
        if cfg.jitter:
            delay *= 1.0 + cfg.jitter * self.rng.random()
        return delay

    def reset(self) -> None:
        """Start again from ``initial`` at the next delay."""
        self._duration = 0.0
        self._last = None
