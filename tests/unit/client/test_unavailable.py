"""server_unavailable: the one rule for "the API server, not the request, failed"."""

from __future__ import annotations

import pytest

from kubeop.cache import VeryShortWatch, WatchStalled
from kubeop.client import ApiConnectionError
from kubeop.client.unavailable import server_unavailable
from kubeop.core.errors import (
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    InternalError,
    NotFound,
    ServerTimeout,
    ServiceUnavailable,
    TooManyRequests,
    error_from_status,
)


def _status(code: int, reason: str = "") -> ApiError:
    return error_from_status({"kind": "Status", "code": code, "reason": reason, "message": "m"})


@pytest.mark.parametrize(
    ("error", "unavailable"),
    [
        (ApiConnectionError("connection refused"), True),
        (WatchStalled("no bookmark"), True),
        (VeryShortWatch("closed at once"), True),
        (ServiceUnavailable("starting"), True),
        (ServerTimeout("etcd too slow"), True),
        (_status(500, "ServerTimeout"), True),  # the server's "could not finish in time" is a 500
        (_status(504, "Timeout"), True),
        (_status(504), True),
        (_status(503), True),
        (_status(502), True),  # a proxy in front of a server that does not answer
        (InternalError("failed calling webhook"), False),  # the request's, the server serves
        (_status(500), False),
        (_status(501), False),
        (TooManyRequests("slow down"), False),
        (Gone("too old"), False),
        (Conflict("stale"), False),
        (NotFound("x"), False),
        (Forbidden("no"), False),
        (BadRequest("bad"), False),
        (ValueError("a bug"), False),
        (TimeoutError("a reconciler's own timeout"), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v),
)
def test_the_rule(error: BaseException, unavailable: bool) -> None:
    assert server_unavailable(error) is unavailable


def _wrapped(error: BaseException, depth: int) -> BaseException:
    for level in range(depth):
        outer = RuntimeError(f"level {level}")
        outer.__cause__ = error
        error = outer
    return error


@pytest.mark.parametrize(("depth", "unavailable"), [(0, True), (1, True), (3, True), (4, False)])
def test_a_wrapped_cause_counts_up_to_four_levels(depth: int, unavailable: bool) -> None:
    assert server_unavailable(_wrapped(ApiConnectionError("refused"), depth)) is unavailable


def test_only_an_explicit_cause_counts_not_the_context() -> None:
    try:
        try:
            raise ApiConnectionError("refused")
        except ApiConnectionError:
            raise ValueError("while handling it") from None
    except ValueError as err:
        assert not server_unavailable(err)
    wrapped = ValueError("wrapped")
    wrapped.__cause__ = InternalError("webhook")
    assert not server_unavailable(wrapped)
