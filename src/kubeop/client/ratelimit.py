"""Client-side rate limiting: a token bucket (QPS + burst), as client-go's flowcontrol.

It works by reservation, like Go's ``rate.Limiter.Wait``: each caller takes a token immediately
(the balance may go negative) and sleeps for exactly as long as it takes the bucket to pay that
debt back. No lock and no polling are needed on one event loop, waiters are served in arrival
order, and the clock and sleep are injected so tests run on fake time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    """Allows ``qps`` requests per second on average and bursts of up to ``burst``."""

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be positive, got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, got {burst}")
        self.qps = float(qps)
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._updated = clock()

    def _advance(self) -> float:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._updated) * self.qps)
        self._updated = now
        return now

    def reserve(self) -> float:
        """Take one token now; returns how many seconds the caller must wait before using it."""
        self._advance()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def try_acquire(self) -> bool:
        """Take a token only if one is available right now."""
        self._advance()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    async def acquire(self) -> float:
        """Wait for a token; returns the time waited (0.0 within the burst)."""
        delay = self.reserve()
        if delay > 0:
            try:
                await self._sleep(delay)
            except asyncio.CancelledError:
                # Give the token back: a cancelled request must not slow down the others.
                self._tokens += 1.0
                raise
        return delay

    @property
    def tokens(self) -> float:
        """The tokens available now (refilled at ``qps`` up to ``burst``)."""
        self._advance()
        return self._tokens
