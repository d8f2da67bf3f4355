"""server_unavailable: did a request fail because of the API server, not because of the request?

One rule for everyone who treats a server outage differently from a failed request: the watcher
(its backoff waits end early when the readiness probe sees the server come back) and the
controller runtime (it parks such requests instead of charging them to the rate limiter). A public
module of kubeop.client that its namespace does not export: those two import it from here.

The rule, after client-go's ``apierrors.IsServiceUnavailable`` / ``IsServerTimeout`` /
``IsTimeout`` and its net errors:

- **yes**: no HTTP answer at all (:class:`~kubeop.client.ApiConnectionError`: refused, reset,
  TLS failure, timeout; the watcher's own ``WatchStalled`` and ``VeryShortWatch`` are kinds of
  it); 503 Service Unavailable (a server starting or stopping, an aggregated API that is down);
  ``ServerTimeout``/``Timeout`` and 504 (the server or its storage could not answer in time);
  502 Bad Gateway (a proxy or load balancer in front of a server that does not answer);
- **no**: 500 Internal Error (a failing admission or conversion webhook, a bug: about this
  request, and the server is serving: retry it with the request's own backoff); 501 and other
  5xx; 429 Too Many Requests (the server is up and says when to come back);
- an error raised ``from`` such an error (``raise MyError(...) from exc``: a reconciler wrapping
  the client's error) counts as its cause does, up to 4 levels deep.
"""

from __future__ import annotations

from kubeop.client.transport import ApiConnectionError
from kubeop.core.errors import ApiError, ServerTimeout, ServiceUnavailable

__all__ = ["server_unavailable"]

#: HTTP statuses that mean "the server is not serving", whatever the error's class.
_UNAVAILABLE_CODES = frozenset({502, 503, 504})
_MAX_CAUSES = 4


def server_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` (or what it was raised from) says the API server is unreachable or not
    serving right now; see the module's rule."""
    for _ in range(_MAX_CAUSES):
        if isinstance(exc, ApiConnectionError | ServiceUnavailable | ServerTimeout):
            return True
        if isinstance(exc, ApiError) and exc.code in _UNAVAILABLE_CODES:
            return True
        cause = exc.__cause__
        if cause is None:
            return False
        exc = cause
    return False
