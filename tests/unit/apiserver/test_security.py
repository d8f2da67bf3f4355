"""Only the front proxy's certificate lets X-Remote-* headers in; tokens go through TokenReview;
every request is authorized with a (cached) SubjectAccessReview; everything else is refused."""

from __future__ import annotations

import ssl

import aiohttp
import pytest

from tests.unit.apiserver.conftest import Env
from tests.unit.apiserver.test_http import NS, call, widget


async def test_no_credentials_is_401_and_health_is_open(env: Env) -> None:
    async with env.session(env.plain) as s:
        code, status = await call(s, "GET", env.base + NS)
        assert code == 401 and status["kind"] == "Status"
        code, _ = await call(s, "GET", env.base + "/readyz")
        assert code == 200


async def test_remote_user_headers_without_the_proxy_certificate_are_ignored(env: Env) -> None:
    async with env.session(env.plain, **{"X-Remote-User": "root", "X-Remote-Group": "system:masters"}) as s:
        code, _ = await call(s, "GET", env.base + NS)
        assert code == 401
    assert not env.reviews.calls


async def test_a_certificate_from_another_ca_does_not_connect(env: Env) -> None:
    async with env.session(env.stranger, **{"X-Remote-User": "root"}) as s:
        with pytest.raises((aiohttp.ClientError, ssl.SSLError)):
            await call(s, "GET", env.base + NS)


async def test_the_proxy_without_a_user_is_401(env: Env) -> None:
    async with env.session(env.proxy) as s:
        code, _ = await call(s, "GET", env.base + NS)
        assert code == 401


async def test_rbac_is_a_cached_subject_access_review(env: Env) -> None:
    async with env.as_user("alice") as s:
        assert (await call(s, "POST", env.base + NS, widget("a")))[0] == 201
        code, status = await call(s, "DELETE", env.base + NS + "/a")
        assert code == 403 and status["reason"] == "Forbidden"
        assert 'User "alice" cannot delete resource "widgets"' in status["message"]
        for _ in range(3):
            assert (await call(s, "GET", env.base + NS + "/a"))[0] == 200
    reviews = [c["spec"] for c in env.reviews.calls if c["kind"] == "SubjectAccessReview"]
    gets = [r for r in reviews if r["resourceAttributes"]["verb"] == "get"]
    assert len(gets) == 1  # cached
    assert gets[0]["resourceAttributes"] == {
        "verb": "get",
        "group": "example.com",
        "version": "v1alpha1",
        "resource": "widgets",
        "subresource": "",
        "namespace": "default",
        "name": "a",
    }
    async with env.as_user("bob") as s:
        assert (await call(s, "GET", env.base + NS))[0] == 403
        assert (await call(s, "GET", env.base + "/apis"))[0] == 403


async def test_groups_and_bearer_tokens(env: Env) -> None:
    async with env.as_user("root", "system:masters") as s:
        assert (await call(s, "POST", env.base + NS, widget("a")))[0] == 201
        assert (await call(s, "DELETE", env.base + NS + "/a"))[0] == 200
    async with env.session(env.plain, Authorization="Bearer alice-token") as s:
        assert (await call(s, "GET", env.base + NS))[0] == 200
    async with env.session(env.plain, Authorization="Bearer wrong") as s:
        assert (await call(s, "GET", env.base + NS))[0] == 401
