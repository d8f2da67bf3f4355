"""AdmissionReview and ConversionReview v1: strict decoding and the responses the API server expects.

Pure functions over bytes and dicts, no I/O. A body that is not a review the API server could
have sent raises :class:`BadReview` (the server answers 400 with its message); a review that
decodes is always answered with a response for its ``uid``, so the API server gets a verdict
instead of a retry loop.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping, Sequence
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
    "admission_denied",
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
    return _check(review, kind, api_version)


def _check(review: Any, kind: str, api_version: str) -> dict[str, Any]:
    """``review.request``, once the review is a ``kind`` of ``api_version`` with a request uid."""
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


def decode_conversion(
    body: bytes, *, each: Callable[[dict[str, Any], Mapping[str, Any]], None] | None = None
) -> ConversionRequest:
    """An ``apiextensions.k8s.io/v1`` ConversionReview's request, checked; :class:`BadReview` otherwise.

    With ``each``, every object of ``request.objects`` is handed to ``each(obj, request)`` as soon
    as it is decoded, and not kept (``objects`` is then empty); ``request`` holds the request's
    fields decoded so far (the API server writes ``uid`` and ``desiredAPIVersion`` first). A
    review of 30,000 objects is then never in memory as Python objects at once, so neither the
    garbage collector nor a single decoding call holds the interpreter for long: the objects are
    decoded one by one (the standard library's decoder on each, this module only walks the two
    levels around them), which lets the event loop run between them when this runs in a thread.
    """
    request, objects = _walk_conversion(body, each)
    _check(request, "ConversionReview", CONVERSION_API_VERSION)
    fields = request["request"]
    desired = fields.get("desiredAPIVersion")
    if not isinstance(desired, str) or "/" not in desired:
        raise BadReview("request.desiredAPIVersion must be a group/version string")
    if not isinstance(fields.get("objects"), list):
        raise BadReview("request.objects must be a list of objects")
    return ConversionRequest(uid=fields["uid"], desired_api_version=desired, objects=objects)


_SPACE = re.compile(r"[ \t\n\r]*")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _walk_conversion(
    body: bytes, each: Callable[[dict[str, Any], Mapping[str, Any]], None] | None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The review with ``request.objects`` decoded one object at a time (each to ``each``, or kept
    in the list returned); the review's ``request.objects`` is left an empty list."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadReview(f"the body is not JSON: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    walk = _Walk(text)
    kept: list[dict[str, Any]] = []

    def objects(i: int, request: dict[str, Any]) -> tuple[Any, int]:
        def one(obj: Any) -> None:
            if not isinstance(obj, dict):
                raise BadReview("request.objects must be a list of objects")
            if each is None:
                kept.append(obj)
            else:
                each(obj, request)

        return walk.array(i, one)

    def request(i: int, _review: dict[str, Any]) -> tuple[Any, int]:
        return walk.object(i, {"objects": objects})

    review, end = walk.object(walk.skip(0), {"request": request}, top=True)
    if walk.skip(end) != len(text):
        raise BadReview(f"the body is not JSON: extra data at character {walk.skip(end)}")
    return review, kept


class _Walk:
    """Decodes JSON text, walking the members named in ``object(..., walkers)`` itself and
    leaving every other value to the standard library's decoder, one value at a time."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._decoder = json.JSONDecoder(parse_constant=_refuse_constant)

    def skip(self, i: int) -> int:
        match = _SPACE.match(self.text, i)
        return match.end() if match is not None else i

    def value(self, i: int) -> tuple[Any, int]:
        try:
            return self._decoder.raw_decode(self.text, i)
        except RecursionError:
            raise BadReview(f"the body is not JSON: nested too deeply at character {i}") from None
        except ValueError as exc:  # JSONDecodeError, NaN, an int of more than 4,300 digits
            raise BadReview(f"the body is not JSON: {exc}") from None

    def _expect(self, i: int, char: str) -> int:
        if not self.text.startswith(char, i):
            raise BadReview(f"the body is not JSON: expected {char!r} at character {i}")
        return i + 1

    def object(
        self,
        i: int,
        walkers: Mapping[str, Callable[[int, dict[str, Any]], tuple[Any, int]]],
        *,
        top: bool = False,
    ) -> tuple[Any, int]:
        if not self.text.startswith("{", i):
            value, end = self.value(i)
            if top:
                raise BadReview(f"the body is a JSON {type(value).__name__}, not a ConversionReview object")
            return value, end
        out: dict[str, Any] = {}
        i = self.skip(i + 1)
        if self.text.startswith("}", i):
            return out, i + 1
        while True:
            if not self.text.startswith('"', i):
                raise BadReview(f"the body is not JSON: expected a key at character {i}")
            key, i = self.value(i)
            i = self.skip(self._expect(self.skip(i), ":"))
            walker = walkers.get(key)
            if walker is None:
                out[key], i = self.value(i)
            elif key in out:
                raise BadReview(f"the body has {key!r} twice")
            else:
                out[key], i = walker(i, out)
            i = self.skip(i)
            if self.text.startswith(",", i):
                i = self.skip(i + 1)
                continue
            return out, self._expect(i, "}")

    def array(self, i: int, each: Callable[[Any], None]) -> tuple[Any, int]:
        """An array whose items go to ``each`` (the value is an empty list); another value as is."""
        if not self.text.startswith("[", i):
            return self.value(i)
        i = self.skip(i + 1)
        if self.text.startswith("]", i):
            return [], i + 1
        while True:
            item, i = self.value(i)
            each(item)
            del item
            i = self.skip(i)
            if self.text.startswith(",", i):
                i = self.skip(i + 1)
                continue
            return [], self._expect(i, "]")


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


_ALLOWED_KEY = b'"allowed":'


def admission_denied(payload: bytes) -> bool:
    """Whether ``payload``, an AdmissionReview response :func:`admission_response` encoded, denies.

    Cheap (no decoding): the first ``"allowed":`` in it is the response's own, since the only
    strings before it (apiVersion, kind, uid) are JSON-escaped and so hold no unescaped ``"``.
    """
    at = payload.find(_ALLOWED_KEY)
    return at >= 0 and payload.startswith(b"false", at + len(_ALLOWED_KEY))


def conversion_response(
    uid: str,
    *,
    converted: list[dict[str, Any]] | None = None,
    failure: str | None = None,
    encoded: Sequence[bytes] | None = None,
) -> bytes:
    """The ConversionReview response: a failure, or the ``converted`` objects (or the same already
    ``encoded`` as JSON, one by one: a long list is then never one long encoding call)."""
    response: dict[str, Any] = {"uid": uid}
    if failure is not None:
        response["convertedObjects"] = []
        response["result"] = {"status": "Failure", "message": failure}
    else:
        response["convertedObjects"] = converted or []
        response["result"] = {"status": "Success"}
    if failure is not None or encoded is None:
        return orjson.dumps(
            {"apiVersion": CONVERSION_API_VERSION, "kind": "ConversionReview", "response": response}
        )
    head = b'{"apiVersion":"%s","kind":"ConversionReview",' % CONVERSION_API_VERSION.encode()
    uid_json = b'"response":{"uid":%s,"convertedObjects":[' % orjson.dumps(uid)
    tail = b'],"result":{"status":"Success"}}}'
    return b"".join((head, uid_json, b",".join(encoded), tail))
