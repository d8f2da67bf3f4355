"""Work queues for controllers: de-duplicating, delaying and rate-limited (client-go workqueue).

- :class:`WorkQueue`: FIFO + dirty set + processing set; one key never goes to two workers.
- :class:`DelayingQueue`: adds ``add_after`` (one heap, one timer).
- :class:`RateLimitingQueue`: adds ``add_rate_limited`` / ``forget`` / ``num_requeues``.
- Rate limiters and :func:`default_controller_rate_limiter` (max of per-item exponential
  5 ms .. 1000 s and a 10 qps / burst 100 token bucket).
- :class:`MetricsProvider` hooks for depth, adds, latency, work duration, unfinished work,
  longest running processor and retries.

Everything runs on one asyncio event loop; see :class:`WorkQueue` for the contract. Time comes
from an injectable :class:`Clock` (queues) or time function (limiters); :class:`FakeClock` makes
tests deterministic.
"""

from kubeop.queue.clock import Clock, FakeClock, LoopClock, SteppedClock, TimerHandle
from kubeop.queue.delaying import DelayingQueue
from kubeop.queue.limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
)
from kubeop.queue.metrics import (
    CounterMetric,
    GaugeMetric,
    HistogramMetric,
    MetricsProvider,
    NoopMetricsProvider,
    SettableGaugeMetric,
)
from kubeop.queue.ratelimiting import RateLimitingQueue
from kubeop.queue.workqueue import QueueShutDown, WorkQueue

__all__ = [
    "BucketRateLimiter",
    "Clock",
    "CounterMetric",
    "DelayingQueue",
    "FakeClock",
    "GaugeMetric",
    "HistogramMetric",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "LoopClock",
    "MaxOfRateLimiter",
    "MetricsProvider",
    "NoopMetricsProvider",
    "QueueShutDown",
    "RateLimiter",
    "RateLimitingQueue",
    "SettableGaugeMetric",
    "SteppedClock",
    "TimerHandle",
    "WithMaxWaitRateLimiter",
    "WorkQueue",
    "default_controller_rate_limiter",
]
