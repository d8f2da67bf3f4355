"""The rate-limiting queue: a delaying queue that asks a rate limiter how long to wait.

client-go ``rateLimitingType`` (rate_limiting_queue.go): ``add_rate_limited(item)`` is
``add_after(item, limiter.when(item))``; ``forget`` and ``num_requeues`` go to the limiter.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TypeVar

from kubeop.queue.clock import Clock
from kubeop.queue.delaying import DelayingQueue
from kubeop.queue.limiters import RateLimiter, default_controller_rate_limiter
from kubeop.queue.metrics import MetricsProvider

__all__ = ["RateLimitingQueue"]

T = TypeVar("T", bound=Hashable)


class RateLimitingQueue(DelayingQueue[T]):
    """A :class:`DelayingQueue` whose retries are spaced by a :class:`RateLimiter`.

    The worker loop of a controller::

        async for key in queue:
            try:
                await reconcile(key)
            except Exception:
                queue.add_rate_limited(key)    # retry later, later each time
            else:
                queue.forget(key)              # success: reset the item's backoff
            finally:
                queue.done(key)

    Remember to ``forget`` items: the per-item limiters keep a failure count per item until then.
    """

    __slots__ = ("_rate_limiter",)

    def __init__(
        self,
        rate_limiter: RateLimiter[T] | None = None,
        *,
        name: str = "",
        metrics: MetricsProvider | None = None,
        clock: Clock | None = None,
    ) -> None:
        """Make an empty queue; ``rate_limiter`` defaults to :func:`default_controller_rate_limiter`."""
        super().__init__(name, metrics=metrics, clock=clock)
        self._rate_limiter: RateLimiter[T] = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter()
        )

    @property
    def rate_limiter(self) -> RateLimiter[T]:
        """The rate limiter that ``add_rate_limited`` asks for each item's delay."""
        return self._rate_limiter

    def add_rate_limited(self, item: T) -> None:
        """Add ``item`` after the delay the rate limiter gives it (which counts one more failure).

        As in client-go the limiter is consulted even when the queue is shutting down.
        """
        self.add_after(item, self._rate_limiter.when(item))

    def forget(self, item: T) -> None:
        """Stop tracking ``item``'s failures (success, or giving up); ``done`` is still needed."""
        self._rate_limiter.forget(item)

    def num_requeues(self, item: T) -> int:
        """How many times ``item`` has been rate-limited since it was last forgotten."""
        return self._rate_limiter.num_requeues(item)
