"""The NamespaceUsage example on the real control plane: objects computed from informer caches,
served through kube-apiserver's aggregator (an APIService whose Service is an ExternalName
naming 127.0.0.1, as tests/e2e/apiserver does), read with kubectl get and watched with
kubectl get -w while ConfigMaps come and go; writes are refused."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from examples.namespace_usage.usage import NamespaceUsage, UsageStorage

from kubeop.apiserver import APIServer
from kubeop.client import Client, load_kubeconfig
from kubeop.core import pki
from kubeop.testing import ControlPlane

pytestmark = pytest.mark.controlplane

NS = "usage-e2e"
SERVICE = "usage-api"


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    with ControlPlane(full=False) as plane:
        plane.create_namespace(NS)
        yield plane


def _serving(directory: Path) -> bytes:
    ca_key = pki.new_key()
    ca = pki.self_signed_ca(ca_key, "usage-api-ca", dt.timedelta(days=1), path_length=0)
    key, cert = pki.issue(
        ca_key, ca, SERVICE, dt.timedelta(days=1), hosts=[f"{SERVICE}.{NS}.svc", "127.0.0.1"], server=True
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.key").write_bytes(pki.key_pem(key))
    return ca.public_bytes(serialization.Encoding.PEM)


def _manifests(port: int, ca: bytes) -> str:
    return f"""
apiVersion: v1
kind: Service
metadata: {{name: {SERVICE}, namespace: {NS}}}
spec:
  type: ExternalName
  externalName: 127.0.0.1
  ports: [{{port: {port}, protocol: TCP}}]
---
apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: v1alpha1.usage.kubeop.dev}}
spec:
  group: usage.kubeop.dev
  version: v1alpha1
  groupPriorityMinimum: 1000
  versionPriority: 15
  service: {{name: {SERVICE}, namespace: {NS}, port: {port}}}
  caBundle: {base64.b64encode(ca).decode()}
"""


async def _kubectl(cp: ControlPlane, *args: str, **kw: Any) -> Any:
    return await asyncio.to_thread(cp.kubectl, *args, **kw)


@pytest.fixture
async def served(cp: ControlPlane, tmp_path: Path) -> AsyncIterator[Client]:
    ca = _serving(tmp_path / "certs")
    client = Client(load_kubeconfig(cp.kubeconfig_path))
    storage = UsageStorage(client)
    await storage.start(timeout=30)
    server = APIServer([NamespaceUsage], storage, address="127.0.0.1:0", cert_dir=tmp_path / "certs")
    await server.start(client)
    await _kubectl(cp, "apply", "-f", "-", input=_manifests(server.port, ca))
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
