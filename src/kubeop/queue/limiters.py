"""Rate limiters: how long an item should wait before it is retried.

client-go util/workqueue/default_rate_limiters.go, with delays in float seconds. A limiter
answers ``when(item)`` (and counts that as one more failure of the item, for the per-item ones),
forgets an item on ``forget`` and reports ``num_requeues``. Time comes from an injected
``clock`` (``time.monotonic`` by default), so tests are deterministic.

Not thread-safe: like the queues, limiters belong to one event loop.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "WithMaxWaitRateLimiter",
    "default_controller_rate_limiter",
]

T = TypeVar("T", bound=Hashable)
T_contra = TypeVar("T_contra", bound=Hashable, contravariant=True)


class RateLimiter(Protocol[T_contra]):
    """Decides how long an item waits before it is added again."""

    def when(self, item: T_contra) -> float:
        """Seconds ``item`` should wait now; records one more failure for per-item limiters."""
        ...

    def forget(self, item: T_contra) -> None:
        """Stop tracking ``item`` (it succeeded, or we gave up on it)."""
        ...

    def num_requeues(self, item: T_contra) -> int:
        """How many failures of ``item`` are being tracked."""
        ...


class ItemExponentialFailureRateLimiter(Generic[T]):
    """``base_delay * 2**failures``, capped at ``max_delay``, counted per item.

    The n-th ``when(item)`` since the last ``forget(item)`` returns ``base_delay * 2**(n-1)``:
    with the defaults 5 ms, 10 ms, 20 ms, ... reaching the 1000 s cap at the 19th failure.
    """

    __slots__ = ("_base_delay", "_failures", "_max_delay")

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        """Count one more failure of ``item`` and return its delay: ``base_delay * 2**failures``, at most
        ``max_delay``.
        """
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        if exp >= 1024:  # 2.0**1024 overflows a float; the cap was reached long before
            return self._max_delay
        return min(self._base_delay * 2.0**exp, self._max_delay)

    def forget(self, item: T) -> None:
        """Forget ``item``'s failures: its next delay starts from ``base_delay`` again."""
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        """How many failures of ``item`` were counted since it was last forgotten."""
        return self._failures.get(item, 0)


class ItemFastSlowRateLimiter(Generic[T]):
    """``fast_delay`` for an item's first ``max_fast_attempts`` failures, ``slow_delay`` after."""

    __slots__ = ("_failures", "_fast_delay", "_max_fast_attempts", "_slow_delay")

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        self._fast_delay = fast_delay
        self._slow_delay = slow_delay
        self._max_fast_attempts = max_fast_attempts
        self._failures: dict[T, int] = {}

    def when(self, item: T) -> float:
        """Count one more failure of ``item`` and return its delay: ``fast_delay`` for the first
        ``max_fast_attempts``, then ``slow_delay``.
        """
        failures = self._failures.get(item, 0) + 1
        self._failures[item] = failures
        return self._fast_delay if failures <= self._max_fast_attempts else self._slow_delay

    def forget(self, item: T) -> None:
        """Forget ``item``'s failures: its next delays are fast again."""
        self._failures.pop(item, None)

    def num_requeues(self, item: T) -> int:
        """How many failures of ``item`` were counted since it was last forgotten."""
        return self._failures.get(item, 0)


class BucketRateLimiter(Generic[T]):
    """An overall token bucket: ``qps`` tokens a second, at most ``burst`` saved up.

    ``when`` reserves a token and returns how long until it is available, as
    ``rate.Limiter.Reserve().Delay()`` (golang.org/x/time/rate) does: the bucket starts full,
    so the first ``burst`` calls return 0; after that, calls at one instant return 1/qps,
    2/qps, ... because each reserves the next future token. It limits all items together, so
    ``forget`` does nothing and ``num_requeues`` is always 0.
    """

    __slots__ = ("_burst", "_clock", "_last", "_qps", "_tokens")

    def __init__(
        self, qps: float = 10.0, burst: int = 100, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if not qps > 0:
            raise ValueError(f"qps must be positive (math.inf for no limit), not {qps}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, not {burst}")
        self._qps = qps
        self._burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last: float | None = None

    def when(self, item: T) -> float:
        """The delay before ``item`` may be processed: none within the burst, then one token every ``1/qps``
        seconds (shared by all items).
        """
        if self._qps == math.inf:
            return 0.0
        now = self._clock()
        tokens = self._tokens
        if self._last is not None:
            # x/time/rate advance(): refill for the time since the last reservation, up to burst.
            elapsed = max(now - self._last, 0.0)
            tokens = min(tokens + elapsed * self._qps, float(self._burst))
        tokens -= 1.0
        self._tokens = tokens
        self._last = now
        return -tokens / self._qps if tokens < 0 else 0.0

    def forget(self, item: T) -> None:
        """Nothing to forget: the bucket keeps no per-item state."""
        pass

    def num_requeues(self, item: T) -> int:
        """Always 0: the bucket does not count failures."""
        return 0


class MaxOfRateLimiter(Generic[T]):
    """Asks every limiter (each one counts the failure) and returns the longest delay.

    With a token bucket among them the burst can appear exceeded when some items were held back
    longer by another limiter (as noted in client-go).
    """

    __slots__ = ("_limiters",)

    def __init__(self, *limiters: RateLimiter[T]) -> None:
        self._limiters = limiters

    def when(self, item: T) -> float:
        """The longest delay any of the limiters gives ``item`` (each of them counts the call)."""
        delay = 0.0
        for limiter in self._limiters:  # every limiter must see the call, so no max() shortcut
            delay = max(delay, limiter.when(item))
        return delay

    def forget(self, item: T) -> None:
        """Forget ``item`` in every limiter."""
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """The highest count any of the limiters has for ``item``."""
        return max((limiter.num_requeues(item) for limiter in self._limiters), default=0)


class WithMaxWaitRateLimiter(Generic[T]):
    """Another limiter's delay, never longer than ``max_delay``."""

    __slots__ = ("_limiter", "_max_delay")

    def __init__(self, limiter: RateLimiter[T], max_delay: float) -> None:
        self._limiter = limiter
        self._max_delay = max_delay

    def when(self, item: T) -> float:
        """The wrapped limiter's delay for ``item``, at most ``max_delay``."""
        return min(self._limiter.when(item), self._max_delay)

    def forget(self, item: T) -> None:
        """Forget ``item`` in the wrapped limiter."""
        self._limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """The wrapped limiter's count for ``item``."""
        return self._limiter.num_requeues(item)


def default_controller_rate_limiter(*, clock: Callable[[], float] = time.monotonic) -> MaxOfRateLimiter[T]:
    """The controller default: per-item exponential 5 ms .. 1000 s, and 10 qps / burst 100 overall.

    client-go ``DefaultTypedControllerRateLimiter``; the bucket only paces retries, not first adds.
    """
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock=clock),
    )
