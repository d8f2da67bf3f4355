"""An aggregated API on the real control plane, as it runs in a cluster: two replicas on the
control plane's own etcd behind one Service, and a serving certificate the server manages and
rotates itself while kube-apiserver keeps reaching it.

The Service is an ExternalName naming 127.0.0.1 (see test_aggregation_e2e) whose port is a small
TCP balancer started here, doing what a Service's virtual IP does in a cluster: each connection
goes to one replica in turn, and a replica that refuses connections is skipped. A module of its
own control plane: APIServices are cluster-wide.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import ssl
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kubeop.apiserver import APIServer, EtcdStorage, MemoryStorage
from kubeop.client import Client, load_kubeconfig
from kubeop.client.httpserver import Limits
from kubeop.core.resource import ApiResource
from kubeop.crd.resource import ObjectMeta
from kubeop.testing import ControlPlane
from kubeop.testing.controlplane import free_port
from kubeop.webhook.rotator import CertRotator, CertSecret
from tests.e2e.apiserver.test_aggregation_e2e import (
    API,
    SERVICE,
    Widget,
    WidgetSpec,
    _available,
    _discovered,
    _kubectl,
)
from tests.support.aggregation import register, serving_certificates

pytestmark = pytest.mark.controlplane

NS = API.namespace
APISERVICE = "v1alpha1.example.com"
APISERVICES = ApiResource("apiregistration.k8s.io", "v1", "apiservices", kind="APIService", namespaced=False)
PATH = f"/apis/example.com/v1alpha1/namespaces/{NS}/widgets"


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    with ControlPlane(full=False) as plane:
        plane.create_namespace(NS)
        yield plane


class _Service:
    """A Service's virtual IP on loopback: each connection to the next replica that accepts it."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports
        self.connections: Counter[int] = Counter()
        self._next = 0
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[Any]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for i in range(len(self.ports)):
            port = self.ports[(self._next + i) % len(self.ports)]
            try:
                async with asyncio.timeout(2):
                    up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
            except (OSError, TimeoutError):
                continue
            self._next = (self._next + i + 1) % len(self.ports)
            self.connections[port] += 1
            break
        else:
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._pipes.add(task)
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            self._pipes.discard(task)
            for w in (writer, up_writer):
                w.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (OSError, RuntimeError):
        writer.close()


def _front_proxy(cp: ControlPlane) -> aiohttp.ClientSession:
    """Straight to one replica, as kube-apiserver calls it: its front-proxy certificate, the
    admin's identity in the headers (our server still asks kube-apiserver to authorize it)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # which replica answers is what this checks, not its certificate
    ctx.load_cert_chain(
        str(cp.pki_dir / "front-proxy-client.crt"), str(cp.pki_dir / "front-proxy-client.key")
    )
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=ctx),
        headers={"X-Remote-User": "kubeop-admin", "X-Remote-Group": "system:masters"},
        timeout=aiohttp.ClientTimeout(total=30),
    )


def _widget(name: str, size: int) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1alpha1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"size": size},
    }


@pytest.fixture
async def replicas(
    cp: ControlPlane, tmp_path: Path
) -> AsyncIterator[tuple[list[APIServer], _Service, Client]]:
    ca = serving_certificates(API, tmp_path / "certs")
    client = Client(load_kubeconfig(cp.kubeconfig_path))
    etcd = f"http://127.0.0.1:{cp.ports['etcd']}"
    servers = [
        APIServer(
            [Widget],
            EtcdStorage(etcd, prefix="/kubeop-e2e/widgets-api/"),
            address="127.0.0.1:0",
            cert_dir=tmp_path / "certs",
        )
        for _ in range(2)
    ]
    for server in servers:
        await server.start(client)
    service = _Service([s.port for s in servers])
    await service.start()
    await asyncio.to_thread(register, cp, API, port=service.port, ca=ca)
    try:
        yield servers, service, client
    finally:
        cp.kubectl("delete", "apiservice", APISERVICE, "--ignore-not-found", check=False)
        await service.stop()
        for server in servers:
            await server.stop()
        await client.close()


async def test_two_replicas_on_one_etcd_serve_one_api(
    cp: ControlPlane, replicas: tuple[list[APIServer], _Service, Client]
) -> None:
    (one, two), service, client = replicas
    await _available(client)
    async with _front_proxy(cp) as s:
        async with s.get(two.url + PATH) as listed:
            assert listed.status == 200
            version = (await listed.json())["metadata"]["resourceVersion"]
        # a write through one replica is an event of the other's watch
        watch_url = f"{two.url}{PATH}?watch=true&resourceVersion={version}&timeoutSeconds=30"
        async with s.get(watch_url) as watch:
            async with s.post(one.url + PATH, json=_widget("shared", 2)) as made:
                assert made.status == 201
                created = await made.json()
            async with asyncio.timeout(10):
                event = json.loads(await watch.content.readline())
        assert (event["type"], event["object"]) == ("ADDED", created)
        # optimistic concurrency holds across replicas: the second writer of one version loses
        async with s.put(f"{two.url}{PATH}/shared", json={**created, "spec": {"size": 3}}) as moved:
            assert moved.status == 200
        async with s.put(f"{one.url}{PATH}/shared", json={**created, "spec": {"size": 4}}) as stale:
            assert stale.status == 409 and (await stale.json())["reason"] == "Conflict"
    # kube-apiserver, through the Service, serves the same object whichever replica answers
    await _discovered(cp)
    got = await client.get(Widget, "shared", namespace=NS)
    assert got.spec.size == 3 and got.metadata.generation == 2
    # one replica goes away: the Service sends every new connection to the other
    await one.stop()
    await asyncio.sleep(1)  # kube-apiserver sees its connections to it closed
    for size in (5, 6):
        await _kubectl(
            cp, "patch", "widget", "shared", "-n", NS, "--type=merge", "-p", f'{{"spec":{{"size":{size}}}}}'
        )
        assert (await client.get(Widget, "shared", namespace=NS)).spec.size == size
    table = (await _kubectl(cp, "get", "widgets", "-n", NS)).stdout
    assert "shared" in table and " 6" in table
    assert service.connections[two.port] >= 1
    await client.delete(Widget, "shared", namespace=NS)


async def test_the_serving_certificate_rotates_while_kube_apiserver_reaches_the_server(
    cp: ControlPlane, tmp_path: Path
) -> None:
    """CertRotator keeps the server's certificate in a Secret and the CA in the APIService's
    caBundle. Made to renew at every check (and, its CA outliving no new certificate, to make a
    new CA each time, published next to the old ones), it rotates three times while a reader
    keeps getting the object through kube-apiserver; the server drops idle connections within a
    second, so kube-apiserver dials again and checks each new certificate."""
    client = Client(load_kubeconfig(cp.kubeconfig_path))
    port = free_port()
    certs = tmp_path / "certs"
    await asyncio.to_thread(register, cp, API, port=port, ca=None)
    spec = CertSecret.for_service(
        "widgets-api-cert",
        SERVICE,
        NS,
        inject=(f"apiservices/{APISERVICE}",),
        validity=dt.timedelta(hours=1),
        ca_validity=dt.timedelta(hours=2),
        renew_before=dt.timedelta(hours=2),
    )
    rotator = CertRotator(client, spec, cert_dir=certs)
    bundles = [await rotator.ensure()]
    server = APIServer(
        [Widget],
        MemoryStorage(),
        address=f"127.0.0.1:{port}",
        cert_dir=certs,
        limits=Limits(idle_timeout=1.0),
    )
    await server.start(client)
    stop = asyncio.Event()
    served: list[int] = []
    failures: list[str] = []

    async def read() -> None:
        while not stop.is_set():
            try:
                got = await client.get(Widget, "rotated", namespace=NS)
                served.append(got.spec.size)
            except Exception as exc:  # every failure is the test's failure: kept to be shown
                failures.append(f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(0.1)

    try:
        await _available(client)
        await _discovered(cp)
        await client.create(
            Widget(metadata=ObjectMeta(name="rotated", namespace=NS), spec=WidgetSpec(size=1))
        )
        reader = asyncio.create_task(read())
        presented = [await _presented(port)]
        for _ in range(3):
            await asyncio.sleep(1.5)
            bundles.append(await rotator.ensure())
            for _ in range(100):  # the server reloads the pair on the next connection
                if (now := await _presented(port)) not in presented:
                    break
                await asyncio.sleep(0.1)
            written = x509.load_pem_x509_certificate((certs / "tls.crt").read_bytes())
            assert now == written.public_bytes(serialization.Encoding.DER)
            presented.append(now)
        await asyncio.sleep(2)
        stop.set()
        await reader
        assert failures == [] and len(served) > 30
        apiservice = await client.get(APISERVICES, APISERVICE)
        assert base64.b64decode(apiservice["spec"]["caBundle"]) == bundles[-1]
        assert bundles[-1].count(b"BEGIN CERTIFICATE") == 4  # each new CA next to the old ones
        conditions = {c["type"]: c["status"] for c in apiservice["status"]["conditions"]}
        assert conditions["Available"] == "True"
        assert rotator.renewals == 4
    finally:
        stop.set()
        cp.kubectl("delete", "apiservice", APISERVICE, "--ignore-not-found", check=False)
        await server.stop()
        await client.close()


async def _presented(port: int) -> bytes:
    """The certificate (DER) the server presents to a new connection now."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    async with asyncio.timeout(5):
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()
    return bytes(der)
