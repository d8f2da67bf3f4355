"""When to retry a failed request, and how long to wait first.

The rules, and why:

- 429 Too Many Requests is retried for every method: API priority and fairness rejects the
  request *before* doing anything, so even a POST cannot be applied twice.
- 5xx answers and connection errors are retried only for idempotent requests (reads, and
  dry-run writes): a create or patch that timed out on our side may have been applied, and
  replaying it blindly could create twice or apply a JSON patch twice.
- ``Retry-After`` (seconds) is honoured when present, capped at ``max_delay``; otherwise the
  delay is exponential with jitter (between half and all of it), so many clients do not retry in lockstep.
- Attempts are bounded (``max_attempts`` including the first).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

__all__ = ["RetryPolicy", "parse_retry_after"]

RETRYABLE_5XX = frozenset({500, 502, 503, 504})


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header; the HTTP-date form is not used by the API server."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if 0 <= seconds < math.inf else None  # not NaN, not infinite


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 5
    base_delay: float = 0.2
    max_delay: float = 10.0
    random: random.Random = field(default_factory=random.Random, compare=False)

    def should_retry(self, attempt: int, *, status: int | None, idempotent: bool) -> bool:
        """``attempt`` counts from 1; ``status=None`` means a connection-level failure."""
        if attempt >= self.max_attempts:
            return False
        if status == 429:
            return True
        if status is None or status in RETRYABLE_5XX:
            return idempotent
        return False

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry ``attempt`` (from 1): the server's ``Retry-After`` when given, else a
        jittered exponential backoff from ``base_delay``, at most ``max_delay``.
        """
        if retry_after is not None:
            return min(retry_after, self.max_delay)
        ceiling = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return self.random.uniform(ceiling / 2, ceiling)
