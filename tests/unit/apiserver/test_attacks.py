"""An adversarial review of the aggregated API server's boundary: each test is one way round
authentication, authorization or the input checks, and what the server must answer."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import orjson
import pytest

from kubeop.apiserver.auth import Authenticator, Authorizer, RequestHeaderConfig, User
from kubeop.apiserver.handlers import Attributes
from kubeop.apiserver.status import StatusError
from kubeop.client.httpserver import HttpServer, Request, Response, Route
from kubeop.core.errors import ApiError
from tests.unit.apiserver.conftest import Env
from tests.unit.apiserver.test_http import NS, call, widget

ITEM = NS + "/a"


# -- authentication ------------------------------------------------------------------------


async def test_a_token_caller_cannot_add_groups_or_a_user_with_remote_headers(env: Env) -> None:
    headers = {
        "Authorization": "Bearer alice-token",
        "X-Remote-User": "root",
        "X-Remote-Group": "system:masters",
        "X-Remote-Extra-Scopes": "all",
    }
    async with env.session(env.plain, **headers) as s:
        assert (await call(s, "POST", env.base + NS, widget("a")))[0] == 201
        code, status = await call(s, "DELETE", env.base + ITEM)
        assert code == 403 and 'User "alice"' in status["message"]
    reviews = [c["spec"] for c in env.reviews.calls if c["kind"] == "SubjectAccessReview"]
    assert {r["user"] for r in reviews} == {"alice"}
    assert all("system:masters" not in r["groups"] and "extra" not in r for r in reviews)


def _proxied(cn: str, *headers: tuple[str, str]) -> Request:
    fields: dict[str, str] = {}
    repeated: dict[str, list[str]] = {}
    for key, value in headers:  # repeated headers joined, and kept apart, as the HTTP core does
        key = key.lower()
        if key in fields:
            repeated.setdefault(key, [fields[key]]).append(value)
            fields[key] = f"{fields[key]}, {value}"
        else:
            fields[key] = value
    cert = {"subject": ((("commonName", cn),),)}
    route = Route(_nothing)
    return Request("GET", "/apis", fields, {k: k for k in fields}, route, ("127.0.0.1", 1), cert, repeated)


async def _nothing(request: Request) -> Response:
    return Response(200)


async def test_a_proxy_certificate_with_a_name_not_allowed_is_401() -> None:
    auth = Authenticator(RequestHeaderConfig("CA", ("front-proxy-client",)), None)
    with pytest.raises(StatusError) as caught:
        await auth.authenticate(_proxied("mallory", ("X-Remote-User", "root")))
    assert caught.value.code == 401
    user = await auth.authenticate(_proxied("front-proxy-client", ("X-Remote-User", "alice")))
    assert user.name == "alice"


async def test_the_front_proxys_user_header_sent_twice_is_refused() -> None:
    auth = Authenticator(RequestHeaderConfig("CA", ("front-proxy-client",)), None)
    with pytest.raises(StatusError) as caught:
        await auth.authenticate(
            _proxied("front-proxy-client", ("X-Remote-User", "bob"), ("X-Remote-User", "root"))
        )
    assert caught.value.code == 401


async def test_a_group_is_one_header_line_and_a_comma_in_its_name_never_makes_two() -> None:
    auth = Authenticator(RequestHeaderConfig("CA", ("front-proxy-client",)), None)
    user = await auth.authenticate(
        _proxied(
            "front-proxy-client",
            ("X-Remote-User", "alice"),
            ("X-Remote-Group", "devs,system:masters"),  # one group, named so by an identity provider
            ("X-Remote-Group", "ops"),
            ("X-Remote-Extra-Scopes", "read,write"),
            ("X-Remote-Extra-Scopes", "admin"),
        )
    )
    assert "system:masters" not in user.groups
    assert set(user.groups) >= {"devs,system:masters", "ops"}
    assert dict(user.extra) == {"scopes": ("read,write", "admin")}


async def test_the_http_core_keeps_each_line_of_a_repeated_header() -> None:
    seen: list[tuple[list[str], str | None, list[str]]] = []

    async def record(request: Request) -> Response:
        seen.append((request.header_values("X-Remote-Group"), request.header("x-remote-group"),
                     request.header_values("X-Absent")))  # fmt: skip
        return Response(200)

    server = HttpServer(lambda path: Route(record), "127.0.0.1", 0, name="t", log=logging.getLogger("t"))
    await server.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(
            b"GET / HTTP/1.1\r\nHost: x\r\nX-Remote-Group: a,b\r\nx-remote-group: c\r\n"
            b"Connection: close\r\n\r\n"
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        assert head.startswith(b"HTTP/1.1 200")
    finally:
        await server.stop()
    assert seen == [(["a,b", "c"], "a,b, c", [])]


async def test_a_token_review_that_fails_is_503_never_a_user(env: Env) -> None:
    async def broken(body: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("the API server answered something odd")

    auth = Authenticator(env.server._authn.config, broken)  # type: ignore[union-attr]
    env.server._authn = auth
    async with env.session(env.plain, Authorization="Bearer alice-token") as s:
        code, status = await call(s, "GET", env.base + NS)
        assert code == 503 and status["kind"] == "Status"


@pytest.mark.parametrize(
    "answer",
    [
        None,
        [],
        {"status": None},
        {"status": {"allowed": "true"}},
        {"status": {"allowed": True, "denied": True}},
        {"status": []},
    ],
)
async def test_a_subject_access_review_answered_oddly_denies(answer: Any) -> None:
    async def review(body: dict[str, Any]) -> Any:
        return answer

    authz = Authorizer(review)
    with pytest.raises(StatusError) as caught:
        await authz.authorize(User("alice"), Attributes("get", "/x", "g", "v", "widgets"))
    assert caught.value.code in (403, 503)


@pytest.mark.parametrize(
    "error",
    [RuntimeError("boom"), ApiError("etcd down", code=500, reason="InternalError"), TimeoutError()],
)
async def test_a_subject_access_review_that_fails_is_503(error: BaseException) -> None:
    async def review(body: dict[str, Any]) -> Any:
        raise error

    authz = Authorizer(review)
    with pytest.raises(StatusError) as caught:
        await authz.authorize(User("alice"), Attributes("get", "/x", "g", "v", "widgets"))
    assert caught.value.code == 503


async def test_the_access_cache_is_keyed_on_every_attribute() -> None:
    calls: list[dict[str, Any]] = []

    async def review(body: dict[str, Any]) -> Any:
        calls.append(body["spec"])
        return {"status": {"allowed": body["spec"]["user"] == "alice" and body["spec"].get("extra") is None}}

    authz = Authorizer(review)
    base = Attributes("get", "/p", "g", "v", "widgets", "", "ns", "a")
    await authz.authorize(User("alice"), base)
    variants = [
        (User("bob"), base),
        (User("alice", groups=("x",)), base),
        (User("alice", extra=(("scopes", ("x",)),)), base),
        (User("alice", uid="u2"), base),
    ]
    for field_ in ("verb", "group", "version", "resource", "subresource", "namespace", "name"):
        from dataclasses import replace

        variants.append((User("alice"), replace(base, **{field_: "other"})))
    for user, attrs in variants:
        before = len(calls)
        with contextlib.suppress(StatusError):
            await authz.authorize(user, attrs)
        assert len(calls) == before + 1, (user, attrs)


# -- input -----------------------------------------------------------------------------------


async def test_deeply_nested_json_is_400(env: Env) -> None:
    async with env.as_user("alice") as s:
        body = b'{"apiVersion":"example.com/v1alpha1","kind":"Widget","metadata":{"name":"a"},"spec":'
        body += b"[" * 100_000 + b"]" * 100_000 + b"}"
        code, status = await call(s, "POST", env.base + NS, body)
        assert code == 400 and status["kind"] == "Status"


async def test_a_huge_label_selector_is_refused(env: Env) -> None:
    async with env.as_user("alice") as s:
        selector = ",".join(f"k{i}=v" for i in range(2000))
        code, status = await call(s, "GET", env.base + NS, params={"labelSelector": selector})
        assert code in (400, 414) and status["kind"] == "Status"


@pytest.mark.parametrize(
    "name",
    ["a%0d%0aX-Injected:%20yes", "..", "%2e%2e", "a%2fb", "A", "a_b", "a%00", "-a", "x" * 254, "%e2%80%a8"],
)
async def test_bad_names_in_the_path_are_refused(env: Env, name: str) -> None:
    async with env.as_user("alice") as s, s.get(env.base + NS + "/" + name) as r:
        assert r.status in (400, 404, 422), name
        assert "X-Injected" not in r.headers
        status = orjson.loads(await r.read())
        assert status["kind"] == "Status"


@pytest.mark.parametrize("name", ["..", "a/b", "a\r\nb", "A", "x" * 254, ""])
async def test_bad_names_in_the_body_are_422(env: Env, name: str) -> None:
    async with env.as_user("alice") as s:
        code, status = await call(s, "POST", env.base + NS, widget(name))
        assert code == 422 and status["reason"] == "Invalid", (name, status)
        assert "\n" not in status["message"]


async def test_the_body_namespace_must_match_the_path(env: Env) -> None:
    async with env.as_user("alice") as s:
        body = widget("a")
        body["metadata"]["namespace"] = "kube-system"
        code, _ = await call(s, "POST", env.base + NS, body)
        assert code == 400
        assert (await call(s, "POST", env.base + NS, widget("a")))[0] == 201
        body = (await call(s, "GET", env.base + ITEM))[1]
        body["metadata"]["namespace"] = "kube-system"
        body["spec"]["size"] = 5
        code, status = await call(s, "PUT", env.base + ITEM, body)
        assert code == 400 and "namespace" in status["message"]  # as kube-apiserver
        code, _ = await call(s, "GET", env.base.replace(NS, "") + NS.replace("default", "kube-system") + "/a")
        assert code == 404  # nothing was written to the other namespace


async def test_server_owned_metadata_is_the_servers(env: Env) -> None:
    async with env.as_user("alice") as s:
        body = widget("a")
        body["metadata"].update(uid="forged", creationTimestamp="2000-01-01T00:00:00Z", generation=99)
        code, made = await call(s, "POST", env.base + NS, body)
        assert code == 201
        meta = dict(made["metadata"])
        assert meta["uid"] != "forged" and meta["generation"] == 1
        assert not meta["creationTimestamp"].startswith("2000")
        body = widget("b")
        body["metadata"]["resourceVersion"] = "1"
        assert (await call(s, "POST", env.base + NS, body))[0] in (400, 422)
        forged = orjson.loads(orjson.dumps(made))
        forged["metadata"]["uid"] = "forged2"
        code, status = await call(s, "PUT", env.base + ITEM, forged)
        assert code == 409 and "UID" in status["message"]  # another object's uid: a precondition
        made["metadata"].update(creationTimestamp="2000-01-01T00:00:00Z", generation=7)
        code, _updated = await call(s, "PUT", env.base + ITEM, made)
        assert code == 200
        current = (await call(s, "GET", env.base + ITEM))[1]["metadata"]
        assert current["uid"] == meta["uid"] and current["generation"] == 1
        assert current["creationTimestamp"] == meta["creationTimestamp"]


async def test_concurrent_updates_of_one_version_succeed_once(env: Env) -> None:
    async with env.as_user("alice") as s:
        assert (await call(s, "POST", env.base + NS, widget("a")))[0] == 201
        current = (await call(s, "GET", env.base + ITEM))[1]

        async def update(size: int) -> int:
            body = orjson.loads(orjson.dumps(current))
            body["spec"]["size"] = size
            return (await call(s, "PUT", env.base + ITEM, body))[0]

        codes = await asyncio.gather(*(update(n) for n in range(2, 12)))
        assert sorted(codes) == [200] + [409] * 9


async def test_forged_continue_tokens_are_400_or_410(env: Env) -> None:
    import base64

    async with env.as_user("alice") as s:
        for name in ("a", "b", "c"):
            assert (await call(s, "POST", env.base + NS, widget(name)))[0] == 201
        forged = [
            "garbage!!",
            base64.urlsafe_b64encode(b'{"v": 999999, "ns": "default", "name": "a"}').decode(),
            base64.urlsafe_b64encode(b'{"v": -1, "ns": "default", "name": "a"}').decode(),
            base64.urlsafe_b64encode(b'{"v": true, "ns": "default", "name": "a"}').decode(),
            base64.urlsafe_b64encode(b"[1, 2]").decode(),
        ]
        for token in forged:
            code, status = await call(s, "GET", env.base + NS, params={"limit": "1", "continue": token})
            assert code in (400, 410) and status["kind"] == "Status", (token, code)


async def test_a_watch_from_a_future_version_is_not_served_as_now(env: Env) -> None:
    async with env.as_user("alice") as s:
        assert (await call(s, "POST", env.base + NS, widget("a")))[0] == 201
        params = {"watch": "true", "resourceVersion": "999999", "timeoutSeconds": "2"}
        async with s.get(env.base + NS, params=params) as r:
            raw = await asyncio.wait_for(r.read(), 10)
        events = [orjson.loads(line) for line in raw.splitlines() if line.strip()]
        assert r.status != 200 or (events and events[0]["type"] == "ERROR"), events


async def test_a_failed_token_review_is_not_remembered(env: Env) -> None:
    failures = [RuntimeError("the API server is restarting")]
    reviews = env.reviews

    async def flaky(body: dict[str, Any]) -> Any:
        if failures:
            raise failures.pop()
        return await reviews(body)

    env.server._authn = Authenticator(env.server._authn.config, flaky)  # type: ignore[union-attr]
    async with env.session(env.plain, Authorization="Bearer alice-token") as s:
        assert (await call(s, "GET", env.base + NS))[0] == 503
        assert (await call(s, "GET", env.base + NS))[0] == 200


async def test_a_huge_token_is_refused_unreviewed(env: Env) -> None:
    async with env.session(env.plain, Authorization="Bearer " + "a" * 20_000) as s:
        code, _ = await call(s, "GET", env.base + NS)
        assert code in (401, 431)
    assert not env.reviews.calls


async def test_a_slow_head_is_cut_off(env: Env) -> None:
    ctx = env.plain
    reader, writer = await asyncio.open_connection("127.0.0.1", env.server.port, ssl=ctx)
    try:
        writer.write(b"GET /apis HTTP/1.1\r\nHost: x\r\n")  # and then nothing
        await writer.drain()
        async with asyncio.timeout(env.server._limits.header_timeout + 5):
            answer = await reader.read()
    finally:
        writer.close()
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408")


async def test_an_exact_list_at_a_future_version_is_too_large_not_expired(env: Env) -> None:
    async with env.as_user("alice") as s:
        assert (await call(s, "POST", env.base + NS, widget("a")))[0] == 201
        params = {"resourceVersion": "999999", "resourceVersionMatch": "Exact"}
        code, status = await call(s, "GET", env.base + NS, params=params)
        assert code == 504 and "Too large resource version" in status["message"]


async def test_concurrent_creates_of_one_name_succeed_once(env: Env) -> None:
    async with env.as_user("root", "system:masters") as s:
        codes = await asyncio.gather(*(call(s, "POST", env.base + NS, widget("a", n)) for n in range(10)))
        assert sorted(code for code, _ in codes) == [201] + [409] * 9
        codes = await asyncio.gather(*(call(s, "DELETE", env.base + ITEM) for _ in range(10)))
        assert sorted(code for code, _ in codes) == [200] + [404] * 9


async def test_an_apply_that_creates_needs_create_not_only_patch(env: Env) -> None:
    apply = "application/apply-patch+yaml"
    config = widget("a")
    async with env.as_user("dora") as s:  # may get, list, watch and patch; not create
        assert (await call(s, "POST", env.base + NS, widget("b")))[0] == 403
        code, status = await call(s, "PATCH", env.base + ITEM + "?fieldManager=dora", config, apply)
        assert code == 403 and "create" in status["message"], status
        assert (await call(s, "GET", env.base + ITEM))[0] == 404  # nothing was made
    async with env.as_user("alice") as s:
        assert (await call(s, "POST", env.base + NS, widget("a")))[0] == 201
    async with env.as_user("dora") as s:  # an apply to an object that exists is a patch
        config["spec"]["size"] = 9
        code, out = await call(s, "PATCH", env.base + ITEM + "?fieldManager=dora&force=true", config, apply)
        assert code == 200 and out["spec"]["size"] == 9, out


async def test_a_delete_collection_with_dry_run_in_its_body_deletes_nothing(env: Env) -> None:
    async with env.session(env.proxy, **{"X-Remote-User": "root", "X-Remote-Group": "system:masters"}) as s:
        for name in ("a", "b"):
            assert (await call(s, "POST", env.base + NS, widget(name)))[0] == 201
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "dryRun": ["All"]}  # as client-go sends it
        code, out = await call(s, "DELETE", env.base + NS, options)
        assert code == 200 and len(out["items"]) == 2  # the answer is as if
        assert len((await call(s, "GET", env.base + NS))[1]["items"]) == 2  # and nothing is gone
        code, _ = await call(s, "DELETE", env.base + NS, {"dryRun": ["Some"]})
        assert code == 400
        assert len((await call(s, "GET", env.base + NS))[1]["items"]) == 2
