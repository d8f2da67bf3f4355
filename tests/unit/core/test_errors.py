"""metav1.Status -> typed exceptions."""

from __future__ import annotations

import pytest

from kubeop.core.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Expired,
    FieldCause,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    NotFound,
    ServerTimeout,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    error_from_response,
    error_from_status,
    is_resource_version_too_large,
)


def status(code: int, reason: str, message: str = "", **details: object) -> dict[str, object]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
        "details": details,
    }


@pytest.mark.parametrize(
    ("code", "reason", "cls"),
    [
        (404, "NotFound", NotFound),
        (409, "AlreadyExists", AlreadyExists),
        (409, "Conflict", Conflict),
        (410, "Gone", Gone),
        (410, "Expired", Expired),
        (403, "Forbidden", Forbidden),
        (401, "Unauthorized", Unauthorized),
        (422, "Invalid", Invalid),
        (429, "TooManyRequests", TooManyRequests),
        (504, "Timeout", ServerTimeout),
        (500, "ServerTimeout", ServerTimeout),
        (500, "InternalError", InternalError),
        (503, "ServiceUnavailable", ServiceUnavailable),
        (404, "", NotFound),
        (410, "", Gone),
        (599, "", InternalError),
        (418, "", ApiError),
    ],
)
def test_class_by_reason_then_code(code: int, reason: str, cls: type[ApiError]) -> None:
    err = error_from_status(status(code, reason, "boom"))
    assert type(err) is cls
    assert err.code == code and err.reason == reason and err.message == "boom"


def test_hierarchy_lets_callers_catch_broadly() -> None:
    assert issubclass(AlreadyExists, Conflict)
    assert issubclass(Expired, Gone)
    assert issubclass(NotFound, ApiError)


def test_not_found_names_the_object_and_request() -> None:
    err = error_from_status(
        status(404, "NotFound", 'configmaps "web" not found', name="web", kind="configmaps"),
        request="GET /api/v1/namespaces/ns/configmaps/web",
    )
    assert str(err) == 'configmaps "web" not found (GET /api/v1/namespaces/ns/configmaps/web)'
    assert (err.kind, err.name) == ("configmaps", "web")


def test_invalid_carries_field_causes() -> None:
    err = error_from_status(
        status(
            422,
            "Invalid",
            'ConfigMap "x" is invalid: data[a b]: Invalid value',
            causes=[{"reason": "FieldValueInvalid", "message": "Invalid value", "field": "data[a b]"}],
        )
    )
    assert isinstance(err, Invalid)
    assert err.causes == [FieldCause("FieldValueInvalid", "Invalid value", "data[a b]")]


def test_too_many_requests_retry_after() -> None:
    assert error_from_status(status(429, "TooManyRequests", retryAfterSeconds=3)).retry_after == 3.0  # type: ignore[attr-defined]
    err = error_from_response(429, b"slow down", retry_after=2.5)
    assert isinstance(err, TooManyRequests) and err.retry_after == 2.5


def test_watch_error_event_uses_status_code() -> None:
    err = error_from_status(
        {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version: 1 (5)"}
    )
    assert isinstance(err, Expired) and err.code == 410


def test_non_status_bodies() -> None:
    err = error_from_response(503, b"<html>upstream down</html>", request="GET /api")
    assert isinstance(err, ServiceUnavailable)
    assert "upstream down" in str(err) and "GET /api" in str(err)
    empty = error_from_response(404, b"", target='configmaps "x" in namespace "ns"')
    assert str(empty) == 'configmaps "x" in namespace "ns" not found'
    forbidden = error_from_response(403, None, target="nodes")
    assert isinstance(forbidden, Forbidden) and "nodes" in str(forbidden)


def test_too_large_resource_version() -> None:
    err = error_from_status(
        status(
            504,
            "Timeout",
            "Too large resource version: 100, current: 5",
            causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        )
    )
    assert isinstance(err, ServerTimeout)
    assert is_resource_version_too_large(err)
    assert not is_resource_version_too_large(error_from_status(status(504, "Timeout", "slow")))


def test_message_can_be_extended() -> None:
    err = error_from_status(status(401, "Unauthorized", "Unauthorized"))
    err.message += " [credentials from x]"
    assert str(err) == "Unauthorized [credentials from x]"
