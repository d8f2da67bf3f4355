"""An aggregated API on the real control plane: kube-apiserver proxies /apis/example.com/v1alpha1
to an APIServer running in this test process, through an APIService whose Service is an
ExternalName naming 127.0.0.1 (the working shape on a loopback control plane: without
--enable-aggregator-routing the aggregator dials an ExternalName's host directly; Endpoints, which
it needs with that flag, may not hold loopback addresses).

kubectl get/apply/delete go through the aggregator; the APIService becomes Available; a user
without the verb gets 403 from our server's SubjectAccessReview; a kubeop informer lists and
watches the aggregated resource. A module of its own control plane: APIServices are cluster-wide.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubeop.apiserver import APIServer, MemoryStorage
from kubeop.cache import FuncHandler, SharedInformerFactory
from kubeop.cli.local_apiserver import LocalApiServer
from kubeop.client import Client, load_kubeconfig
from kubeop.core.resource import ApiResource
from kubeop.crd import CustomResource, PrinterColumn, Scale
from kubeop.crd.resource import CamelModel, ObjectMeta
from kubeop.testing import ControlPlane
from tests.support.aggregation import register, serving_certificates

pytestmark = pytest.mark.controlplane

NS = "agg-e2e"
SERVICE = "widgets-api"
APISERVICES = ApiResource("apiregistration.k8s.io", "v1", "apiservices", kind="APIService", namespaced=False)


class WidgetSpec(CamelModel):
    size: int = 1
    replicas: int | None = None


class WidgetStatus(CamelModel):
    replicas: int = 0


class Widget(
    CustomResource,
    group="example.com",
    version="v1alpha1",
    printer_columns=[PrinterColumn("Size", ".spec.size", "integer")],
    subresources=[Scale()],
):
    spec: WidgetSpec
    status: WidgetStatus | None = None


API = LocalApiServer([Widget], SERVICE, NS)  # its Service, its APIService, its serving certificate


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    with ControlPlane(full=False) as plane:
        plane.create_namespace(NS)
        yield plane


@pytest.fixture
async def served(cp: ControlPlane, tmp_path: Path) -> AsyncIterator[tuple[APIServer, Client]]:
    ca = serving_certificates(API, tmp_path / "certs")
    client = Client(load_kubeconfig(cp.kubeconfig_path))
    server = APIServer([Widget], MemoryStorage(), address="127.0.0.1:0", cert_dir=tmp_path / "certs")
    await server.start(client)
    register(cp, API, port=server.port, ca=ca)
    try:
        yield server, client
    finally:
        cp.kubectl("delete", "apiservice", "v1alpha1.example.com", "--ignore-not-found", check=False)
        await server.stop()
        await client.close()


async def _available(client: Client, timeout: float = 60.0) -> dict[str, Any]:
    last: Any = None
    async with asyncio.timeout(timeout):
        while True:
            last = await client.get(APISERVICES, "v1alpha1.example.com")
            conditions = {c["type"]: c for c in last.get("status", {}).get("conditions", [])}
            if conditions.get("Available", {}).get("status") == "True":
                return dict(last)
            await asyncio.sleep(0.5)


async def _discovered(cp: ControlPlane, timeout: float = 90.0) -> None:
    """Until kube-apiserver's merged discovery lists the widgets (its discovery manager fetches
    ours once the APIService is added; api-resources also refreshes kubectl's cache)."""
    async with asyncio.timeout(timeout):
        while True:
            listed = await _kubectl(cp, "api-resources", "--api-group=example.com", check=False)
            if "widgets" in listed.stdout:
                return
            await asyncio.sleep(1)


async def _kubectl(cp: ControlPlane, *args: str, **kw: Any) -> Any:
    return await asyncio.to_thread(cp.kubectl, *args, **kw)


async def _with_widget(cp: ControlPlane, served: tuple[APIServer, Client]) -> Client:
    """Once the APIService is available and discovered, apply WIDGET; the served client."""
    _, client = served
    await _available(client)
    await _discovered(cp)
    await _kubectl(cp, "apply", "-f", "-", input=WIDGET)
    return client


WIDGET = f"""
apiVersion: example.com/v1alpha1
kind: Widget
metadata: {{name: small, namespace: {NS}}}
spec: {{size: 2}}
"""


async def test_kubectl_through_the_aggregator(cp: ControlPlane, served: tuple[APIServer, Client]) -> None:
    _, client = served
    apiservice = await _available(client)
    assert apiservice["status"]["conditions"][0]["status"] == "True"
    await _discovered(cp)
    await _kubectl(cp, "apply", "-f", "-", input=WIDGET)
    table = (await _kubectl(cp, "get", "widgets", "-n", NS)).stdout
    assert "NAME" in table and "SIZE" in table and "small" in table and " 2" in table
    await _kubectl(cp, "apply", "-f", "-", input=WIDGET.replace("size: 2", "size: 3"))
    got = await client.get(Widget, "small", namespace=NS)
    assert got.spec.size == 3 and got.metadata.generation == 2
    resources = (await _kubectl(cp, "api-resources", "--api-group=example.com")).stdout
    assert "widgets" in resources
    await _kubectl(cp, "delete", "widget", "small", "-n", NS)
    missing = await _kubectl(cp, "get", "widget", "small", "-n", NS, check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr


async def test_kubectl_scale_through_the_aggregator(
    cp: ControlPlane, served: tuple[APIServer, Client]
) -> None:
    client = await _with_widget(cp, served)
    await _kubectl(cp, "scale", "widget", "small", "-n", NS, "--replicas=3")
    got = await client.get(Widget, "small", namespace=NS)
    assert got.spec.replicas == 3 and got.metadata.generation == 2
    path = f"/apis/example.com/v1alpha1/namespaces/{NS}/widgets/small/scale"
    scale = json.loads((await _kubectl(cp, "get", "--raw", path)).stdout)
    assert (scale["apiVersion"], scale["kind"]) == ("autoscaling/v1", "Scale")
    assert scale["spec"] == {"replicas": 3} and scale["status"]["replicas"] == 0
    stale = await _kubectl(
        cp, "scale", "widget", "small", "-n", NS, "--current-replicas=2", "--replicas=5", check=False
    )
    assert stale.returncode != 0 and "expected replicas to be 2, was 3" in stale.stderr.lower(), stale.stderr
    assert (await client.get(Widget, "small", namespace=NS)).spec.replicas == 3


async def test_rbac_is_enforced_by_our_server(cp: ControlPlane, served: tuple[APIServer, Client]) -> None:
    server, client = served
    await _available(client)
    await _discovered(cp)
    await _kubectl(cp, "apply", "-f", "-", input=WIDGET)
    await _kubectl(
        cp, "create", "role", "widget-reader", "-n", NS, "--verb=get,list", "--resource=widgets.example.com"
    )
    await _kubectl(
        cp, "create", "rolebinding", "carol-reads", "-n", NS, "--role=widget-reader", "--user=carol"
    )
    carol = await asyncio.to_thread(cp.kubeconfig_for_user, "carol")
    listed = await _kubectl(cp, "get", "widgets", "-n", NS, "-o", "name", kubeconfig=carol)
    assert listed.stdout.strip() == "widget.example.com/small"
    refused = await _kubectl(cp, "delete", "widget", "small", "-n", NS, kubeconfig=carol, check=False)
    assert refused.returncode != 0
    assert 'User "carol" cannot delete resource "widgets" in API group "example.com"' in refused.stderr
    # kube-apiserver authorizes before it proxies; our server decides again on its own: straight
    # to it with the front proxy's certificate (as kube-apiserver sends it), carol may get, not delete
    proxy = ssl.create_default_context()
    proxy.check_hostname = False
    proxy.verify_mode = ssl.CERT_NONE  # the server's certificate is not what this checks
    proxy.load_cert_chain(
        str(cp.pki_dir / "front-proxy-client.crt"), str(cp.pki_dir / "front-proxy-client.key")
    )
    url = f"{server.url}/apis/example.com/v1alpha1/namespaces/{NS}/widgets/small"
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=proxy), headers={"X-Remote-User": "carol"}
    ) as s:
        async with s.get(url) as got:
            assert got.status == 200
        async with s.delete(url) as denied:
            status = await denied.json()
            assert denied.status == 403 and status["reason"] == "Forbidden"


async def test_a_kubeop_informer_lists_and_watches_the_aggregated_resource(
    cp: ControlPlane, served: tuple[APIServer, Client]
) -> None:
    _, client = served
    await _available(client)
    seen: asyncio.Queue[str] = asyncio.Queue()
    async with SharedInformerFactory(client) as factory:
        informer = factory.informer(Widget, namespace=NS)
        informer.add_event_handler(
            FuncHandler(on_add=lambda obj, _initial: seen.put_nowait(f"add {_name(obj)}"))
        )
        factory.start()
        assert await factory.wait_for_cache_sync(timeout=30)
        await client.create(
            Widget(metadata=ObjectMeta(name="watched", namespace=NS), spec=WidgetSpec(size=5))
        )
        async with asyncio.timeout(30):
            while (event := await seen.get()) != "add watched":
                pass
        assert event == "add watched"


def _name(obj: Any) -> str:
    return str(obj["metadata"]["name"] if isinstance(obj, dict) else obj.metadata.name)


async def test_kubectl_server_side_apply_dry_run_and_finalizers(
    cp: ControlPlane, served: tuple[APIServer, Client]
) -> None:
    _, client = served
    await _available(client)
    await _discovered(cp)
    applied = WIDGET.replace("small", "ssa")
    await _kubectl(cp, "apply", "--server-side", "-f", "-", input=applied)
    got = await client.get(Widget, "ssa", namespace=NS)
    assert got.spec.size == 2
    managed = (
        await _kubectl(cp, "get", "widget", "ssa", "-n", NS, "--show-managed-fields", "-o", "yaml")
    ).stdout
    assert "manager: kubectl" in managed and "operation: Apply" in managed and "f:size: {}" in managed
    other = applied.replace("size: 2", "size: 4")
    conflict = await _kubectl(
        cp, "apply", "--server-side", "--field-manager=other", "-f", "-", input=other, check=False
    )
    assert (
        conflict.returncode != 0
        and 'conflict with "kubectl"' in conflict.stderr
        and ".spec.size" in conflict.stderr
    )
    await _kubectl(
        cp, "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", "-", input=other
    )
    assert (await client.get(Widget, "ssa", namespace=NS)).spec.size == 4
    dry = applied.replace("name: ssa", "name: dry")
    await _kubectl(cp, "create", "--dry-run=server", "-f", "-", input=dry)
    missing = await _kubectl(cp, "get", "widget", "dry", "-n", NS, check=False)
    assert missing.returncode != 0 and "NotFound" in missing.stderr
    await _kubectl(
        cp,
        "patch",
        "widget",
        "ssa",
        "-n",
        NS,
        "--type=merge",
        "-p",
        '{"metadata":{"finalizers":["example.com/hold"]}}',
    )
    await _kubectl(cp, "delete", "widget", "ssa", "-n", NS, "--wait=false")
    held = await client.get(Widget, "ssa", namespace=NS)
    assert held.metadata.deletion_timestamp is not None
    await _kubectl(
        cp,
        "patch",
        "widget",
        "ssa",
        "-n",
        NS,
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/metadata/finalizers"}]',
    )
    gone = await _kubectl(cp, "get", "widget", "ssa", "-n", NS, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


async def test_kubectl_describe_edit_and_watch_through_the_aggregator(
    cp: ControlPlane, served: tuple[APIServer, Client]
) -> None:
    client = await _with_widget(cp, served)
    described = (await _kubectl(cp, "describe", "widget", "small", "-n", NS)).stdout
    assert "Name:" in described and "small" in described and "Kind:         Widget" in described
    assert "Spec:" in described and "Size:  2" in described
    # kubectl get -w: the table of the object as it is, then a row per change (a watch with a Table).
    watch = await asyncio.create_subprocess_exec(
        str(cp.binaries.kubectl),
        f"--kubeconfig={cp.kubeconfig_path}",
        "get",
        "widgets",
        "-n",
        NS,
        "-w",
        "--output-watch-events",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout = watch.stdout
        assert stdout is not None
        lines: list[str] = []

        async def row(*words: str) -> str:
            async with asyncio.timeout(30):
                while True:
                    line = (await stdout.readline()).decode()
                    assert line, f"kubectl get -w ended: {lines}"
                    lines.append(line)
                    if all(w in line.split() for w in words):
                        return line

        await row("ADDED", "small", "2")
        # kubectl edit, non-interactively: the "editor" is sed, changing the size in the file.
        edited = await asyncio.create_subprocess_exec(
            str(cp.binaries.kubectl),
            f"--kubeconfig={cp.kubeconfig_path}",
            "edit",
            "widget",
            "small",
            "-n",
            NS,
            env={**os.environ, "KUBE_EDITOR": "sed -i -e 's/size: 2/size: 7/'"},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        async with asyncio.timeout(60):
            out, err = await edited.communicate()
        assert edited.returncode == 0, err.decode()
        assert "widget.example.com/small edited" in out.decode()
        await row("MODIFIED", "small", "7")
    finally:
        watch.kill()
        await watch.wait()
    got = await client.get(Widget, "small", namespace=NS)
    assert got.spec.size == 7 and got.metadata.generation == 2
