"""No secret in repr(), str(), exception messages or logs (hardening issue #12).

Each object that can hold a credential is built with a known secret, and the secret (and its
base64 forms) must not appear in what it prints or in any error raised about it. repr() still
says that a secret is set.
"""

from __future__ import annotations

import base64
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kubeop.client.auth import BasicAuth, Credentials, ExecAuth, NoAuth, StaticToken, TokenFile, auth_for
from kubeop.client.config import ClientConfig, ConfigError, ExecConfig
from kubeop.client.kubeconfig import KubeConfig
from kubeop.core.errors import Unauthorized
from kubeop.core.resource import ApiResource

from .fakeapi import FakeApi, status

# Digits, dots and dashes: no identifier pattern lets it through by accident.
SECRET = "s3cr3t.Zq9-0x7F.kk"
SECRET_B64 = base64.b64encode(SECRET.encode()).decode()


def forms() -> list[str]:
    """The secret as it could leak: itself, base64 of it, base64 of user:secret."""
    return [SECRET, SECRET_B64, base64.b64encode(f"user:{SECRET}".encode()).decode()[4:]]


def assert_clean(text: str) -> None:
    for form in forms():
        assert form not in text, f"secret leaked: {text}"


def assert_shows_redacted(obj: object) -> None:
    text = repr(obj)
    assert_clean(text)
    assert_clean(str(obj))
    assert "<redacted>" in text, text


EXEC = ExecConfig(
    command="kubelogin",
    args=("get-token", "--oidc-client-secret", SECRET, f"--password={SECRET}", "--cluster=prod"),
    env={"CLIENT_SECRET": SECRET},
)

OBJECTS: list[tuple[str, Callable[[], object]]] = [
    ("token", lambda: ClientConfig(server="https://h", token=SECRET)),
    ("password", lambda: ClientConfig(server="https://h", username="user", password=SECRET)),
    ("client key", lambda: ClientConfig(server="https://h", client_key_data=SECRET.encode())),
    (
        "proxy password",
        lambda: ClientConfig(server="https://h", proxy_url=f"http://user:{SECRET}@proxy:3128"),
    ),
    ("proxy user token", lambda: ClientConfig(server="https://h", proxy_url=f"https://{SECRET}@proxy")),
    (
        "extra header",
        lambda: ClientConfig(server="https://h", extra_headers=[("Authorization", f"Bearer {SECRET}")]),
    ),
    ("exec config", lambda: EXEC),
    ("config with exec", lambda: ClientConfig(server="https://h", exec=EXEC)),
    ("credentials", lambda: Credentials({"Authorization": f"Bearer {SECRET}"})),
    ("client cert", lambda: Credentials({}, (b"-----BEGIN CERTIFICATE-----", SECRET.encode()))),
    ("static token", lambda: StaticToken(SECRET)),
    ("basic auth", lambda: BasicAuth("user", SECRET)),
]


@pytest.mark.parametrize(("what", "build"), OBJECTS, ids=[w for w, _ in OBJECTS])
def test_repr_and_str_do_not_show_secrets(what: str, build: Callable[[], object]) -> None:
    assert_shows_redacted(build())


def test_repr_keeps_what_is_not_secret() -> None:
    cfg = ClientConfig(
        server="https://h:6443",
        token=SECRET,
        proxy_url=f"http://user:{SECRET}@proxy:3128",
        extra_headers=[("Impersonate-User", "jane")],
        exec=EXEC,
    )
    text = repr(cfg)
    assert "server='https://h:6443'" in text and "token=<redacted>" in text and "password=None" in text
    assert "proxy_url='http://<redacted>@proxy:3128'" in text and "Impersonate-User" in text
    assert "'--cluster=prod'" in text and "'--password=<redacted>'" in text and "'CLIENT_SECRET'" in text
    assert repr(NoAuth()) == "NoAuth()"
    assert "username='user'" in repr(BasicAuth("user", SECRET))


async def test_authenticators_with_credentials_loaded(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(SECRET)
    file_auth = TokenFile(str(token))
    creds = await file_auth.credentials()
    assert_shows_redacted(creds)
    assert_shows_redacted(file_auth)
    basic = auth_for(ClientConfig(server="https://h", username="user", password=SECRET))
    assert_shows_redacted(await basic.credentials())
    plugin = tmp_path / "p.py"
    plugin.write_text(
        "import json\n"
        "print(json.dumps({'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential',"
        f" 'status': {{'token': {SECRET!r}}}}}))\n"
    )
    exec_auth = ExecAuth(
        ExecConfig(command=sys.executable, args=(str(plugin),), env={"K": SECRET}), cluster={"server": "x"}
    )
    assert_shows_redacted(await exec_auth.credentials())
    assert_shows_redacted(exec_auth)


def test_kubeconfig_objects(tmp_path: Path) -> None:
    doc = {
        "clusters": [{"name": "c", "cluster": {"server": "https://h", "proxy-url": f"http://u:{SECRET}@p"}}],
        "users": [
            {
                "name": "u",
                "user": {
                    "token": SECRET,
                    "password": SECRET,
                    "username": "user",
                    "client-key-data": SECRET_B64,
                    "client-certificate-data": "Q0VSVA==",
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1",
                        "command": "p",
                        "env": [{"name": "X", "value": SECRET}],
                    },
                },
            }
        ],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    kc = KubeConfig.from_dict(doc, path=str(tmp_path / "config"))
    for obj in (kc, kc.users["u"], kc.clusters["c"]):
        assert_clean(repr(obj))
        assert_clean(str(obj))
    assert_shows_redacted(kc.client_config())


# -- errors -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"proxy_url": f"socks5://user:{SECRET}@proxy:1080"}, "socks5://<redacted>@proxy:1080"),
        ({"server": f"ftp://user:{SECRET}@h"}, "not an http(s) URL"),
        (
            {"server": f"https://admin:{SECRET}@h:6443/prefix"},
            "'https://<redacted>@h:6443/prefix' has credentials",
        ),
        ({"extra_headers": [(f"Authorization: Bearer {SECRET}", "")]}, "extra header 'Authorization'"),
        ({"extra_headers": [("Authorization", f"Bearer {SECRET}\r\n")]}, "the value contains CR, LF or NUL"),
        ({"extra_headers": [("Host", SECRET)]}, "'Host' cannot be set"),
        ({"insecure_skip_tls_verify": True, "ca_data": SECRET.encode()}, "insecure flag"),
    ],
)
def test_config_errors_do_not_echo_secrets(options: dict[str, Any], expected: str) -> None:
    options = {"server": "https://h", **options}
    with pytest.raises(ConfigError) as info:
        ClientConfig(**options)
    assert expected in str(info.value)
    assert_clean(str(info.value))


@pytest.mark.parametrize(
    "user",
    [
        {"token": [SECRET]},
        {"token": {SECRET: 1}},
        {"password": [SECRET], "username": "u"},
        {"client-key-data": SECRET + "!!", "client-certificate-data": "Q0E="},
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "p", "args": SECRET}},
        {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1",
                "command": "p",
                "env": [{"name": "A", "value": [SECRET]}],
            }
        },
        {"auth-provider": {"name": "oidc", "config": {"client-secret": SECRET}}},
        {"auth-provider": SECRET},
    ],
)
def test_kubeconfig_errors_do_not_echo_secrets(tmp_path: Path, user: dict[str, Any]) -> None:
    doc = {
        "clusters": [{"name": "c", "cluster": {"server": "https://h"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
    }
    with pytest.raises(ConfigError) as info:
        KubeConfig.from_dict(doc, path=str(tmp_path / "config")).client_config("ctx")
    assert_clean(str(info.value))


def plugin_printing(tmp_path: Path, stdout: str, code: int = 0) -> ExecAuth:
    script = tmp_path / "plugin.py"
    script.write_text(f"import sys\nsys.stdout.write({stdout!r})\nsys.exit({code})\n")
    return ExecAuth(ExecConfig(command=sys.executable, args=(str(script),)), source="kubeconfig K")


def credential(**fields: Any) -> str:
    import json

    doc = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", **fields}
    return json.dumps(doc)


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        (f"token: {SECRET}\n", "not JSON"),
        (f'"{SECRET}"', "not an object"),
        (credential(kind=SECRET, status={"token": SECRET}), "expected ExecCredential"),
        (
            credential(apiVersion=SECRET, status={"token": SECRET}),
            "expected 'client.authentication.k8s.io/v1'",
        ),
        (credential(status=SECRET), "status is not an object"),
        (credential(status={"tokn": SECRET}), "status.token and status.clientCertificateData"),
        (credential(status={"token": [SECRET]}), "status.token is not a string"),
        (credential(status={"clientKeyData": SECRET}), "only one of status.clientCertificateData"),
        (credential(status={"token": SECRET, "expirationTimestamp": SECRET}), "expirationTimestamp is not"),
    ],
)
async def test_plugin_errors_say_what_is_wrong_without_echoing_stdout(
    tmp_path: Path, stdout: str, expected: str, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(ConfigError) as info:
        await plugin_printing(tmp_path, stdout).credentials()
    assert expected in str(info.value) and str(info.value).startswith("kubeconfig K: exec plugin")
    assert_clean(str(info.value))
    assert_clean(caplog.text)


async def test_plugin_failure_does_not_echo_stdout(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        await plugin_printing(tmp_path, credential(status={"token": SECRET}), code=1).credentials()
    assert "exited with status 1" in str(info.value)
    assert_clean(str(info.value))


async def test_expired_credential_is_reported_without_the_token(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stdout = credential(status={"token": SECRET, "expirationTimestamp": "2001-01-01T00:00:00Z"})
    with caplog.at_level(logging.WARNING, logger="kubeop.client"):
        await plugin_printing(tmp_path, stdout).credentials()
    assert "already expired" in caplog.text and "2001-01-01" in caplog.text
    assert_clean(caplog.text)


async def test_unauthorized_error_does_not_carry_the_token(api: FakeApi) -> None:
    async def refuse(request: web.Request) -> web.Response:
        return status(401, "Unauthorized", "Unauthorized")

    api.route("GET", "/api/v1/namespaces/default/configmaps/a", refuse)
    async with api.client(token=SECRET) as client:
        with pytest.raises(Unauthorized) as info:
            await client.get(ApiResource("", "v1", "configmaps", kind="ConfigMap"), "a")
    assert_clean(str(info.value))
    assert_clean(repr(info.value))
    assert_clean(repr(client.transport.config))
