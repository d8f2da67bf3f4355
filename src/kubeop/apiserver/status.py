"""Status errors: what the server answers for every failure, as kube-apiserver does (a ``Status``
object with ``code``, ``reason``, ``message`` and ``details`` naming the object and the causes).

Storage and handlers raise :class:`StatusError`; the server turns it into the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["Cause", "StatusError", "status_body"]

Cause = tuple[str, str, str]
"""(reason, message, field) of one entry of ``details.causes`` (e.g. ``FieldValueInvalid``)."""

_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
}


class StatusError(Exception):
    """A failure answered as a Status: ``code`` (HTTP), ``reason`` (default: the code's), and
    ``details`` about the object (``group``, ``kind``, ``name``) and its ``causes``."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        group: str = "",
        kind: str = "",
        name: str = "",
        causes: Sequence[Cause] = (),
    ) -> None:
        super().__init__(message)
        self.code, self.message = code, message
        self.reason = reason or _REASONS.get(code, "")
        self.group, self.kind, self.name = group, kind, name
        self.causes = tuple(causes)

    def status(self) -> dict[str, Any]:
        """The error as a Kubernetes ``Status`` object (what the response body carries)."""
        return status_body(
            self.code,
            self.message,
            self.reason,
            group=self.group,
            kind=self.kind,
            name=self.name,
            causes=self.causes,
        )


def status_body(
    code: int,
    message: str,
    reason: str | None = None,
    *,
    group: str = "",
    kind: str = "",
    name: str = "",
    causes: Sequence[Cause] = (),
) -> dict[str, Any]:
    """A ``v1 Status`` (Failure unless ``code`` is 2xx)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if 200 <= code < 300 else "Failure",
        "message": message,
        "reason": reason if reason is not None else _REASONS.get(code, ""),
        "code": code,
    }
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    if causes:
        details["causes"] = [{"reason": r, "message": m, "field": f} for r, m, f in causes]
    if details:
        body["details"] = details
    if not body["reason"]:
        del body["reason"]
    return body
