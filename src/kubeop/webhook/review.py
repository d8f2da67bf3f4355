"""AdmissionReview and ConversionReview v1: strict decoding and the responses the API server expects.

Pure functions over bytes and dicts, no I/O. A body that is not a review the API server could
have sent raises :class:`BadReview` (the server answers 400 with its message); a review that
decodes is always answered with a response for its ``uid``, so the API server gets a verdict
instead of a retry loop.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

__all__ = [
    "ADMISSION_API_VERSION",
    "CONVERSION_API_VERSION",
    "AdmissionRequest",
    "BadReview",
    "ConversionRequest",
    "UserInfo",
    "admission_response",
    "conversion_response",
    "decode_admission",
    "decode_conversion",
]

ADMISSION_API_VERSION = "admission.k8s.io/v1"
CONVERSION_API_VERSION = "apiextensions.k8s.io/v1"

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
_OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


class BadReview(ValueError):
    """The body is not a review this server can answer (HTTP 400 with this message)."""


@dataclass(frozen=True)
class UserInfo:
    """Who sent the request the API server is admitting (``request.userInfo``)."""

    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class AdmissionRequest:
    """The parts of ``AdmissionReview.request`` a handler decides on; ``raw`` keeps all of it.

    ``headers`` (as the API server sent them, names in their own case) and ``peer`` (the API
    server's TLS client certificate as :meth:`ssl.SSLSocket.getpeercert` gives it, when the
    server asks for one and it was verified) say who called the webhook, not who made the API
    request (that is ``user_info``)."""

    uid: str
    operation: Operation
    kind: dict[str, str]
    resource: dict[str, str]
    name: str
    namespace: str
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    user_info: UserInfo
    dry_run: bool
    raw: dict[str, Any]
    headers: Mapping[str, str] = field(default_factory=dict)
    peer: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ConversionRequest:
    uid: str
    desired_api_version: str
    objects: list[dict[str, Any]]


def _load(body: bytes | Mapping[str, Any], kind: str, api_version: str) -> dict[str, Any]:
    if isinstance(body, Mapping):
        review: Any = dict(body)
    else:
        try:
            review = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise BadReview(f"the body is not JSON: {exc}") from None
    if not isinstance(review, dict):
        raise BadReview(f"the body is a JSON {type(review).__name__}, not a {kind} object")
    if review.get("kind") != kind:
        raise BadReview(f"kind is {review.get('kind')!r}, expected {kind!r}")
    if review.get("apiVersion") != api_version:
        raise BadReview(
            f"apiVersion is {review.get('apiVersion')!r}, expected {api_version!r} "
            f"(list only {api_version} in the webhook's review versions)"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReview(f"a {kind} needs a request object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid must be a non-empty string")
    return request


def _obj(request: dict[str, Any], key: str) -> dict[str, Any] | None:
    value = request.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadReview(f"request.{key} must be an object or null")
    return value


def _strs(request: dict[str, Any], key: str) -> dict[str, str]:
    value = request.get(key) or {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise BadReview(f"request.{key} must be an object of strings")
    return value


def decode_admission(
    body: bytes | Mapping[str, Any],
    *,
    headers: Mapping[str, str] | None = None,
    peer: Mapping[str, Any] | None = None,
) -> AdmissionRequest:
    """An ``admission.k8s.io/v1`` AdmissionReview's request (the body, or the review already
    parsed), checked; :class:`BadReview` otherwise. ``headers``/``peer``: who sent it."""
    request = _load(body, "AdmissionReview", ADMISSION_API_VERSION)
    operation = request.get("operation")
    if operation not in _OPERATIONS:
        raise BadReview(f"request.operation {operation!r} is not one of {', '.join(_OPERATIONS)}")
    info = request.get("userInfo") or {}
    if not isinstance(info, dict):
        raise BadReview("request.userInfo must be an object")
    groups = info.get("groups") or []
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise BadReview("request.userInfo.groups must be a list of strings")
    extra = info.get("extra") or {}
    if not isinstance(extra, dict):
        raise BadReview("request.userInfo.extra must be an object")
    return AdmissionRequest(
        uid=request["uid"],
        operation=operation,
        kind=_strs(request, "kind"),
        resource=_strs(request, "resource"),
        name=str(request.get("name") or ""),
        namespace=str(request.get("namespace") or ""),
        object=_obj(request, "object"),
        old_object=_obj(request, "oldObject"),
        user_info=UserInfo(
            username=str(info.get("username") or ""),
            uid=str(info.get("uid") or ""),
            groups=tuple(groups),
            extra={str(k): list(v) if isinstance(v, list) else [str(v)] for k, v in extra.items()},
        ),
        dry_run=bool(request.get("dryRun")),
        raw=request,
        headers=dict(headers or {}),
        peer=peer,
    )


def decode_conversion(body: bytes) -> ConversionRequest:
    """An ``apiextensions.k8s.io/v1`` ConversionReview's request, checked; :class:`BadReview` otherwise."""
    request = _load(body, "ConversionReview", CONVERSION_API_VERSION)
    desired = request.get("desiredAPIVersion")
    if not isinstance(desired, str) or "/" not in desired:
        raise BadReview("request.desiredAPIVersion must be a group/version string")
    objects = request.get("objects")
    if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
        raise BadReview("request.objects must be a list of objects")
    return ConversionRequest(uid=request["uid"], desired_api_version=desired, objects=objects)


def admission_response(
    uid: str,
    *,
    allowed: bool,
    status: dict[str, Any] | None = None,
    patch: list[dict[str, Any]] | None = None,
    warnings: list[str] | None = None,
) -> bytes:
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if status is not None:
        response["status"] = status
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(patch)).decode()
    if warnings:
        response["warnings"] = warnings
    review = {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": response}
    return orjson.dumps(review)


def conversion_response(
    uid: str, *, converted: list[dict[str, Any]] | None = None, failure: str | None = None
) -> bytes:
    response: dict[str, Any] = {"uid": uid}
    if failure is not None:
        response["convertedObjects"] = []
        response["result"] = {"status": "Failure", "message": failure}
    else:
        response["convertedObjects"] = converted or []
        response["result"] = {"status": "Success"}
    return orjson.dumps(
        {"apiVersion": CONVERSION_API_VERSION, "kind": "ConversionReview", "response": response}
    )
