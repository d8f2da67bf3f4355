"""The client behind a proxy from the environment, on the real control plane.

The control plane listens on loopback, which a proxy from the environment never carries (Go's
rule). So the kubeconfig names the server ``kubernetes.default.svc``, one of the names in its
serving certificate that does not resolve here: only the test's forward proxy knows it (and maps it
to the real address). A request that succeeds went through the proxy by that name, and TLS
verified the certificate for it.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from kubeop.client import ApiConnectionError, Client, load_kubeconfig
from tests.unit.client.forwardproxy import ForwardProxy

pytestmark = pytest.mark.controlplane

_NAME = "kubernetes.default.svc"
_PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy")


def _renamed(kubeconfig_path: str, directory: Path) -> tuple[str, str, int]:
    """A copy of the kubeconfig whose server is ``_NAME``; with the real host and port."""
    config: dict[str, Any] = yaml.safe_load(Path(kubeconfig_path).read_text())
    context = next(c for c in config["contexts"] if c["name"] == config["current-context"])["context"]
    cluster = next(c for c in config["clusters"] if c["name"] == context["cluster"])["cluster"]
    real = urlsplit(cluster["server"])
    assert real.hostname and real.port and real.scheme == "https"
    cluster["server"] = f"https://{_NAME}:{real.port}"
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path), real.hostname, real.port


@pytest.fixture
async def proxy(kubeconfig_path: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ForwardProxy]:
    for name in (*_PROXY_VARS, "REQUEST_METHOD"):
        monkeypatch.delenv(name, raising=False)
    real_host = urlsplit(load_kubeconfig(kubeconfig_path).server).hostname or ""
    forward = ForwardProxy({_NAME: real_host}, auth="Basic " + base64.b64encode(b"alice:s3cr:t").decode())
    await forward.start()
    try:
        yield forward
    finally:
        await forward.close()


def _configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": "v"}}


async def test_requests_and_watches_go_through_https_proxy_by_the_server_name(
    kubeconfig_path: str,
    namespace: str,
    tmp_path: Path,
    proxy: ForwardProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, _, port = _renamed(kubeconfig_path, tmp_path)
    monkeypatch.setenv("HTTPS_PROXY", f"http://alice:s3cr%3At@127.0.0.1:{proxy.port}")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1,.example")  # does not match the server
    async with asyncio.timeout(60), Client(load_kubeconfig(path, namespace=namespace, qps=None)) as client:
        await client.create(_configmap("through"))
        assert (await client.get("configmaps", "through"))["data"] == {"k": "v"}
        listed = await client.list("configmaps")
        assert "through" in [item["metadata"]["name"] for item in listed.items]
        seen = []
        async for event in client.watch("configmaps", name="through", timeout_seconds=5):
            if event.type != "BOOKMARK":
                seen.append((event.type, event.object["metadata"]["name"]))
                break
        assert seen == [("ADDED", "through")]
    # Every connection was a tunnel to the name (the client never looked it up), authenticated.
    assert proxy.tunnels and set(proxy.tunnels) == {f"{_NAME}:{port}"}
    assert set(proxy.authorizations) == {"Basic " + base64.b64encode(b"alice:s3cr:t").decode()}


async def test_no_proxy_matching_the_server_bypasses_the_proxy(
    kubeconfig_path: str, tmp_path: Path, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _, _ = _renamed(kubeconfig_path, tmp_path)
    monkeypatch.setenv("HTTPS_PROXY", f"http://alice:s3cr%3At@127.0.0.1:{proxy.port}")
    monkeypatch.setenv("no_proxy", "10.0.0.0/8, .svc")
    async with (
        asyncio.timeout(60),
        Client(load_kubeconfig(path, max_retries=0, connect_timeout=10.0)) as client,
    ):
        with pytest.raises(ApiConnectionError) as e:
            await client.get("namespaces", "default")
    # The client went direct: it had to resolve the name itself, which only the proxy knows.
    assert proxy.authorizations == [] and "through proxy" not in str(e.value)
    assert f"API server https://{_NAME}:" in str(e.value)


async def test_a_loopback_server_is_not_proxied(
    kubeconfig_path: str, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The control plane's own kubeconfig (127.0.0.1): HTTPS_PROXY does not apply, as in client-go,
    # so a developer or CI machine with a proxy set still reaches its local control plane.
    monkeypatch.setenv("HTTPS_PROXY", f"http://alice:s3cr%3At@127.0.0.1:{proxy.port}")
    async with asyncio.timeout(60), Client(load_kubeconfig(kubeconfig_path)) as client:
        assert (await client.get("namespaces", "default"))["metadata"]["name"] == "default"
    assert proxy.authorizations == []
