"""Who is calling, and may they: authentication and authorization as kube-apiserver's
aggregation layer expects of an extension API server (what k8s.io/apiserver's delegating
authenticator and authorizer do).

Authentication, in this order; anything else is 401:

1. The front proxy (kube-apiserver, proxying for its authenticated user): a TLS client
   certificate verified against the *requestheader* CA (``requestheader-client-ca-file`` in the
   ``kube-system/extension-apiserver-authentication`` ConfigMap; the server's TLS asks for and
   verifies client certificates against that CA only), whose common name is one of
   ``requestheader-allowed-names`` (any, when that list is empty). Only then are the user, groups
   and extra read from the ``X-Remote-User`` / ``X-Remote-Group`` / ``X-Remote-Extra-*`` headers
   (the names the ConfigMap gives); from anyone else those headers are ignored.
   Every authenticated user is also in ``system:authenticated``, as k8s.io/apiserver has it.
   A user header sent twice is 401 (whose request is it?); groups and extras are one per header
   line, so a comma inside a group's name never makes two groups.
2. A direct caller's bearer token, authenticated with a TokenReview (cached: 60 s when
   authenticated, 10 s when not; keyed by an HMAC of the token, which is never stored or logged).

Authorization: a SubjectAccessReview of the request's attributes (resource requests:
verb, group, version, resource, subresource, namespace, name; other paths: the path and verb),
cached 10 s allowed and 10 s denied, bounded, keyed on the user (name, uid, groups, extra) and
every attribute. A review that cannot be made (any error, a timeout, an answer that is not an
object) is 503: fail closed.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import orjson

from kubeop.apiserver.handlers import Attributes
from kubeop.apiserver.status import StatusError
from kubeop.client.httpserver import Request
from kubeop.core.errors import ApiError

__all__ = ["Authenticator", "Authorizer", "RequestHeaderConfig", "Review", "User"]

log = logging.getLogger("kubeop.apiserver.auth")

Review = Callable[[dict[str, Any]], Awaitable[Mapping[str, Any]]]
"""Creates a TokenReview or SubjectAccessReview (the whole object) and returns the answer."""

CONFIGMAP_NAMESPACE, CONFIGMAP_NAME = "kube-system", "extension-apiserver-authentication"
_MAX_TOKEN = 16 * 1024
_AUTHENTICATED = "system:authenticated"


@dataclass(frozen=True, slots=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


@dataclass(frozen=True, slots=True)
class RequestHeaderConfig:
    """The front proxy's settings (the requestheader-* keys of the ConfigMap)."""

    client_ca: str
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)

    @classmethod
    def from_configmap(cls, data: Mapping[str, str]) -> RequestHeaderConfig:
        """From ``kube-system/extension-apiserver-authentication``'s data; a clear error when
        kube-apiserver runs without the aggregation layer's flags."""
        ca = data.get("requestheader-client-ca-file")
        if not ca:
            raise ValueError(
                f"{CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME} has no requestheader-client-ca-file: start "
                "kube-apiserver with --requestheader-client-ca-file and the other --requestheader-* and "
                "--proxy-client-* flags (the aggregation layer)"
            )

        def names(key: str, default: tuple[str, ...]) -> tuple[str, ...]:
            text = data.get(key)
            if not text:
                return default
            value = orjson.loads(text)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{CONFIGMAP_NAME}: {key} is not a JSON list of strings")
            return tuple(value)

        return cls(
            ca,
            names("requestheader-allowed-names", ()),
            names("requestheader-username-headers", ("X-Remote-User",)),
            names("requestheader-group-headers", ("X-Remote-Group",)),
            names("requestheader-extra-headers-prefix", ("X-Remote-Extra-",)),
        )


class _Cache:
    """Entries that expire, least recently used first out when full."""

    def __init__(self, size: int, clock: Callable[[], float]) -> None:
        self._size, self._clock = size, clock
        self._entries: OrderedDict[bytes, tuple[float, Any]] = OrderedDict()

    def get(self, key: bytes) -> tuple[bool, Any]:
        entry = self._entries.get(key)
        if entry is None or entry[0] <= self._clock():
            self._entries.pop(key, None)
            return False, None
        self._entries.move_to_end(key)
        return True, entry[1]

    def put(self, key: bytes, value: Any, ttl: float) -> None:
        self._entries[key] = (self._clock() + ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._size:
            self._entries.popitem(last=False)


class Authenticator:
    """The caller of a request (see the module docstring); raises StatusError 401."""

    def __init__(
        self,
        config: RequestHeaderConfig,
        review: Review | None,
        *,
        authenticated_ttl: float = 60.0,
        unauthenticated_ttl: float = 10.0,
        cache_size: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self._review = review
        self._ttl = (authenticated_ttl, unauthenticated_ttl)
        self._tokens = _Cache(cache_size, clock)
        self._hmac_key = secrets.token_bytes(32)

    async def authenticate(self, request: Request) -> User:
        if request.peercert is not None:
            return self._front_proxy(request, request.peercert)
        authorization = request.header("authorization")
        if authorization and self._review is not None:
            scheme, _, token = authorization.partition(" ")
            token = token.strip()
            if scheme.lower() == "bearer" and token and len(token) <= _MAX_TOKEN:
                user = await self._token(token)
                if user is not None:
                    return user
        raise StatusError(401, "Unauthorized")

    def _front_proxy(self, request: Request, cert: Mapping[str, Any]) -> User:
        config = self.config
        common_name = _common_name(cert)
        if config.allowed_names and common_name not in config.allowed_names:
            log.warning("a client certificate of %r is not an allowed front proxy", common_name)
            raise StatusError(401, "Unauthorized")
        sent = next((vs for h in config.username_headers if (vs := request.header_values(h))), [])
        if len(sent) > 1:  # the user header sent twice: whose request is it?
            log.warning("the front proxy sent more than one user in its user header: refused")
            raise StatusError(401, "Unauthorized: the front proxy sent more than one user")
        name = sent[0].strip() if sent else ""
        if not name:
            raise StatusError(401, "Unauthorized: the front proxy sent no user")
        groups: list[str] = []
        for header in config.group_headers:
            # one group per header line, as kube-apiserver sends them: a group's name may hold a
            # comma ("a,system:masters" is one group, never two)
            groups.extend(g for v in request.header_values(header) if (g := v.strip()))
        extra: dict[str, list[str]] = {}
        for key in request.fields:
            for prefix in config.extra_prefixes:
                if key.startswith(prefix.lower()) and len(key) > len(prefix):
                    extra.setdefault(unquote(key[len(prefix) :]).lower(), []).extend(
                        v.strip() for v in request.header_values(key)
                    )
        return User(name, "", _authenticated(groups), tuple(sorted((k, tuple(v)) for k, v in extra.items())))

    async def _token(self, token: str) -> User | None:
        key = hmac.new(self._hmac_key, token.encode(), hashlib.sha256).digest()
        found, user = self._tokens.get(key)
        if found:
            return user  # type: ignore[no-any-return]
        assert self._review is not None
        answer = await _send(
            self._review,
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}},
        )
        status = answer.get("status") or {}
        result = None
        if isinstance(status, Mapping) and status.get("authenticated") is True:
            info = status.get("user") or {}
            name = info.get("username") if isinstance(info, Mapping) else None
            if isinstance(name, str) and name:
                groups = info.get("groups") or []
                extra = info.get("extra") or {}
                result = User(
                    name,
                    str(info.get("uid") or ""),
                    _authenticated(g for g in groups if isinstance(g, str)),
                    tuple(
                        sorted(
                            (str(k), tuple(str(x) for x in v))
                            for k, v in extra.items()
                            if isinstance(v, list)
                        )
                    ),
                )
        self._tokens.put(key, result, self._ttl[0] if result is not None else self._ttl[1])
        return result


@dataclass
class Authorizer:
    """SubjectAccessReviews, cached (see the module docstring); raises StatusError 403 or 503."""

    review: Review
    allowed_ttl: float = 10.0
    denied_ttl: float = 10.0
    cache_size: int = 4096
    clock: Callable[[], float] = time.monotonic
    _cache: _Cache = field(init=False)

    def __post_init__(self) -> None:
        self._cache = _Cache(self.cache_size, self.clock)

    async def authorize(self, user: User, attrs: Attributes) -> None:
        spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups)}
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        if attrs.is_resource:
            spec["resourceAttributes"] = {
                "verb": attrs.verb,
                "group": attrs.group,
                "version": attrs.version,
                "resource": attrs.resource,
                "subresource": attrs.subresource,
                "namespace": attrs.namespace,
                "name": attrs.name,
            }
        else:
            spec["nonResourceAttributes"] = {"path": attrs.path, "verb": attrs.verb}
        key = hashlib.sha256(orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)).digest()
        found, allowed = self._cache.get(key)
        if not found:
            answer = await _send(
                self.review,
                {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
            )
            status = answer.get("status") or {}
            allowed = (
                isinstance(status, Mapping)
                and status.get("allowed") is True
                and status.get("denied") is not True
            )
            self._cache.put(key, allowed, self.allowed_ttl if allowed else self.denied_ttl)
        if not allowed:
            raise StatusError(
                403, _forbidden(user, attrs), group=attrs.group, kind=attrs.resource, name=attrs.name
            )


async def _send(review: Review, body: dict[str, Any]) -> Mapping[str, Any]:
    """The review's answer; any failure to get one (an error, a timeout, an answer that is not an
    object) is 503: the request is refused, never let through (fail closed)."""
    kind = body["kind"]
    try:
        async with asyncio.timeout(10):
            answer = await review(body)
    except Exception as exc:  # whatever went wrong, the caller is not let through
        # the exception's type only (its text may hold the token under review), but an ApiError's
        # message is the API server's Status, which never echoes the review's spec
        log.warning("%s failed: %s", kind, exc if isinstance(exc, ApiError) else type(exc).__name__)
        raise StatusError(
            503, f"the caller's credentials could not be reviewed ({kind}); retry later"
        ) from None
    if not isinstance(answer, Mapping):
        log.warning("%s failed: the answer is a %s, not an object", kind, type(answer).__name__)
        raise StatusError(503, f"the caller's credentials could not be reviewed ({kind}); retry later")
    return answer


def _authenticated(groups: Iterable[str]) -> tuple[str, ...]:
    """The groups with ``system:authenticated`` (k8s.io/apiserver adds it to every authenticated
    user: it is what RBAC's system:discovery binding and most others name)."""
    out = list(dict.fromkeys(groups))
    if _AUTHENTICATED not in out:
        out.append(_AUTHENTICATED)
    return tuple(out)


def _forbidden(user: User, attrs: Attributes) -> str:
    if not attrs.is_resource:
        return f'forbidden: User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
    what = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f' in the namespace "{attrs.namespace}"' if attrs.namespace else " at the cluster scope"
    named = f' "{attrs.name}"' if attrs.name else ""
    return (
        f'{what}{named} is forbidden: User "{user.name}" cannot {attrs.verb} resource "{what}" '
        f'in API group "{attrs.group}"{where}'
    )


def _common_name(cert: Mapping[str, Any]) -> str:
    for rdn in cert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return ""
