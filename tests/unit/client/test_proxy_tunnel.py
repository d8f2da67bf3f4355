"""Requests through a local forward proxy chosen from the environment (HTTPS_PROXY, HTTP_PROXY,
NO_PROXY) as client-go does: the server is a TLS server on loopback known by a name that only the
proxy resolves, so a request that arrives proves it went through the proxy, by name, with TLS
verified for that name."""

from __future__ import annotations

import asyncio
import base64
import ssl
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubeop.client import ApiConnectionError, Client, ClientConfig, ConfigError, HttpTransport
from kubeop.core.request import ApiRequest
from kubeop.testing.pki import CertificateAuthority

from .forwardproxy import ForwardProxy

_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")

_NAME = "api.example.test"  # resolved by the test proxy only: the client must never look it up


class _Origin:
    """A TLS (or plain) HTTP/1.1 server on loopback answering ``{}``, recording SNI and Host."""

    def __init__(self) -> None:
        self.sni: list[str | None] = []
        self.hosts: list[str] = []
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self, tls: ssl.SSLContext | None) -> None:
        if tls is not None:
            tls.sni_callback = lambda sock, name, ctx: self.sni.append(name)
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=tls)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"host:"):
                        self.hosts.append(line.split(b":", 1)[1].strip().decode())
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()


class _Setup:
    def __init__(self, ca: CertificateAuthority, origin: _Origin, proxy: ForwardProxy) -> None:
        self.ca = ca
        self.origin = origin
        self.proxy = proxy

    def config(self, host: str = _NAME, **options: object) -> ClientConfig:
        return ClientConfig(
            server=f"https://{host}:{self.origin.port}",
            ca_data=self.ca.cert_pem,
            token="t0k",
            max_retries=0,
            connect_timeout=5.0,
            request_timeout=5.0,
            **options,  # type: ignore[arg-type]
        )


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in (*_PROXY_VARS, "REQUEST_METHOD"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
async def setup(clean_env: pytest.MonkeyPatch) -> AsyncIterator[_Setup]:
    ca = CertificateAuthority.create()
    cert, key = ca.issue("api", hosts=[_NAME, "127.0.0.1"], server=True)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "c.pem").write_bytes(cert)
        (Path(tmp) / "k.pem").write_bytes(key)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(Path(tmp) / "c.pem", Path(tmp) / "k.pem")
    origin = _Origin()
    await origin.start(tls)
    proxy = ForwardProxy(
        {_NAME: "127.0.0.1", "127.0.0.1": "127.0.0.1"},
        auth="Basic " + base64.b64encode(b"us er:p@ss").decode(),
    )
    await proxy.start()
    try:
        yield _Setup(ca, origin, proxy)
    finally:
        await proxy.close()
        assert origin.server is not None
        origin.server.close()


async def _get(config: ClientConfig, times: int = 1) -> None:
    async with asyncio.timeout(10):
        transport = HttpTransport(config)
        try:
            for _ in range(times):
                assert await transport.request(ApiRequest("GET", "/api")) == {}
        finally:
            await transport.close()


async def test_https_proxy_from_the_environment_tunnels_to_the_server_by_its_name(
    setup: _Setup, clean_env: pytest.MonkeyPatch
) -> None:
    clean_env.setenv("HTTPS_PROXY", f"http://us%20er:p%40ss@127.0.0.1:{setup.proxy.port}")
    await _get(setup.config(), times=3)
    target = f"{_NAME}:{setup.origin.port}"
    # One tunnel (the connection is kept alive) to the name, never resolved by the client; TLS
    # verified the certificate for that name, which the client also sent as SNI and Host.
    assert setup.proxy.tunnels == [target]
    assert setup.proxy.authorizations == ["Basic " + base64.b64encode(b"us er:p@ss").decode()]
    assert setup.origin.sni == [_NAME] and setup.origin.hosts == [target] * 3


async def test_an_https_proxy_gets_tls_inside_tls(
    setup: _Setup, clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # TLS to the proxy (verified with the system's trust store, here SSL_CERT_FILE), and the
    # server's TLS inside the tunnel.
    cert, key = setup.ca.issue("proxy", hosts=["127.0.0.1"], server=True)
    (tmp_path / "c.pem").write_bytes(cert)
    (tmp_path / "k.pem").write_bytes(key)
    (tmp_path / "ca.pem").write_bytes(setup.ca.cert_pem)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(tmp_path / "c.pem", tmp_path / "k.pem")
    secure = ForwardProxy({_NAME: "127.0.0.1"})
    await secure.start(tls)
    try:
        clean_env.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
        clean_env.setenv("HTTPS_PROXY", f"https://127.0.0.1:{secure.port}")
        await _get(setup.config())
    finally:
        await secure.close()
    assert secure.tunnels == [f"{_NAME}:{setup.origin.port}"] and setup.origin.sni == [_NAME]


async def test_lower_case_https_proxy_and_an_empty_upper_case_one(
    setup: _Setup, clean_env: pytest.MonkeyPatch
) -> None:
    clean_env.setenv("HTTPS_PROXY", "")
    clean_env.setenv("https_proxy", f"http://us%20er:p%40ss@127.0.0.1:{setup.proxy.port}")
    await _get(setup.config())
    assert setup.proxy.tunnels == [f"{_NAME}:{setup.origin.port}"]


async def test_no_proxy_matching_the_server_goes_direct(setup: _Setup, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("HTTPS_PROXY", f"http://us%20er:p%40ss@127.0.0.1:{setup.proxy.port}")
    clean_env.setenv("no_proxy", "internal.example, .example.test")
    with pytest.raises(ApiConnectionError) as e:
        await _get(setup.config())
    # Direct: the client itself looked the name up (and failed), the proxy saw nothing.
    assert setup.proxy.tunnels == [] and setup.proxy.authorizations == []
    assert f"cannot connect to API server https://{_NAME}:{setup.origin.port}" in str(e.value)
    assert "through proxy" not in str(e.value)


async def test_a_loopback_server_is_never_proxied(setup: _Setup, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("HTTPS_PROXY", f"http://us%20er:p%40ss@127.0.0.1:{setup.proxy.port}")
    await _get(setup.config("127.0.0.1"))
    assert setup.proxy.authorizations == [] and setup.origin.hosts == [f"127.0.0.1:{setup.origin.port}"]


async def test_proxy_url_wins_over_the_environment(setup: _Setup, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # would fail: nothing listens there
    clean_env.setenv("NO_PROXY", "*")  # does not apply to proxy-url
    url = f"http://us%20er:p%40ss@127.0.0.1:{setup.proxy.port}"
    await _get(setup.config(proxy_url=url))
    await _get(setup.config("127.0.0.1", proxy_url=url))  # loopback too: client-go's http.ProxyURL
    assert setup.proxy.tunnels == [f"{_NAME}:{setup.origin.port}", f"127.0.0.1:{setup.origin.port}"]


async def test_http_proxy_relays_requests_to_an_http_server(clean_env: pytest.MonkeyPatch) -> None:
    origin = _Origin()
    await origin.start(None)
    proxy = ForwardProxy({_NAME: "127.0.0.1"})
    await proxy.start()
    try:
        clean_env.setenv("HTTP_PROXY", f"127.0.0.1:{proxy.port}")  # no scheme: http
        clean_env.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # not for an http server
        await _get(ClientConfig(server=f"http://{_NAME}:{origin.port}", max_retries=0, request_timeout=5.0))
    finally:
        await proxy.close()
        assert origin.server is not None
        origin.server.close()
    assert proxy.relayed == [f"GET http://{_NAME}:{origin.port}/api HTTP/1.1"] and proxy.tunnels == []


async def test_a_proxy_refusing_the_credentials_is_a_clear_error_without_them(
    setup: _Setup, clean_env: pytest.MonkeyPatch
) -> None:
    clean_env.setenv("HTTPS_PROXY", f"http://us%20er:hunter2@127.0.0.1:{setup.proxy.port}")
    with pytest.raises(ApiConnectionError) as e:
        await _get(setup.config())
    text = str(e.value)
    assert "407 (Proxy Authentication Required)" in text
    assert f"through proxy http://<redacted>@127.0.0.1:{setup.proxy.port} (from HTTPS_PROXY)" in text
    assert "hunter2" not in text and "us%20er" not in text


async def test_a_malformed_variable_fails_the_client_at_creation(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("https_proxy", "http://user:hunter2@proxy.corp:31 28")
    with pytest.raises(ConfigError, match=r"^environment variable https_proxy ") as e:
        Client(ClientConfig(server=f"https://{_NAME}:6443"))
    assert "hunter2" not in str(e.value)
