"""Hardening #12 (10): a malformed Status, or no Status at all, is still an ApiError.

Whatever the server sends as an error response or in a watch ERROR event, decoding it gives the
documented exception (an ApiError with the raw text and the fields that could be read), never a
TypeError, AttributeError or ValueError from inside the decoder or from the error's properties.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubeop.client.watch import WatchEvent, decode_event
from kubeop.core.errors import (
    ApiError,
    FieldCause,
    Gone,
    InternalError,
    NotFound,
    TooManyRequests,
    error_from_response,
    error_from_status,
    is_resource_version_too_large,
)


def exercise(err: ApiError) -> None:
    """Everything a caller (the watcher, a reconciler, a log line) reads from an error."""
    assert isinstance(err, ApiError)
    assert isinstance(str(err), str) and isinstance(repr(err), str)
    assert isinstance(err.message, str) and isinstance(err.reason, str)
    assert isinstance(err.code, int)
    assert isinstance(err.kind, str) and isinstance(err.name, str)
    causes = err.causes
    assert all(isinstance(c, FieldCause) for c in causes)
    assert all(isinstance(x, str) for c in causes for x in (c.reason, c.message, c.field))
    assert isinstance(is_resource_version_too_large(err), bool)
    if isinstance(err, TooManyRequests):
        after = err.retry_after
        assert after is None or (math.isfinite(after) and after >= 0)


def status(**fields: Any) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", **fields}


# -- the cases from the issue ----------------------------------------------------------------------


def test_causes_that_are_not_objects() -> None:
    err = error_from_response(
        504, status(code=504, reason="Timeout", details={"causes": ["x", 5, None, {"reason": 7}]})
    )
    exercise(err)
    assert err.causes == [FieldCause("", "x", ""), FieldCause("", "", "")]
    assert not is_resource_version_too_large(err)
    assert err.status is not None and err.status["details"]["causes"][0] == "x"  # raw, kept


@pytest.mark.parametrize("causes", [5, "x", {"reason": "ResourceVersionTooLarge"}, True])
def test_causes_that_are_not_a_list(causes: Any) -> None:
    err = error_from_response(504, status(details={"causes": causes}))
    exercise(err)
    assert err.causes == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("soon", None),
        ("", None),
        ("nan", None),
        ("inf", None),
        ("1e999", None),
        (-1, None),
        (10**400, None),
        (True, None),
        ([1], None),
        ({"s": 1}, None),
        ("3", 3.0),
        (2, 2.0),
        (0.5, 0.5),
    ],
)
def test_retry_after_seconds_of_any_shape(value: Any, expected: float | None) -> None:
    err = error_from_response(
        429, status(code=429, reason="TooManyRequests", details={"retryAfterSeconds": value})
    )
    assert isinstance(err, TooManyRequests)
    exercise(err)
    assert err.retry_after == expected


@pytest.mark.parametrize("header", [math.inf, math.nan, -1.0])
def test_a_bad_retry_after_header_is_not_copied_into_the_details(header: float) -> None:
    err = error_from_response(429, b"slow down", retry_after=header)
    assert isinstance(err, TooManyRequests) and err.retry_after is None


def test_code_as_a_string_in_a_watch_error_event() -> None:
    err = error_from_status(status(code="410", message="too old resource version"))
    assert isinstance(err, Gone) and err.code == 410
    for bad in ("4100", "abc", "", "٤١٠", 410.0, [410], None, True, -5, 10**30):
        exercise(error_from_status(status(code=bad)))


@pytest.mark.parametrize("details", [5, "x", [["kind", "pods"]], None, True, 1.5])
def test_details_that_are_not_an_object(details: Any) -> None:
    err = error_from_response(404, status(code=404, reason="NotFound", details=details))
    assert isinstance(err, NotFound)
    exercise(err)
    assert err.details == {} and err.status is not None and err.status["details"] == details


def test_a_status_with_fields_of_the_wrong_type() -> None:
    err = error_from_response(
        500, status(code=[1], reason={"r": 1}, message={"text": "boom"}, details={"kind": 5, "name": ["x"]})
    )
    assert isinstance(err, InternalError) and err.code == 500
    exercise(err)
    assert "boom" in err.message and err.reason == "" and (err.kind, err.name) == ("", "")


def test_a_status_with_no_fields() -> None:
    for err in (error_from_response(503, {"kind": "Status"}), error_from_status({})):
        exercise(err)


@pytest.mark.parametrize("body", ["boom", 5, None, True, ["x"], [], 1.5])
def test_a_status_that_is_not_a_mapping(body: Any) -> None:
    err = error_from_status(body, request="GET /api/v1/pods")
    exercise(err)
    assert err.message.startswith("malformed Status from the server: ")
    assert err.status is None and "GET /api/v1/pods" in str(err)


def test_deep_and_huge_bodies_are_shown_bounded() -> None:
    deep: Any = "end"
    for _ in range(5000):
        deep = [deep]
    for body in (deep, {"kind": "NotStatus", "x": deep}, 10**5000, "x" * 1_000_000):
        err = error_from_response(500, body)
        exercise(err)
        assert len(err.message) <= 300
    exercise(error_from_status(status(message=deep, details={"causes": deep, "kind": deep})))


@pytest.mark.parametrize(
    "obj",
    [
        "boom",
        None,
        5,
        ["x"],
        {"kind": "Status", "code": "410", "details": {"causes": ["x"], "retryAfterSeconds": "soon"}},
        {"kind": "Status", "details": 5},
        {"kind": "Status", "code": {"x": 1}, "reason": ["Expired"]},
    ],
)
def test_watch_error_events_with_a_malformed_status(obj: Any) -> None:
    line = orjson.dumps({"type": "ERROR", "object": obj})
    with pytest.raises(ApiError) as info:
        decode_event(line, request="GET /api/v1/pods?watch=true")
    exercise(info.value)


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"not json",
        b"[1, 2]",
        b'"a string"',
        b"null",
        b"5",
        b'{"type": "ADDED"}',
        b'{"object": {}}',
        b'{"type": 5, "object": {}}',
        b'{"type": ["ADDED"], "object": {}}',
        b'{"type": "ADDED", "object": []}',
        b'{"type": "ADDED", "object": "x"}',
        b'{"type": "BOOKMARK", "object": null}',
        b"\xff\xfe",
        b"[" * 5000 + b"]" * 5000,
    ],
)
def test_malformed_watch_lines(line: bytes) -> None:
    with pytest.raises(ApiError, match="malformed watch event") as info:
        decode_event(line)
    exercise(info.value)


# -- properties: any JSON in, only the documented outcomes out --------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
# Values in the places a Status has them (the interesting shapes), or anything at all.
some = json_values | st.sampled_from(
    ["410", "soon", "Expired", "NotFound", "ResourceVersionTooLarge", 429, 410]
)
causes = st.lists(st.dictionaries(st.sampled_from(["reason", "message", "field"]), some) | some, max_size=3)
details = st.fixed_dictionaries(
    {},
    optional={"causes": causes | some, "retryAfterSeconds": some, "kind": some, "name": some, "group": some},
)
statuses = st.fixed_dictionaries(
    {"kind": st.just("Status")},
    optional={"code": some, "reason": some, "message": some, "details": details | some, "status": some},
)
bodies = statuses | json_values | st.binary(max_size=100)


@settings(max_examples=500, deadline=None)
@given(code=st.integers(min_value=0, max_value=999), body=bodies, retry_after=st.none() | st.floats())
def test_error_from_response_always_gives_a_usable_api_error(
    code: int, body: Any, retry_after: float | None
) -> None:
    exercise(error_from_response(code, body, retry_after=retry_after, request="GET /x", target="x"))


@settings(max_examples=500, deadline=None)
@given(body=statuses | json_values)
def test_error_from_status_always_gives_a_usable_api_error(body: Any) -> None:
    exercise(error_from_status(body))


@settings(max_examples=500, deadline=None)
@given(
    etype=some | st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "ERROR"]),
    obj=statuses | some,
)
def test_decode_event_gives_an_event_or_an_api_error(etype: Any, obj: Any) -> None:
    line = orjson.dumps({"type": etype, "object": obj})
    try:
        event = decode_event(line)
    except ApiError as err:
        exercise(err)
    else:
        assert isinstance(event, WatchEvent) and event.type != "ERROR"
        assert type(event.type) is str and type(event.object) is dict


@settings(max_examples=300, deadline=None)
@given(line=st.binary(max_size=200) | json_values.map(orjson.dumps))
def test_decode_event_on_any_line(line: bytes) -> None:
    try:
        decode_event(line)
    except ApiError as err:
        exercise(err)
