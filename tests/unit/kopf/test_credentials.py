"""kopf's credentials vault on kubeop's client: the login handlers' credentials by priority,
dropped after a 401 (concurrent 401s share one re-login), expired ones dropped before use, and
a clear LoginError when a re-login brings nothing new."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
from collections.abc import Mapping

import pytest

import kubeop.kopf as kopf
from kubeop.client.auth import refresh_after_unauthorized
from kubeop.kopf.credentials import Vault

SERVER = "https://127.0.0.1:6443"


class Logins:
    """A login handler's successive answers; counts the runs."""

    def __init__(self, *answers: Mapping[str, kopf.ConnectionInfo]) -> None:
        self.answers = list(answers)
        self.runs = 0

    async def __call__(self) -> Mapping[str, kopf.ConnectionInfo]:
        self.runs += 1
        await asyncio.sleep(0.01)  # concurrent callers overlap with the run
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


def token(value: str, **more: object) -> kopf.ConnectionInfo:
    return kopf.ConnectionInfo(server=SERVER, token=value, **more)  # type: ignore[arg-type]


async def bearer(vault: Vault) -> str:
    return (await vault.credentials()).headers["Authorization"]


async def test_the_first_request_logs_in_and_the_highest_priority_is_used() -> None:
    logins = Logins({"low": token("a"), "high": token("b", priority=5), "also": token("c", priority=5)})
    vault = Vault(logins)
    assert await bearer(vault) == "Bearer b"
    assert await bearer(vault) == "Bearer b" and logins.runs == 1


async def test_a_401_drops_the_credentials_and_the_next_ones_serve_without_a_login() -> None:
    logins = Logins({"main": token("a", priority=1), "spare": token("b")}, {"main": token("c")})
    vault = Vault(logins)
    used = await vault.credentials()
    assert await refresh_after_unauthorized(vault, used)
    assert await bearer(vault) == "Bearer b" and logins.runs == 1
    assert await refresh_after_unauthorized(vault, await vault.credentials())
    assert await bearer(vault) == "Bearer c" and logins.runs == 2  # none left: logged in again


async def test_concurrent_401s_share_one_re_login() -> None:
    logins = Logins({"login": token("old")}, {"login": token("new")})
    vault = Vault(logins)
    used = await vault.credentials()
    retries = await asyncio.gather(*(refresh_after_unauthorized(vault, used) for _ in range(20)))
    assert all(retries) and logins.runs == 2
    assert await bearer(vault) == "Bearer new"
    # A late 401 for the old token retries with the new one, no third login.
    assert await refresh_after_unauthorized(vault, used) and logins.runs == 2


async def test_a_re_login_with_nothing_new_is_a_clear_error_and_the_next_request_tries_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logins = Logins({"login": token("a")}, {"login": token("a")}, {}, {"login": token("b")})
    vault = Vault(logins)
    used = await vault.credentials()
    with pytest.raises(kopf.LoginError, match="already rejected with 401"):
        await refresh_after_unauthorized(vault, used)
    assert "Re-authentication has failed" in caplog.text
    with pytest.raises(kopf.LoginError, match="returned none"):
        await vault.credentials()
    assert await bearer(vault) == "Bearer b" and logins.runs == 4


async def test_expired_credentials_are_renewed_before_a_request() -> None:
    now = [1000.0]
    at = dt.datetime.fromtimestamp(1010.0, dt.UTC)
    naive = dt.datetime.fromtimestamp(1020.0, dt.UTC).replace(tzinfo=None)  # naive is UTC, as kopf
    logins = Logins({"login": token("a", expiration=at)}, {"login": token("b", expiration=naive)})
    vault = Vault(logins, clock=lambda: now[0])
    assert await bearer(vault) == "Bearer a"
    now[0] = 1009.9
    assert await bearer(vault) == "Bearer a" and logins.runs == 1
    now[0] = 1010.0
    assert await bearer(vault) == "Bearer b" and logins.runs == 2
    now[0] = 1019.0
    assert await bearer(vault) == "Bearer b" and logins.runs == 2


async def test_credentials_for_another_server_are_ignored(caplog: pytest.LogCaptureFixture) -> None:
    other = kopf.ConnectionInfo(server="https://10.0.0.1:6443", token="x")
    logins = Logins({"login": token("a")}, {"login": other, "second": token("b")})
    vault = Vault(logins)
    used = await vault.credentials()
    assert await refresh_after_unauthorized(vault, used)
    assert await bearer(vault) == "Bearer b"
    assert "stays on https://127.0.0.1:6443" in caplog.text


async def test_a_first_login_for_two_servers_never_sends_one_servers_token_to_the_other(
    caplog: pytest.LogCaptureFixture,
) -> None:
    other = kopf.ConnectionInfo(server="https://10.0.0.1:6443", token="for-the-other-only")
    logins = Logins({"main": token("a", priority=10), "other": other}, {"main": token("c", priority=10)})
    vault = Vault(logins)
    used = await vault.credentials()
    assert used.headers["Authorization"] == "Bearer a"
    assert "uses https://127.0.0.1:6443" in caplog.text
    assert await refresh_after_unauthorized(vault, used)  # "a" rejected: never the other server's
    assert await bearer(vault) == "Bearer c" and logins.runs == 2


async def test_basic_auth_schemes_and_client_certificates() -> None:
    basic = kopf.ConnectionInfo(server=SERVER, username="u", password="p")
    assert await bearer(Vault(Logins({"l": basic}))) == "Basic " + base64.b64encode(b"u:p").decode()
    digest = kopf.ConnectionInfo(server=SERVER, scheme="Digest", token="abc")
    assert await bearer(Vault(Logins({"l": digest}))) == "Digest abc"
    pem = b"-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"
    certs = kopf.ConnectionInfo(
        server=SERVER, certificate_data=base64.b64encode(pem).decode(), private_key_data=pem
    )
    creds = await Vault(Logins({"l": certs})).credentials()
    assert creds.headers == {} and creds.client_cert == (pem, pem)
    half = kopf.ConnectionInfo(server=SERVER, certificate_data=pem)
    with pytest.raises(kopf.LoginError, match="private key"):
        await Vault(Logins({"l": half})).credentials()


async def test_a_login_handler_returning_something_else_is_named() -> None:
    vault = Vault(Logins({"odd": "a token"}))  # type: ignore[dict-item]
    with pytest.raises(kopf.LoginError, match="'odd' returned str"):
        await vault.credentials()
