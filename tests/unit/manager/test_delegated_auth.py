"""DelegatedAuth: bearer tokens reviewed by the API server (TokenReview, SubjectAccessReview),
the answers cached and shared, and every failure closed.

The reviews go through an injected function standing for the API server's two review APIs (the
FakeCluster does not answer them: tests/e2e/controller/test_metrics_auth_e2e.py asks the real
one); one test shows the client path against a FakeCluster fails closed.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from kubeop.client.transport import ApiConnectionError
from kubeop.core.errors import Forbidden, ServiceUnavailable
from kubeop.manager.delegated_auth import DelegatedAuth
from kubeop.testing import FakeCluster

TOKEN = "eyJhbGciOiJSUzI1NiJ9.c2VjcmV0LXRva2Vu.c2lnbmF0dXJl"  # shaped like a JWT, no exp
PROM = {"username": "system:serviceaccount:monitoring:prometheus", "uid": "u-1", "groups": ["scrapers"]}


class Api:
    """The review answers of an API server: which tokens are whose, and who may get what."""

    def __init__(self) -> None:
        self.users: dict[str, dict[str, Any]] = {TOKEN: dict(PROM, extra={"scopes": ["a", "b"]})}
        self.allowed_groups = {"scrapers"}
        self.calls: list[dict[str, Any]] = []
        self.gate: asyncio.Event | None = None
        self.failures: list[Exception] = []

    async def review(self, body: dict[str, Any]) -> Mapping[str, Any]:
        self.calls.append(body)
        if self.gate is not None:
            await self.gate.wait()
        if self.failures:
            raise self.failures.pop(0)
        spec = body["spec"]
        if body["kind"] == "TokenReview":
            user = self.users.get(spec["token"])
            status = {"authenticated": True, "user": user} if user else {"authenticated": False}
            return {**body, "status": status}
        assert body["kind"] == "SubjectAccessReview"
        attrs = spec["nonResourceAttributes"]
        allowed = attrs == {"path": "/metrics", "verb": "get"} and bool(
            self.allowed_groups & set(spec.get("groups", []))
        )
        return {**body, "status": {"allowed": allowed}}

    def kinds(self) -> list[str]:
        return [c["kind"] for c in self.calls]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _auth(api: Api, clock: Clock | None = None, **options: Any) -> DelegatedAuth:
    return DelegatedAuth(review=api.review, clock=clock or Clock(), **options)


async def test_an_allowed_caller_passes_and_the_review_names_its_whole_identity() -> None:
    api = Api()
    assert await _auth(api).check(f"Bearer {TOKEN}") is None
    token_review, access_review = api.calls
    assert token_review["spec"] == {"token": TOKEN}
    assert access_review["apiVersion"] == "authorization.k8s.io/v1"
    assert access_review["spec"] == {
        "user": PROM["username"],
        "uid": "u-1",
        "groups": ["scrapers"],
        "extra": {"scopes": ["a", "b"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }


async def test_an_authenticated_caller_without_the_role_is_403_naming_the_user() -> None:
    api = Api()
    api.allowed_groups = set()
    refusal = await _auth(api).check(f"Bearer {TOKEN}")
    assert refusal is not None and refusal[0] == 403
    assert PROM["username"] in refusal[1] and TOKEN not in refusal[1]


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        [],
        "Basic dXNlcjpwYXNz",
        "Bearer",
        "Bearer ",
        "Bearer two tokens",
        "Bearer tok\r\nX-Injected: 1",
        "Bearer tök",
        "Bearer " + "a" * 17_000,
        "Token " + TOKEN,
    ],
)
async def test_missing_or_malformed_credentials_are_401_without_asking_the_api_server(header: Any) -> None:
    api = Api()
    refusal = await _auth(api).check(header)
    assert refusal is not None and refusal[0] == 401
    assert api.calls == []


async def test_the_scheme_is_case_insensitive_and_a_single_header_may_come_as_a_list() -> None:
    api = Api()
    auth = _auth(api)
    assert await auth.check(f"bearer {TOKEN}") is None
    assert await auth.check([f"BEARER  {TOKEN}"]) is None


async def test_two_authorization_headers_are_refused() -> None:
    api = Api()
    refusal = await _auth(api).check([f"Bearer {TOKEN}", "Bearer other"])
    assert refusal is not None and refusal[0] == 400 and api.calls == []


async def test_a_token_the_api_server_does_not_authenticate_is_401() -> None:
    api = Api()
    refusal = await _auth(api).check("Bearer garbage")
    assert refusal is not None and refusal[0] == 401
    assert api.kinds() == ["TokenReview"]


async def test_answers_are_cached_with_short_ttls_allow_longer_than_deny() -> None:
    api, clock = Api(), Clock()
    auth = _auth(api, clock)
    for _ in range(5):
        assert await auth.check(f"Bearer {TOKEN}") is None
    assert api.kinds() == ["TokenReview", "SubjectAccessReview"]
    clock.now += 61
    assert await auth.check(f"Bearer {TOKEN}") is None
    assert len(api.calls) == 4  # both expired after 60 s

    api.allowed_groups = set()  # the role binding is removed
    clock.now += 61
    assert (await auth.check(f"Bearer {TOKEN}") or (0,))[0] == 403
    calls = len(api.calls)
    clock.now += 5
    assert (await auth.check(f"Bearer {TOKEN}") or (0,))[0] == 403
    assert len(api.calls) == calls  # a denial is cached ...
    api.allowed_groups = {"scrapers"}
    clock.now += 6
    assert await auth.check(f"Bearer {TOKEN}") is None  # ... for 10 s only
    assert api.kinds()[-1] == "SubjectAccessReview"


async def test_a_rejected_token_is_cached_for_10_seconds() -> None:
    api, clock = Api(), Clock()
    auth = _auth(api, clock)
    for _ in range(3):
        assert (await auth.check("Bearer not-yet") or (0,))[0] == 401
    assert len(api.calls) == 1
    api.users["not-yet"] = PROM
    clock.now += 11
    assert await auth.check("Bearer not-yet") is None


def _jwt(exp: float) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(orjson.dumps(obj)).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part({'exp': exp, 'sub': 'x'})}.c2ln"


async def test_an_identity_is_never_cached_past_the_tokens_expiry() -> None:
    api, clock = Api(), Clock()
    token = _jwt(time.time() + 2)
    api.users[token] = PROM
    auth = _auth(api, clock)
    assert await auth.check(f"Bearer {token}") is None
    assert await auth.check(f"Bearer {token}") is None
    assert api.kinds().count("TokenReview") == 1
    clock.now += 3  # well within the 60 s TTL, but past exp
    del api.users[token]
    assert (await auth.check(f"Bearer {token}") or (0,))[0] == 401
    assert api.kinds().count("TokenReview") == 2


async def test_concurrent_identical_reviews_are_sent_once() -> None:
    api = Api()
    api.gate = asyncio.Event()
    auth = _auth(api)
    checks = [asyncio.ensure_future(auth.check(f"Bearer {TOKEN}")) for _ in range(50)]
    await asyncio.sleep(0.05)
    api.gate.set()
    assert await asyncio.gather(*checks) == [None] * 50
    assert api.kinds() == ["TokenReview", "SubjectAccessReview"]


async def test_one_caller_giving_up_does_not_cancel_the_shared_review() -> None:
    api = Api()
    api.gate = asyncio.Event()
    auth = _auth(api)
    first = asyncio.ensure_future(auth.check(f"Bearer {TOKEN}"))
    second = asyncio.ensure_future(auth.check(f"Bearer {TOKEN}"))
    await asyncio.sleep(0.02)
    first.cancel()
    api.gate.set()
    assert await second is None
    assert first.cancelled()


async def test_the_cache_is_bounded() -> None:
    api = Api()
    for i in range(20):
        api.users[f"tok{i}"] = {"username": f"user{i}", "groups": ["scrapers"]}
    auth = _auth(api, cache_size=4)
    for i in range(20):
        assert await auth.check(f"Bearer tok{i}") is None
    assert len(auth._users) == 4 and len(auth._decisions) == 4


async def test_no_token_in_the_cache_the_repr_or_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kubeop")
    api = Api()
    auth = _auth(api)
    assert await auth.check(f"Bearer {TOKEN}") is None
    assert (await auth.check("Bearer rejected-secret") or (0,))[0] == 401
    api.failures = [ServiceUnavailable("down", code=503)] * 100
    assert (await _auth(api, timeout=0.3).check("Bearer failing-secret") or (0,))[0] == 503
    keys = b"".join(auth._users._entries)
    for secret in (TOKEN, "rejected-secret", "failing-secret"):
        assert secret.encode() not in keys
        assert secret not in repr(auth)
        assert secret not in caplog.text
    assert "unavailable" in caplog.text.lower() or "cannot review" in caplog.text


async def test_an_unreachable_api_server_is_503_after_retrying_within_the_deadline() -> None:
    api = Api()
    api.failures = [ApiConnectionError("connection refused")] * 100
    t0 = time.monotonic()
    refusal = await _auth(api, timeout=0.5).check(f"Bearer {TOKEN}")
    assert refusal is not None and refusal[0] == 503
    assert 0.4 < time.monotonic() - t0 < 2
    assert 2 <= len(api.calls) <= 5  # retried with backoff, not in a tight loop


async def test_a_transient_failure_is_retried_and_not_cached() -> None:
    api = Api()
    api.failures = [ServiceUnavailable("etcd leader changed", code=503)]
    assert await _auth(api).check(f"Bearer {TOKEN}") is None
    assert api.kinds() == ["TokenReview", "TokenReview", "SubjectAccessReview"]


async def test_a_manager_that_may_not_review_answers_500_and_says_which_role_to_bind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = Api()
    api.failures = [Forbidden("cannot create tokenreviews", code=403)]
    auth = _auth(api)
    refusal = await auth.check(f"Bearer {TOKEN}")
    assert refusal is not None and refusal[0] == 500
    assert "metrics-auth-role" in caplog.text and len(api.calls) == 1
    assert await auth.check(f"Bearer {TOKEN}") is None  # the failure was not cached


@pytest.mark.parametrize(
    "answer",
    [
        {"status": {"authenticated": True}},
        {"status": {"authenticated": True, "user": {"username": ""}}},
        {"status": {"authenticated": True, "user": {"username": "x", "groups": "admins"}}},
        {"status": {"authenticated": True, "user": {"username": "x", "extra": {"k": "v"}}}},
        ["not", "an", "object"],
    ],
)
async def test_a_malformed_token_review_answer_is_500(answer: Any) -> None:
    async def review(body: dict[str, Any]) -> Any:
        return answer

    refusal = await DelegatedAuth(review=review).check(f"Bearer {TOKEN}")
    assert refusal is not None and refusal[0] == 500


@pytest.mark.parametrize(
    "status",
    [
        {"allowed": "true"},
        {"allowed": 1},
        {"allowed": True, "denied": True},
        {},
    ],
)
async def test_only_allowed_true_allows(status: dict[str, Any]) -> None:
    async def review(body: dict[str, Any]) -> Mapping[str, Any]:
        if body["kind"] == "TokenReview":
            return {"status": {"authenticated": True, "user": PROM}}
        return {"status": status}

    refusal = await DelegatedAuth(review=review).check(f"Bearer {TOKEN}")
    assert refusal is not None and refusal[0] == 403


async def test_a_subject_access_review_without_status_is_500() -> None:
    async def review(body: dict[str, Any]) -> Mapping[str, Any]:
        if body["kind"] == "TokenReview":
            return {"status": {"authenticated": True, "user": PROM}}
        return {}

    refusal = await DelegatedAuth(review=review).check(f"Bearer {TOKEN}")
    assert refusal is not None and refusal[0] == 500


async def test_an_unexpected_exception_fails_closed() -> None:
    async def review(body: dict[str, Any]) -> Mapping[str, Any]:
        raise RuntimeError("bug")

    refusal = await DelegatedAuth(review=review).check(f"Bearer {TOKEN}")
    assert refusal is not None and refusal[0] == 500


async def test_a_review_that_hangs_is_503_within_the_timeout() -> None:
    api = Api()
    api.gate = asyncio.Event()  # never set
    t0 = time.monotonic()
    refusal = await _auth(api, timeout=0.2).check(f"Bearer {TOKEN}")
    assert refusal is not None and refusal[0] == 503
    assert time.monotonic() - t0 < 1


async def test_reviews_in_flight_are_bounded() -> None:
    api = Api()
    api.gate = asyncio.Event()
    for i in range(10):
        api.users[f"tok{i}"] = PROM
    auth = _auth(api, max_in_flight=2, timeout=0.3)
    refusals = await asyncio.gather(*(auth.check(f"Bearer tok{i}") for i in range(10)))
    assert len(api.calls) == 2  # the others waited for a turn, and gave up at the deadline
    assert {r[0] for r in refusals if r is not None} == {503}


async def test_the_path_and_verb_are_what_is_authorized() -> None:
    api = Api()
    auth = _auth(api)
    assert await auth.check(f"Bearer {TOKEN}") is None
    refusal = await auth.check(f"Bearer {TOKEN}", path="/metrics/../debug")
    assert refusal is not None and refusal[0] == 403
    assert api.calls[-1]["spec"]["nonResourceAttributes"] == {"path": "/metrics/../debug", "verb": "get"}


async def test_through_a_client_whose_api_server_does_not_serve_reviews_it_fails_closed() -> None:
    client = FakeCluster().client()
    try:
        refusal = await DelegatedAuth(client).check(f"Bearer {TOKEN}")
    finally:
        await client.close()
    assert refusal is not None and refusal[0] == 500


def test_it_needs_exactly_one_way_to_review() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        DelegatedAuth()
    with pytest.raises(ValueError, match="timeout"):
        DelegatedAuth(review=Api().review, timeout=0)


async def test_every_decision_is_counted_by_kind() -> None:
    from prometheus_client import CollectorRegistry

    api = Api()
    registry = CollectorRegistry()
    auth = _auth(api, registry=registry)
    api.users["stranger"] = {"username": "stranger", "groups": []}
    assert await auth.check(f"Bearer {TOKEN}") is None
    assert (await auth.check(None) or (0,))[0] == 401
    assert (await auth.check("Bearer stranger") or (0,))[0] == 403
    assert (await auth.check(["Bearer a", "Bearer b"]) or (0,))[0] == 400
    api.failures.append(RuntimeError("boom"))
    assert (await auth.check("Bearer another") or (0,))[0] == 500

    def count(decision: str) -> float | None:
        return registry.get_sample_value("kubeop_metrics_auth_decisions_total", {"decision": decision})

    assert {
        d: count(d) for d in ("allowed", "unauthenticated", "forbidden", "bad_request", "error")
    } == dict.fromkeys(("allowed", "unauthenticated", "forbidden", "bad_request", "error"), 1.0)
    assert count("unavailable") == 0
