"""Who may read a protected endpoint of the manager (``/metrics``): the caller's bearer token is
authenticated with a TokenReview and its identity authorized with a SubjectAccessReview, both
answered by the API server.

This is what k8s.io/apiserver's delegated authentication and authorization do for the
Kubernetes components, and what controller-runtime's ``WithAuthenticationAndAuthorization``
filter does for a kubebuilder operator's metrics: a scraper sends ``Authorization: Bearer
<token>`` (its ServiceAccount token) and is let in only if the cluster's RBAC allows its user,
groups, uid and extra ``get`` on the path (the generated ``metrics-reader`` ClusterRole). The
manager's own identity needs ``create`` on ``tokenreviews`` and ``subjectaccessreviews`` (the
generated ``metrics-auth-role``).

    auth = DelegatedAuth(client)
    refusal = await auth.check(request_authorization_headers, path="/metrics")
    if refusal is not None:
        status, message = refusal             # serve that, never the endpoint

The answers (fail closed: only a SubjectAccessReview that says ``allowed`` lets a request in):

- no Authorization header, one that is not a well-formed bearer token, or a token the API
  server does not authenticate: 401; more than one Authorization header: 400;
- authenticated, but not allowed: 403;
- the API server did not answer (unreachable, timed out, 429 or 5xx, after retries within the
  deadline), or too many reviews are waiting already: 503; the manager may not create the
  reviews (metrics-auth-role not bound), a malformed answer or anything unexpected: 500.

Caching, as k8s.io/apiserver's delegating authenticator and authorizer do, with shorter TTLs:
identities for 60 s (never past the token's own ``exp``, when it is a JWT), rejected tokens for
10 s, allowed for 60 s and denied for 10 s; both caches are bounded (least recently used goes
first). Tokens are keyed by an HMAC under a key made per process: no token is stored, logged or
put in any message. Concurrent identical reviews share one call; failed calls are not cached.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson
from prometheus_client import CollectorRegistry, Counter

from kubeop.client import Client
from kubeop.core.errors import ApiError
from kubeop.core.resource import ApiResource

__all__ = ["DelegatedAuth", "Refusal", "Review"]

log = logging.getLogger("kubeop.manager.auth")

Refusal = tuple[int, str]
"""(HTTP status, plain-text message) to answer instead of the endpoint."""

Review = Callable[[dict[str, Any]], Awaitable[Mapping[str, Any]]]
"""Sends a TokenReview or SubjectAccessReview (the whole object) and returns the API server's
answer (the object with its ``status``); raises what :class:`~kubeop.client.Client` raises."""

_TOKEN_REVIEW = ApiResource(
    "authentication.k8s.io", "v1", "tokenreviews", kind="TokenReview", namespaced=False
)
_ACCESS_REVIEW = ApiResource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", kind="SubjectAccessReview", namespaced=False
)
_RESOURCES = {r.kind: r for r in (_TOKEN_REVIEW, _ACCESS_REVIEW)}

# RFC 6750's b64token: what a bearer token may be made of (JWTs and bootstrap tokens are).
_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] +([A-Za-z0-9\-._~+/]+=*) *")
_MAX_TOKEN = 16 * 1024
# The decision counted for each answer of DelegatedAuth.check (None: allowed).
_DECISIONS: dict[int | None, str] = {
    None: "allowed",
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    500: "error",
    503: "unavailable",
}
_TRANSIENT_CODES = frozenset({429, 500, 502, 503, 504})
_LOG_EVERY = 10.0  # seconds between two warnings of the same kind of failure

_UNAUTHORIZED_MISSING = "Unauthorized: send 'Authorization: Bearer <token>' (e.g. a ServiceAccount token)\n"
_UNAUTHORIZED_MALFORMED = "Unauthorized: the Authorization header is not a bearer token\n"
_UNAUTHORIZED_REJECTED = "Unauthorized: the API server did not authenticate the token\n"
_UNAVAILABLE = "Service Unavailable: the caller's credentials could not be reviewed now; retry later\n"
_INTERNAL = "Internal Server Error: the caller's credentials could not be reviewed\n"


class _Unavailable(Exception):
    """The API server did not answer a review in time (503)."""


class _Failed(Exception):
    """A review could not be made or its answer made no sense (500)."""


@dataclass(frozen=True, slots=True)
class _User:
    """The identity a TokenReview returned (what the SubjectAccessReview asks about)."""

    name: str
    uid: str
    groups: tuple[str, ...]
    extra: tuple[tuple[str, tuple[str, ...]], ...]

    def access_review(self, verb: str, path: str) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "user": self.name,
            "groups": list(self.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if self.uid:
            spec["uid"] = self.uid
        if self.extra:
            spec["extra"] = {k: list(v) for k, v in self.extra}
        return {"apiVersion": _ACCESS_REVIEW.api_version, "kind": _ACCESS_REVIEW.kind, "spec": spec}

    def key(self, verb: str, path: str) -> bytes:
        fields = [self.name, self.uid, list(self.groups), [[k, list(v)] for k, v in self.extra], verb, path]
        return hashlib.sha256(orjson.dumps(fields)).digest()


_V = TypeVar("_V")


class _Cache(Generic[_V]):
    """A bounded map whose entries expire: least recently used goes first when full."""

    def __init__(self, size: int, clock: Callable[[], float]) -> None:
        self._size = size
        self._clock = clock
        self._entries: OrderedDict[bytes, tuple[float, _V]] = OrderedDict()

    def get(self, key: bytes) -> tuple[bool, _V | None]:
        entry = self._entries.get(key)
        if entry is None:
            return False, None
        if entry[0] <= self._clock():
            del self._entries[key]
            return False, None
        self._entries.move_to_end(key)
        return True, entry[1]

    def put(self, key: bytes, value: _V, ttl: float) -> None:
        if ttl <= 0 or self._size <= 0:
            self._entries.pop(key, None)
            return
        self._entries[key] = (self._clock() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class DelegatedAuth:
    """Authenticates and authorizes callers through the API server; see the module docstring.

    ``client`` sends the reviews (the manager's); ``review`` replaces it (tests). ``timeout``
    bounds one :meth:`check` (both reviews and their retries); at most ``max_in_flight`` reviews
    are sent at once, and a check that cannot get a turn in time answers 503.
    """

    def __init__(
        self,
        client: Client | None = None,
        *,
        review: Review | None = None,
        authenticated_ttl: float = 60.0,
        unauthenticated_ttl: float = 10.0,
        allowed_ttl: float = 60.0,
        denied_ttl: float = 10.0,
        cache_size: int = 1024,
        timeout: float = 10.0,
        max_in_flight: int = 16,
        clock: Callable[[], float] = time.monotonic,
        registry: CollectorRegistry | None = None,
    ) -> None:
        if (client is None) == (review is None):
            raise ValueError("DelegatedAuth needs exactly one of client= (the manager's) or review=")
        if timeout <= 0 or max_in_flight < 1:
            raise ValueError(
                f"DelegatedAuth: timeout must be > 0 and max_in_flight >= 1, got {timeout}, {max_in_flight}"
            )
        if review is None:
            assert client is not None
            review = _client_review(client)
        self._review = review
        self._ttl = (authenticated_ttl, unauthenticated_ttl, allowed_ttl, denied_ttl)
        self._clock = clock
        self._users: _Cache[_User | None] = _Cache(cache_size, clock)
        self._decisions: _Cache[bool] = _Cache(cache_size, clock)
        self._pending: dict[bytes, asyncio.Future[Any]] = {}
        self._turns = asyncio.Semaphore(max_in_flight)
        self._timeout = timeout
        self._hmac_key = secrets.token_bytes(32)
        self._logged: dict[str, float] = {}
        # kubeop_metrics_auth_decisions_total{decision}: what the checks answered, so that a
        # scraper refused for hours (a missing RoleBinding, a rotated token) shows on a dashboard.
        self._decisions_total: Counter | None = None
        if registry is not None:
            self._decisions_total = Counter(
                "kubeop_metrics_auth_decisions",
                "Requests to the protected metrics endpoint, by the decision made",
                ["decision"],
                registry=registry,
            )
            for decision in _DECISIONS.values():
                self._decisions_total.labels(decision).inc(0)

    def __repr__(self) -> str:
        return f"<DelegatedAuth {len(self._users)} identities, {len(self._decisions)} decisions cached>"

    async def check(
        self, authorization: str | Sequence[str] | None, *, path: str = "/metrics", verb: str = "get"
    ) -> Refusal | None:
        """None when the caller may ``verb`` ``path``, else the (status, message) to answer.

        ``authorization`` is the request's Authorization header: its value, every value it was
        sent with (a list; more than one is refused), or None when absent. Never raises.
        """
        refusal = await self._check(authorization, path, verb)
        if self._decisions_total is not None:
            self._decisions_total.labels(_DECISIONS[None if refusal is None else refusal[0]]).inc()
        return refusal

    async def _check(self, authorization: str | Sequence[str] | None, path: str, verb: str) -> Refusal | None:
        if authorization is not None and not isinstance(authorization, str):
            values = list(authorization)
            if len(values) > 1:
                return 400, "Bad Request: more than one Authorization header\n"
            authorization = values[0] if values else None
        if not authorization:
            return 401, _UNAUTHORIZED_MISSING
        token = _bearer_token(authorization)
        if token is None:
            return 401, _UNAUTHORIZED_MALFORMED
        try:
            async with asyncio.timeout(self._timeout):
                user = await self._authenticate(token)
                if user is None:
                    log.debug("metrics request refused: the token was not authenticated")
                    return 401, _UNAUTHORIZED_REJECTED
                if not await self._authorize(user, verb, path):
                    log.debug("metrics request refused: %r may not %s %s", user.name, verb, path)
                    return 403, f"Forbidden: user {user.name!r} may not {verb} {path}\n"
        except (_Unavailable, TimeoutError) as exc:
            self._warn("unavailable", "cannot review a request to %s: %s", path, _describe(exc))
            return 503, _UNAVAILABLE
        except _Failed as exc:
            self._warn("failed", "cannot review a request to %s: %s", path, exc)
            return 500, _INTERNAL
        except Exception as exc:  # fail closed, whatever went wrong
            self._warn("error", "cannot review a request to %s: %s", path, type(exc).__name__)
            return 500, _INTERNAL
        return None

    # -- authentication -------------------------------------------------------------------------

    async def _authenticate(self, token: str) -> _User | None:
        key = b"t" + hmac.new(self._hmac_key, token.encode(), hashlib.sha256).digest()
        found, user = self._users.get(key)
        if found:
            return user
        expiry = _expiry(token)
        review = {
            "apiVersion": _TOKEN_REVIEW.api_version,
            "kind": _TOKEN_REVIEW.kind,
            "spec": {"token": token},
        }

        async def compute() -> _User | None:
            user = _user_of(await self._send(review))
            ttl = self._ttl[0] if user is not None else self._ttl[1]
            if user is not None and expiry is not None:
                ttl = min(ttl, expiry - time.time())
            self._users.put(key, user, ttl)
            return user

        result: _User | None = await self._shared(key, compute)
        return result

    # -- authorization --------------------------------------------------------------------------

    async def _authorize(self, user: _User, verb: str, path: str) -> bool:
        key = b"a" + user.key(verb, path)
        found, allowed = self._decisions.get(key)
        if found:
            return bool(allowed)

        async def compute() -> bool:
            answer = await self._send(user.access_review(verb, path))
            allowed = _allowed(answer)
            self._decisions.put(key, allowed, self._ttl[2] if allowed else self._ttl[3])
            return allowed

        result: bool = await self._shared(key, compute)
        return result

    # -- the calls ------------------------------------------------------------------------------

    async def _shared(self, key: bytes, compute: Callable[[], Awaitable[_V]]) -> _V:
        """Run ``compute`` once for concurrent callers with the same key; each waits on its own
        deadline, and one giving up does not cancel the call for the others."""
        future = self._pending.get(key)
        if future is None:
            future = asyncio.ensure_future(compute())
            self._pending[key] = future
            future.add_done_callback(lambda done: self._done(key, done))
        result: _V = await asyncio.shield(future)
        return result

    def _done(self, key: bytes, future: asyncio.Future[Any]) -> None:
        if self._pending.get(key) is future:
            del self._pending[key]
        if not future.cancelled():
            future.exception()  # retrieved: a failure nobody waits for any more is not "never retrieved"

    async def _send(self, review: dict[str, Any]) -> Mapping[str, Any]:
        """One review, retried while the API server is transiently unavailable (the reviews
        change nothing, so a retry is safe), within ``timeout`` including the wait for a turn."""
        kind = review["kind"]
        last = "no answer"
        try:
            async with asyncio.timeout(self._timeout), self._turns:
                delay = 0.2
                while True:
                    try:
                        answer = await self._review(review)
                        break
                    except ApiError as exc:
                        if exc.code not in _TRANSIENT_CODES:
                            raise _Failed(_api_failure(kind, exc)) from None
                        last = f"HTTP {exc.code} {exc.reason}".rstrip()
                    except OSError as exc:  # ApiConnectionError: refused, reset, TLS, timed out
                        last = type(exc).__name__
                    log.debug("%s failed (%s), retrying in %.1f s", kind, last, delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 2.0)
        except TimeoutError:
            raise _Unavailable(f"{kind}: {last} within {self._timeout:g} s") from None
        if not isinstance(answer, Mapping):
            raise _Failed(f"{kind}: the API server's answer is not an object")
        return answer

    def _warn(self, kind: str, message: str, *args: object) -> None:
        now = self._clock()
        if now - self._logged.get(kind, -_LOG_EVERY) >= _LOG_EVERY:
            self._logged[kind] = now
            log.warning(message, *args)


def _client_review(client: Client) -> Review:
    async def review(body: dict[str, Any]) -> Mapping[str, Any]:
        answer: Mapping[str, Any] = await client.create(body, resource=_RESOURCES[body["kind"]])
        return answer

    return review


def _bearer_token(header: str) -> str | None:
    if len(header) > _MAX_TOKEN + 16:
        return None
    match = _BEARER.fullmatch(header)
    return match.group(1) if match else None


def _user_of(answer: Mapping[str, Any]) -> _User | None:
    """The identity of an authenticated TokenReview, None when not authenticated; raises
    _Failed for an answer that claims authentication without a well-formed user."""
    status = answer.get("status")
    if not isinstance(status, Mapping) or status.get("authenticated") is not True:
        return None
    user = status.get("user")
    if not isinstance(user, Mapping):
        raise _Failed("TokenReview: authenticated without a user")
    name, uid = user.get("username"), user.get("uid", "")
    groups, extra = user.get("groups") or [], user.get("extra") or {}
    if not (isinstance(name, str) and name and isinstance(uid, str)):
        raise _Failed("TokenReview: authenticated without a user name")
    if not (isinstance(groups, list) and all(isinstance(g, str) for g in groups)):
        raise _Failed("TokenReview: the user's groups are not a list of strings")
    if not isinstance(extra, Mapping) or not all(
        isinstance(k, str) and isinstance(v, list) and all(isinstance(s, str) for s in v)
        for k, v in extra.items()
    ):
        raise _Failed("TokenReview: the user's extra is not a map of string lists")
    return _User(name, uid, tuple(groups), tuple(sorted((k, tuple(v)) for k, v in extra.items())))


def _allowed(answer: Mapping[str, Any]) -> bool:
    status = answer.get("status")
    if not isinstance(status, Mapping):
        raise _Failed("SubjectAccessReview: the answer has no status")
    return status.get("allowed") is True and status.get("denied") is not True


def _expiry(token: str) -> float | None:
    """The token's ``exp`` (seconds since the epoch) if it is a JWT that says; never verified:
    it only shortens how long the identity is cached."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = orjson.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return None
    exp = payload.get("exp") if isinstance(payload, dict) else None
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        return None
    return float(exp)


def _api_failure(kind: str, exc: ApiError) -> str:
    if exc.code in (401, 403):
        return (
            f"{kind}: the manager may not create {_RESOURCES[kind].plural} (HTTP {exc.code}): bind the "
            "metrics-auth-role ClusterRole (create tokenreviews and subjectaccessreviews) to its identity"
        )
    return f"{kind}: HTTP {exc.code} {exc.reason}".rstrip()


def _describe(exc: Exception) -> str:
    if isinstance(exc, TimeoutError):
        return "no answer from the API server in time"
    return str(exc)
