"""The NamespaceUsage example on the real control plane: objects computed from informer caches,
served through kube-apiserver's aggregator (an APIService whose Service is an ExternalName
naming 127.0.0.1, as tests/e2e/apiserver does), read with kubectl get and watched with
kubectl get -w while ConfigMaps come and go; writes are refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from examples.namespace_usage.usage import NamespaceUsage, UsageStorage

from kubeop.apiserver import APIServer
from kubeop.cli.local_apiserver import LocalApiServer
from kubeop.client import Client, load_kubeconfig
from kubeop.testing import ControlPlane
from tests.support.aggregation import register, serving_certificates

pytestmark = pytest.mark.controlplane

NS = "usage-e2e"
API = LocalApiServer([NamespaceUsage], "usage-api", NS)


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    with ControlPlane(full=False) as plane:
        plane.create_namespace(NS)
        yield plane


async def _kubectl(cp: ControlPlane, *args: str, **kw: Any) -> Any:
    return await asyncio.to_thread(cp.kubectl, *args, **kw)


@pytest.fixture
async def served(cp: ControlPlane, tmp_path: Path) -> AsyncIterator[Client]:
    ca = serving_certificates(API, tmp_path / "certs")
    client = Client(load_kubeconfig(cp.kubeconfig_path))
    storage = UsageStorage(client)
    await storage.start(timeout=30)
    server = APIServer([NamespaceUsage], storage, address="127.0.0.1:0", cert_dir=tmp_path / "certs")
    await server.start(client)
    await asyncio.to_thread(register, cp, API, port=server.port, ca=ca)
    try:
        async with asyncio.timeout(90):
            while True:
                found = await _kubectl(cp, "api-resources", "--api-group=usage.kubeop.dev", check=False)
                if "namespaceusages" in found.stdout:
                    break
                await asyncio.sleep(1)
        yield client
    finally:
        await _kubectl(
            cp, "delete", "apiservice", "v1alpha1.usage.kubeop.dev", "--ignore-not-found", check=False
        )
        await server.stop()
        await client.close()


async def _line(stream: asyncio.StreamReader, wanted: str) -> str:
    async with asyncio.timeout(30):
        while True:
            line = (await stream.readline()).decode()
            if not line:
                raise AssertionError(f"kubectl get -w ended before a line with {wanted!r}")
            if wanted in line:
                return line


async def test_kubectl_gets_and_watches_usage_computed_from_the_caches(
    cp: ControlPlane, served: Client
) -> None:
    for name in ("a", "b"):
        await _kubectl(cp, "create", "configmap", name, "-n", NS)
    async with asyncio.timeout(30):
        while True:
            table = (await _kubectl(cp, "get", "namespaceusages")).stdout
            row = next((line.split() for line in table.splitlines() if line.startswith(NS + " ")), [])
            if row and int(row[1]) >= 2:
                break
            await asyncio.sleep(0.5)
    assert table.split()[:4] == ["NAME", "CONFIGMAPS", "SECRETS", "PODS"]
    before = int(row[1])
    one = (await _kubectl(cp, "get", "nsu", NS, "-o", "jsonpath={.usage.configMaps}")).stdout
    assert int(one) == before
    watch = await asyncio.create_subprocess_exec(
        str(cp.binaries.kubectl),
        f"--kubeconfig={cp.kubeconfig_path}",
        "get",
        "nsu",
        NS,
        "-w",
        "--no-headers",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert watch.stdout is not None
        first = await _line(watch.stdout, NS)
        assert int(first.split()[1]) == before
        await _kubectl(cp, "create", "configmap", "c", "-n", NS)
        changed = await _line(watch.stdout, NS)
        assert int(changed.split()[1]) == before + 1
        await _kubectl(cp, "delete", "configmap", "a", "-n", NS)
        changed = await _line(watch.stdout, NS)
        assert int(changed.split()[1]) == before
    finally:
        watch.kill()
        await watch.wait()
    refused = await _kubectl(cp, "delete", "nsu", NS, check=False)
    assert refused.returncode != 0 and "cannot be written" in refused.stderr
