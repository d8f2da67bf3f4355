"""No secret in the repr() or str() of the kopf layer's objects, nor of the client's credential
holders: every class of kubeop.kopf and kubeop.client with a secret-named field or argument is
built with a known secret (in each of its secret fields) and must not show it."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import importlib
import inspect
import logging
import pkgutil
import re
from collections.abc import Callable
from typing import Any

import pytest

import kubeop.client
import kubeop.kopf
import kubeop.kopf as kopf
from kubeop.client.auth import BasicAuth, Credentials, StaticToken
from kubeop.client.config import ClientConfig
from kubeop.kopf.credentials import Vault

SECRET = "s3cr3t.Zq9-0x7F.kk"
# Names of fields and arguments that may hold a credential.
_SECRET_NAME = re.compile(
    r"token|passw|secret|private_key|key_data|pkey|client_cert|client_key|credential", re.I
)


def assert_clean(text: str) -> None:
    for form in (
        SECRET,
        base64.b64encode(SECRET.encode()).decode(),
        base64.b64encode(b"u:" + SECRET.encode()),
    ):
        assert str(form) not in text, f"secret leaked: {text}"


def info(**fields: Any) -> kopf.ConnectionInfo:
    return kopf.ConnectionInfo(**{"server": "https://h:6443", **fields})


PEM_KEY = f"-----BEGIN PRIVATE KEY-----\n{SECRET}\n-----END PRIVATE KEY-----\n"

# Each secret-bearing class, built with SECRET in each place a secret can go.
BUILDS: dict[type, list[Callable[[], object]]] = {
    kopf.ConnectionInfo: [
        lambda: info(token=SECRET),
        lambda: info(username="u", password=SECRET),
        lambda: info(private_key_data=PEM_KEY, certificate_data="Q0VSVA=="),
        lambda: info(private_key_data=PEM_KEY.encode(), certificate_data=b"-----BEGIN CERTIFICATE-----"),
        lambda: info(private_key_data=base64.b64encode(SECRET.encode()), certificate_data=b"Q0E="),
        lambda: info(scheme=f"Bearer {SECRET}"),
        lambda: info(scheme=f"Bearer\t{SECRET}"),
        lambda: info(scheme=SECRET),  # the whole Authorization header as the scheme
        lambda: info(scheme="Token", token=SECRET),
        lambda: info(server=f"https://u:{SECRET}@h:6443", token=SECRET),
        lambda: info(proxy_url=f"http://u:{SECRET}@proxy:3128"),
        lambda: info(proxy_url=f"http://{SECRET}@proxy:3128"),
    ],
    kopf.WebhookServer: [lambda: kopf.WebhookServer(certfile="/c.pem", pkeyfile="/k.pem", password=SECRET)],
    kopf.WebhookAutoServer: [lambda: kopf.WebhookAutoServer(password=SECRET)],
    kopf.WebhookK3dServer: [lambda: kopf.WebhookK3dServer(password=SECRET)],
    kopf.WebhookMinikubeServer: [lambda: kopf.WebhookMinikubeServer(password=SECRET)],
    kopf.WebhookDockerDesktopServer: [lambda: kopf.WebhookDockerDesktopServer(password=SECRET)],
    kopf.WebhookNgrokTunnel: [lambda: kopf.WebhookNgrokTunnel(token=SECRET)],
    ClientConfig: [
        lambda: ClientConfig(server="https://h", token=SECRET),
        lambda: ClientConfig(server="https://h", username="u", password=SECRET),
        lambda: ClientConfig(server="https://h", client_key_data=SECRET.encode()),
    ],
    Credentials: [
        lambda: Credentials({"Authorization": f"Bearer {SECRET}"}),
        lambda: Credentials({}, (b"-----BEGIN CERTIFICATE-----", SECRET.encode())),
    ],
    StaticToken: [lambda: StaticToken(SECRET)],
    BasicAuth: [lambda: BasicAuth("u", SECRET)],
}


def secret_bearing_classes() -> set[type]:
    """The classes of kubeop.kopf and kubeop.client with a secret-named field or argument."""
    found: set[type] = set()
    for package in (kubeop.kopf, kubeop.client):
        modules = [package] + [
            importlib.import_module(m.name)
            for m in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")
        ]
        for module in modules:
            for cls in vars(module).values():
                if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                    continue
                names = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
                with_init = cls.__init__ is not object.__init__
                if with_init:
                    names |= set(inspect.signature(cls.__init__).parameters)
                if any(_SECRET_NAME.search(name) for name in names):
                    found.add(cls)
    return found


def test_every_secret_bearing_class_is_checked() -> None:
    found = secret_bearing_classes()
    assert kopf.ConnectionInfo in found and ClientConfig in found  # the walk sees them
    missing = sorted(f"{c.__module__}.{c.__qualname__}" for c in found - set(BUILDS))
    assert not missing, f"add these classes to BUILDS (with a secret in each secret field): {missing}"


CASES = [(cls, build) for cls, builds in BUILDS.items() for build in builds]


@pytest.mark.parametrize(
    ("cls", "build"), CASES, ids=[f"{cls.__name__}-{i}" for i, (cls, _) in enumerate(CASES)]
)
def test_repr_and_str_never_show_a_secret(cls: type, build: Callable[[], object]) -> None:
    obj = build()
    assert type(obj) is cls
    assert_clean(repr(obj))
    assert_clean(str(obj))
    assert_clean(f"{obj!s} {obj!r}")


def test_connection_info_shows_what_is_not_secret_and_stays_kopfs_dataclass() -> None:
    full = info(
        token=SECRET,
        scheme="Bearer",
        username="jane",
        certificate_data=b"-----BEGIN CERTIFICATE-----",
        ca_path="/ca.pem",
        proxy_url=f"http://u:{SECRET}@proxy:3128",
        priority=3,
        expiration=dt.datetime(2030, 1, 2, tzinfo=dt.UTC),
    )
    text = repr(full)
    for shown in (
        "server='https://h:6443'",
        "token=<redacted>",
        "scheme='Bearer'",
        "username='jane'",
        "password=None",
        "certificate_data=<27 bytes>",
        "ca_path='/ca.pem'",
        "proxy_url='http://<redacted>@proxy:3128'",
        "priority=3",
        "2030",
    ):
        assert shown in text, text
    assert "scheme='<redacted>'" in repr(info(scheme=SECRET))
    assert "scheme='Bearer <redacted>'" in repr(info(scheme=f"Bearer {SECRET}"))
    # kopf's frozen dataclass: field access, equality, hashing and replace() as before
    assert full.token == SECRET and full.priority == 3
    assert full == dataclasses.replace(full) and hash(full) == hash(dataclasses.replace(full))
    assert dataclasses.replace(full, token="other").token == "other"
    with pytest.raises(dataclasses.FrozenInstanceError):
        full.token = "x"  # type: ignore[misc]
    assert dataclasses.asdict(full)["token"] == SECRET  # the data itself is untouched


async def test_the_vault_never_shows_credentials_nor_a_servers_user_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def login() -> dict[str, kopf.ConnectionInfo]:
        return {}

    vault = Vault(login)
    with caplog.at_level(logging.DEBUG, logger="kubeop.kopf"):
        vault.populate(
            {
                "main": info(token=SECRET, priority=1),
                "other": info(server=f"https://u:{SECRET}@elsewhere:6443", token="t"),
            }
        )
        vault.populate({"later": info(server=f"https://{SECRET}@elsewhere:6443", token="t")})
    assert_clean(repr(vault))
    assert_clean(str(vault))
    assert "elsewhere" in caplog.text and "<redacted>@elsewhere" in caplog.text
    assert_clean(caplog.text)
