"""Authenticators (token file rotation, exec plugins with caching and refresh) and TLS set-up."""

from __future__ import annotations

import datetime
import ssl
import sys
from pathlib import Path

import orjson
import pytest

from kubeop.client.auth import BasicAuth, ExecAuth, NoAuth, StaticToken, TokenFile, auth_for
from kubeop.client.config import ClientConfig, ConfigError, ExecConfig
from kubeop.client.tls import ssl_context

from .certs import self_signed

PLUGIN = """\
import json, os, sys, pathlib
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
counter = pathlib.Path(sys.argv[1])
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
mode = sys.argv[2]
status = {"token": f"token-{n}"}
if mode == "expiring":
    status["expirationTimestamp"] = sys.argv[3]
if mode == "fail":
    print("login required", file=sys.stderr)
    sys.exit(3)
if mode == "garbage":
    print("hello")
    sys.exit(0)
if mode == "cluster":
    status["token"] = info["spec"]["cluster"]["server"] + "|" + os.environ.get("EXTRA", "")
print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": status}))
"""


def plugin(
    tmp_path: Path, mode: str, *extra: str, api_version: str = "client.authentication.k8s.io/v1"
) -> ExecConfig:
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN)
    return ExecConfig(
        command=sys.executable,
        args=(str(script), str(tmp_path / "count"), mode, *extra),
        api_version=api_version,
        env={"EXTRA": "x"},
        provide_cluster_info=True,
        install_hint="install the plugin with: make plugin",
    )


async def test_exec_caches_until_refresh(tmp_path: Path) -> None:
    auth = ExecAuth(plugin(tmp_path, "static"))
    first = await auth.credentials()
    assert first.headers == {"Authorization": "Bearer token-1"}
    assert await auth.credentials() is first  # no expiry: cached
    assert await auth.refresh()
    assert (await auth.credentials()).headers == {"Authorization": "Bearer token-2"}
    assert auth.runs == 2


async def test_exec_honours_expiration(tmp_path: Path) -> None:
    now = [1000.0]
    stamp = datetime.datetime.fromtimestamp(1060, datetime.UTC).isoformat().replace("+00:00", "Z")
    auth = ExecAuth(
        plugin(tmp_path, "expiring", stamp, api_version="client.authentication.k8s.io/v1beta1"),
        clock=lambda: now[0],
    )
    assert (await auth.credentials()).headers["Authorization"] == "Bearer token-1"
    now[0] = 1059.0
    assert (await auth.credentials()).headers["Authorization"] == "Bearer token-1"
    now[0] = 1061.0
    assert (await auth.credentials()).headers["Authorization"] == "Bearer token-2"


async def test_exec_concurrent_callers_share_one_run(tmp_path: Path) -> None:
    import asyncio

    auth = ExecAuth(plugin(tmp_path, "static"))
    results = await asyncio.gather(*(auth.credentials() for _ in range(5)))
    assert {r.headers["Authorization"] for r in results} == {"Bearer token-1"}
    assert auth.runs == 1


async def test_exec_gets_cluster_info_and_env(tmp_path: Path) -> None:
    cfg = ClientConfig(server="https://127.0.0.1:6443", exec=plugin(tmp_path, "cluster"))
    auth = auth_for(cfg)
    assert isinstance(auth, ExecAuth)
    assert (await auth.credentials()).headers["Authorization"] == "Bearer https://127.0.0.1:6443|x"


async def test_exec_failures_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="exited with status 3: login required"):
        await ExecAuth(plugin(tmp_path, "fail"), source="kubeconfig X").credentials()
    with pytest.raises(ConfigError, match="not JSON"):
        await ExecAuth(plugin(tmp_path, "garbage")).credentials()
    missing = ExecConfig(command=str(tmp_path / "no-such-plugin"), install_hint="brew install it")
    with pytest.raises(ConfigError, match=r"cannot be started.*brew install it"):
        await ExecAuth(missing).credentials()
    with pytest.raises(ConfigError, match="interactive"):
        await ExecAuth(ExecConfig(command="x", interactive_mode="Always")).credentials()


async def test_exec_returns_client_certificates(tmp_path: Path) -> None:
    cert, key = self_signed("exec-user")
    script = tmp_path / "p.py"
    script.write_text(
        "import json\n"
        f"print(json.dumps({{'apiVersion': 'client.authentication.k8s.io/v1', 'kind': 'ExecCredential', "
        f"'status': {{'clientCertificateData': {cert.decode()!r}, 'clientKeyData': {key.decode()!r}}}}}))\n"
    )
    auth = ExecAuth(ExecConfig(command=sys.executable, args=(str(script),)))
    creds = await auth.credentials()
    assert creds.headers == {} and creds.client_cert == (cert, key)
    ssl_context(ClientConfig(server="https://h"), creds.client_cert)  # loads


async def test_token_file_rotation(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one\n")
    now = [0.0]
    auth = TokenFile(str(token), clock=lambda: now[0])
    assert (await auth.credentials()).headers["Authorization"] == "Bearer one"
    token.write_text("two")
    assert (await auth.credentials()).headers["Authorization"] == "Bearer one"  # cached for a minute
    now[0] = 61
    assert (await auth.credentials()).headers["Authorization"] == "Bearer two"
    token.write_text("three")
    assert await auth.refresh()  # after a 401: re-read right away
    assert (await auth.credentials()).headers["Authorization"] == "Bearer three"
    assert not await auth.refresh()  # unchanged: retrying would not help


async def test_simple_authenticators() -> None:
    assert (await StaticToken("t").credentials()).headers == {"Authorization": "Bearer t"}
    assert (await BasicAuth("a", "b").credentials()).headers == {"Authorization": "Basic YTpi"}
    assert (await NoAuth().credentials()).headers == {}
    assert isinstance(auth_for(ClientConfig(server="https://h", token="t", token_file="f")), StaticToken)
    assert isinstance(auth_for(ClientConfig(server="https://h", token_file="f")), TokenFile)
    assert isinstance(auth_for(ClientConfig(server="https://h", username="a")), BasicAuth)
    assert isinstance(auth_for(ClientConfig(server="https://h")), NoAuth)


def test_tls_context_inline_and_files(tmp_path: Path) -> None:
    ca, _ = self_signed("ca", ca=True)
    cert, key = self_signed("user")
    ctx = ssl_context(
        ClientConfig(server="https://h", ca_data=ca, client_cert_data=cert, client_key_data=key)
    )
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert len(ctx.get_ca_certs()) == 1
    (tmp_path / "ca.crt").write_bytes(ca)
    (tmp_path / "u.crt").write_bytes(cert)
    (tmp_path / "u.key").write_bytes(key)
    ssl_context(
        ClientConfig(
            server="https://h",
            ca_file=str(tmp_path / "ca.crt"),
            client_cert_file=str(tmp_path / "u.crt"),
            client_key_file=str(tmp_path / "u.key"),
        )
    )
    insecure = ssl_context(ClientConfig(server="https://h", insecure_skip_tls_verify=True))
    assert insecure.verify_mode == ssl.CERT_NONE and not insecure.check_hostname


def test_tls_errors_name_the_source(tmp_path: Path) -> None:
    cert, key = self_signed("old-user", expired=True)
    with pytest.raises(ConfigError, match=r"kubeconfig K: the client certificate \(CN=old-user\) expired at"):
        ssl_context(
            ClientConfig(
                server="https://h", client_cert_data=cert, client_key_data=key, source="kubeconfig K"
            )
        )
    other_cert, _ = self_signed("a")
    _, other_key = self_signed("b")
    with pytest.raises(ConfigError, match="do not load"):
        ssl_context(ClientConfig(server="https://h", client_cert_data=other_cert, client_key_data=other_key))
    with pytest.raises(ConfigError, match="cannot read certificate-authority"):
        ssl_context(ClientConfig(server="https://h", ca_file=str(tmp_path / "missing.crt")))
    with pytest.raises(ConfigError, match="not valid PEM"):
        ssl_context(
            ClientConfig(
                server="https://h", ca_data=b"-----BEGIN CERTIFICATE-----\nxx\n-----END CERTIFICATE-----\n"
            )
        )


def test_exec_info_shape(tmp_path: Path) -> None:
    auth = ExecAuth(plugin(tmp_path, "static"), cluster={"server": "https://s"})
    assert orjson.loads(auth._exec_info()) == {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "spec": {"interactive": False, "cluster": {"server": "https://s"}},
    }


@pytest.mark.parametrize(
    "validity",
    [
        # UTCTime (before 2050) and GeneralizedTime (from 2050 on), as RFC 5280 encodes them
        (datetime.datetime(2020, 1, 2, 3, 4, 5), datetime.datetime(2049, 12, 31, 23, 59, 59)),
        (datetime.datetime(1999, 6, 1, 0, 0, 0), datetime.datetime(2061, 7, 8, 9, 10, 11)),
    ],
)
def test_cert_validity_is_read_without_cryptography_objects(
    validity: tuple[datetime.datetime, datetime.datetime],
) -> None:
    from kubeop.client.tls import _cert_validity

    utc = tuple(t.replace(tzinfo=datetime.UTC) for t in validity)
    cert, _ = self_signed("dates", validity=(utc[0], utc[1]))
    assert _cert_validity(cert) == utc
    assert _cert_validity(b"junk before\n" + cert + cert) == utc  # the first certificate counts
    with pytest.raises(ValueError):
        _cert_validity(cert.replace(b"CERTIFICATE", b"PRIVATE KEY"))
    with pytest.raises(ValueError):
        _cert_validity(b"-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n")


def test_bad_client_certs_are_still_explained() -> None:
    now = datetime.datetime.now(datetime.UTC)
    cert, key = self_signed(
        "later", validity=(now + datetime.timedelta(days=1), now + datetime.timedelta(days=2))
    )
    with pytest.raises(ConfigError, match="kubeconfig K: the client certificate is not valid before"):
        ssl_context(
            ClientConfig(
                server="https://h", client_cert_data=cert, client_key_data=key, source="kubeconfig K"
            )
        )
    _, key = self_signed()
    garbage = b"-----BEGIN CERTIFICATE-----\nMAA=\n-----END CERTIFICATE-----\n"
    with pytest.raises(ConfigError, match="not a valid PEM certificate"):
        ssl_context(ClientConfig(server="https://h", client_cert_data=garbage, client_key_data=key))


def test_valid_client_cert_does_not_import_cryptography(tmp_path: Path) -> None:
    """cryptography (~8 MB RSS) is only for explaining a rejected certificate."""
    import subprocess

    cert, key = self_signed("user")
    (tmp_path / "u.crt").write_bytes(cert)
    (tmp_path / "u.key").write_bytes(key)
    code = (
        "import sys\n"
        "from kubeop.client.config import ClientConfig\n"
        "from kubeop.client.tls import ssl_context\n"
        f"ssl_context(ClientConfig(server='https://h', client_cert_file={str(tmp_path / 'u.crt')!r},"
        f" client_key_file={str(tmp_path / 'u.key')!r}))\n"
        "sys.exit('cryptography' in sys.modules)\n"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
