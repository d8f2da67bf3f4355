"""API errors: metav1.Status parsed into typed exceptions.

The server describes every failure with a ``Status`` object (``code``, ``reason``, ``message``,
``details`` with the kind, name and field causes). :func:`error_from_status` picks the exception
class by ``reason`` first (it is the more specific: 409 is both AlreadyExists and Conflict, 410 is
both Gone and Expired) and by HTTP code second, so ``except NotFound`` works whichever way the
server phrased it. Responses that are not a Status (a proxy's HTML page, an empty 503) still map
to the class for their code, with the body's start as the message.

Nothing here trusts the shape of what the server sent: a Status whose fields have the wrong types
(``code: "410"``, ``details: 5``, ``causes: ["x"]``, ``retryAfterSeconds: "soon"``), or a body
that is no Status at all, still becomes an :class:`ApiError` (never a TypeError or ValueError),
with the fields that could be read and the raw value in ``status`` or the message.
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Mapping
from typing import Any

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "Expired",
    "FieldCause",
    "Forbidden",
    "Gone",
    "InternalError",
    "Invalid",
    "MethodNotAllowed",
    "NotFound",
    "ServerTimeout",
    "ServiceUnavailable",
    "TooManyRequests",
    "Unauthorized",
    "UnsupportedMediaType",
    "error_from_response",
    "error_from_status",
    "is_resource_version_too_large",
]


class FieldCause:
    """One entry of ``details.causes``: which field was wrong and why."""

    __slots__ = ("field", "message", "reason")

    def __init__(self, reason: str, message: str, field: str) -> None:
        self.reason = reason
        self.message = message
        self.field = field

    def __repr__(self) -> str:
        return f"FieldCause(reason={self.reason!r}, field={self.field!r}, message={self.message!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldCause):
            return NotImplemented
        return (self.reason, self.message, self.field) == (other.reason, other.message, other.field)

    def __hash__(self) -> int:
        return hash((self.reason, self.message, self.field))


class ApiError(Exception):
    """Any non-success answer from the API server.

    ``code`` is the HTTP status, ``reason`` the Status reason (``NotFound``, ``Conflict``, ...),
    ``message`` the server's human message, ``details`` the raw Status details (kind, name, group,
    causes, retryAfterSeconds), ``status`` the whole Status dict when there was one, and
    ``request`` the method and URL that failed.
    """

    default_code: int = 0

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        reason: str = "",
        details: Mapping[str, Any] | None = None,
        status: Mapping[str, Any] | None = None,
        request: str = "",
    ) -> None:
        self.message = message
        self.code = code if code is not None else self.default_code
        self.reason = reason
        self.details: Mapping[str, Any] = details if isinstance(details, Mapping) else {}
        self.status = status
        self.request = request
        super().__init__(self._text())

    def __str__(self) -> str:
        return self._text()

    def _text(self) -> str:
        text = self.message or self.reason or f"HTTP {self.code}"
        if self.request:
            text = f"{text} ({self.request})"
        return text

    @property
    def kind(self) -> str:
        """The kind the error is about, from the Status's ``details`` (empty when the server gave none)."""
        return _text(self.details.get("kind"))

    @property
    def name(self) -> str:
        """The name of the object the error is about, from the Status's ``details`` (empty when the server
        gave none).
        """
        return _text(self.details.get("name"))

    @property
    def causes(self) -> list[FieldCause]:
        """``details.causes``; entries that are not objects are skipped (a bare string is a message)."""
        causes = self.details.get("causes")
        if not isinstance(causes, (list, tuple)):
            return []
        out = []
        for c in causes:
            if isinstance(c, Mapping):
                out.append(FieldCause(_text(c.get("reason")), _text(c.get("message")), _text(c.get("field"))))
            elif isinstance(c, str):
                out.append(FieldCause("", c, ""))
        return out


class BadRequest(ApiError):
    """HTTP 400: the request was malformed (a bad selector, patch or body)."""

    default_code = 400


class Unauthorized(ApiError):
    """401: the credentials were missing, wrong or expired (an exec plugin is re-run once on this)."""

    default_code = 401


class Forbidden(ApiError):
    """403: authenticated, but RBAC does not allow the verb on this resource."""

    default_code = 403


class NotFound(ApiError):
    """HTTP 404: the object, or its namespace or resource, does not exist."""

    default_code = 404


class MethodNotAllowed(ApiError):
    """HTTP 405: the resource does not support the verb (a subresource it does not have, say)."""

    default_code = 405


class Conflict(ApiError):
    """409: a stale resourceVersion on update, a failed delete precondition or an apply conflict."""

    default_code = 409


class AlreadyExists(Conflict):
    """409 on create: the name is taken. A subclass of Conflict because the code is the same."""


class Gone(ApiError):
    """410: the requested resourceVersion is no longer in the server's history; relist."""

    default_code = 410


class Expired(Gone):
    """410 with reason Expired: a watch or continue token older than etcd's compaction window."""


class UnsupportedMediaType(ApiError):
    """415: e.g. a strategic merge patch sent to a custom resource."""

    default_code = 415


class Invalid(ApiError):
    """422: the object failed validation; :attr:`causes` lists each bad field."""

    default_code = 422


class TooManyRequests(ApiError):
    """429: the server (API priority and fairness) asks us to come back after ``retry_after`` s."""

    default_code = 429

    @property
    def retry_after(self) -> float | None:
        """``details.retryAfterSeconds``; None when absent or not a finite, non-negative number."""
        return _seconds(self.details.get("retryAfterSeconds"))


class InternalError(ApiError):
    """HTTP 500: the API server failed; retried for idempotent requests."""

    default_code = 500


class ServerTimeout(ApiError):
    """The server gave up (reason ServerTimeout/Timeout, 504); the operation may be retried."""

    default_code = 504


class ServiceUnavailable(ApiError):
    """HTTP 503: the API server (or an aggregated API or webhook behind it) is not available; retried for
    idempotent requests.
    """

    default_code = 503


_BY_REASON: dict[str, type[ApiError]] = {
    "BadRequest": BadRequest,
    "Unauthorized": Unauthorized,
    "Forbidden": Forbidden,
    "NotFound": NotFound,
    "MethodNotAllowed": MethodNotAllowed,
    "AlreadyExists": AlreadyExists,
    "Conflict": Conflict,
    "Gone": Gone,
    "Expired": Expired,
    "UnsupportedMediaType": UnsupportedMediaType,
    "Invalid": Invalid,
    "TooManyRequests": TooManyRequests,
    "InternalError": InternalError,
    "ServerTimeout": ServerTimeout,
    "Timeout": ServerTimeout,
    "ServiceUnavailable": ServiceUnavailable,
}

_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    409: Conflict,
    410: Gone,
    415: UnsupportedMediaType,
    422: Invalid,
    429: TooManyRequests,
    500: InternalError,
    503: ServiceUnavailable,
    504: ServerTimeout,
}


def error_from_status(
    status: Mapping[str, Any] | Any,
    *,
    http_code: int | None = None,
    retry_after: float | None = None,
    request: str = "",
    target: str = "",
) -> ApiError:
    """The typed exception for a metav1.Status dict.

    ``http_code`` wins over ``status.code`` when the two disagree (a watch ERROR event carries
    the code only in the Status). ``retry_after`` (from the Retry-After header) fills
    ``details.retryAfterSeconds`` when the Status lacks it. ``target`` names the object for
    messages when the server's message is empty.

    A malformed Status still gives an ApiError: fields of the wrong type are left out (``code``
    may be a string of digits), and a "Status" that is not a mapping becomes the message.
    """
    if not isinstance(status, Mapping):
        synthetic = {"message": f"malformed Status from the server: {_snippet(status)}"}
        err = error_from_status(
            synthetic, http_code=http_code, retry_after=retry_after, request=request, target=target
        )
        err.status = None
        return err
    code = http_code if http_code is not None else _status_code(status.get("code"))
    reason = _text(status.get("reason"))
    raw_details = status.get("details")
    details = _retry_details(dict(raw_details) if isinstance(raw_details, Mapping) else {}, retry_after)
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code)
    if cls is None:
        cls = InternalError if code >= 500 else ApiError
    raw_message = status.get("message")
    message = raw_message if isinstance(raw_message, str) else _snippet(raw_message) if raw_message else ""
    if not message:
        message = _default_message(cls, code, reason, target)
    return cls(message, code=code, reason=reason, details=details, status=status, request=request)


def _status_code(value: Any) -> int:
    """``status.code`` if it is an HTTP status (an int, or a string of up to 3 digits), else 0."""
    if type(value) is int:
        return value if 0 <= value <= 999 else 0
    if isinstance(value, str) and 0 < len(value) <= 3 and value.isascii() and value.isdigit():
        return int(value)
    return 0


def _retry_details(details: dict[str, Any], retry_after: float | None) -> dict[str, Any]:
    if retry_after is not None and "retryAfterSeconds" not in details and _seconds(retry_after) is not None:
        details["retryAfterSeconds"] = retry_after
    return details


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        seconds = float(value)
    except (ValueError, OverflowError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _text(value: Any) -> str:
    """A Status field that should be a string: itself if it is one, else ""."""
    return value if isinstance(value, str) else ""


_repr = reprlib.Repr()
_repr.maxlevel = 3
_repr.maxstring = 200
_repr.maxother = 200


def _snippet(value: Any, limit: int = 300) -> str:
    """At most ``limit`` characters of a value for a message (bounded in depth: never recursive)."""
    if isinstance(value, str):
        return value[:limit]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value[:limit]).decode("utf-8", "replace").strip()
    try:
        return _repr.repr(value)[:limit]
    except Exception:  # e.g. an int too long to print; a message must never fail
        return f"<{type(value).__name__} that cannot be shown>"


def error_from_response(
    code: int,
    body: Any,
    *,
    retry_after: float | None = None,
    request: str = "",
    target: str = "",
) -> ApiError:
    """The typed exception for an HTTP error response whose body is already decoded (or raw bytes).

    A decoded Status goes through :func:`error_from_status`; anything else (bytes, text, a
    non-Status JSON) keeps its first 300 characters as the message.
    """
    if isinstance(body, Mapping) and body.get("kind") == "Status":
        return error_from_status(
            body, http_code=code, retry_after=retry_after, request=request, target=target
        )
    text = "" if body is None else _snippet(body)
    synthetic: dict[str, Any] = {"code": code}
    if text:
        synthetic["message"] = text
    return error_from_status(
        synthetic, http_code=code, retry_after=retry_after, request=request, target=target
    )


def _default_message(cls: type[ApiError], code: int, reason: str, target: str) -> str:
    what = target or "the request"
    phrases = {
        NotFound: f"{what} not found",
        AlreadyExists: f"{what} already exists",
        Conflict: f"conflict on {what}",
        Forbidden: f"forbidden: {what}",
        Unauthorized: f"unauthorized: {what} (credentials missing, invalid or expired)",
        Gone: f"resource version too old for {what}",
        Expired: f"resource version expired for {what}",
        TooManyRequests: f"too many requests: {what}",
    }
    phrase = phrases.get(cls)
    if phrase:
        return phrase
    return f"HTTP {code}{' ' + reason if reason else ''} on {what}"


def is_resource_version_too_large(error: ApiError) -> bool:
    """True for "Too large resource version": the server is behind the RV asked for.

    The server answers 504 with cause ``ResourceVersionTooLarge``; a reflector treats it like 410
    and relists from scratch rather than retrying the same version.
    """
    return any(c.reason == "ResourceVersionTooLarge" for c in error.causes) or (
        "too large resource version" in error.message.lower()
    )
