"""An APIServer on loopback with its own PKI: a serving CA, a front-proxy CA and client
certificates, and a review function standing in for kube-apiserver's TokenReview and
SubjectAccessReview (alice may do anything but delete; dora may read and patch; bob nothing;
the token "alice-token" is alice)."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from kubeop.apiserver import APIServer, MemoryStorage
from kubeop.apiserver.auth import RequestHeaderConfig
from kubeop.crd import CustomResource, PrinterColumn
from kubeop.crd.resource import CamelModel
from kubeop.testing.pki import CertificateAuthority


class WidgetSpec(CamelModel):
    size: int = 1
    color: str = "blue"


class WidgetStatus(CamelModel):
    ready: bool = False


class Widget(
    CustomResource,
    group="example.com",
    version="v1alpha1",
    short_names=["wd"],
    subresources=["status"],
    printer_columns=[PrinterColumn("Size", ".spec.size", "integer"), PrinterColumn.age()],
    selectable_fields=[".spec.color"],
):
    spec: WidgetSpec
    status: WidgetStatus | None = None


@dataclass
class Reviews:
    calls: list[dict[str, Any]] = field(default_factory=list)

    async def __call__(self, body: dict[str, Any]) -> Mapping[str, Any]:
        self.calls.append(body)
        spec = body["spec"]
        if body["kind"] == "TokenReview":
            if spec["token"] == "alice-token":
                return {
                    **body,
                    "status": {"authenticated": True, "user": {"username": "alice", "groups": ["devs"]}},
                }
            return {**body, "status": {"authenticated": False}}
        user = spec["user"]
        verb = (spec.get("resourceAttributes") or spec.get("nonResourceAttributes"))["verb"]
        allowed = (
            "system:masters" in spec["groups"]
            or (user == "alice" and verb != "delete")
            or (user == "dora" and verb in ("get", "list", "watch", "patch"))
        )
        return {**body, "status": {"allowed": allowed}}


@dataclass
class Env:
    server: APIServer
    base: str
    proxy: ssl.SSLContext  # the front proxy's client certificate
    stranger: ssl.SSLContext  # a client certificate from another CA
    plain: ssl.SSLContext  # trusts the server, no client certificate
    reviews: Reviews
    storage: MemoryStorage

    def session(self, ctx: ssl.SSLContext, **headers: str) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx),
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=10),
        )

    def as_user(self, user: str, *groups: str) -> aiohttp.ClientSession:
        session = self.session(self.proxy, **{"X-Remote-User": user})
        if groups:
            session.headers.add("X-Remote-Group", groups[0])
        return session


def _context(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


@pytest.fixture
def serving_ca(tmp_path: Path) -> str:
    """The CA file the env's server certificate is signed by."""
    return str(tmp_path / "serving-ca.crt")


@pytest.fixture
def kinds() -> list[type[CustomResource]]:
    """The kinds the env's server serves (a test module may override this fixture)."""
    return [Widget]


@pytest.fixture
async def env(tmp_path: Path, kinds: list[type[CustomResource]]) -> AsyncIterator[Env]:
    serving = CertificateAuthority.create("serving-ca")
    serving.save(tmp_path, "serving-ca")
    serving.issue_to(tmp_path / "certs", "tls", "api", hosts=["127.0.0.1", "localhost"], server=True)
    proxy_ca = CertificateAuthority.create("front-proxy-ca")
    proxy = proxy_ca.issue_to(tmp_path, "front-proxy-client", "front-proxy-client", client=True)
    other = CertificateAuthority.create("other-ca").issue_to(
        tmp_path, "other", "front-proxy-client", client=True
    )
    reviews = Reviews()
    storage = MemoryStorage()
    server = APIServer(
        kinds,
        storage,
        address="127.0.0.1:0",
        cert_dir=tmp_path / "certs",
        requestheader=RequestHeaderConfig(proxy_ca.cert_pem.decode(), ("front-proxy-client",)),
        review=reviews,
        bookmark_interval=0.2,
    )
    await server.start()
    ca = tmp_path / "serving-ca.crt"
    try:
        yield Env(
            server,
            f"https://127.0.0.1:{server.port}",
            _context(ca, proxy.cert, proxy.key),
            _context(ca, other.cert, other.key),
            _context(ca),
            reviews,
            storage,
        )
    finally:
        await server.stop()
