"""Self-managed webhook certificates on the real control plane: a Manager keeps a CA and a serving
certificate in a Secret, patches the caBundle into its webhook configuration, and kube-apiserver's
admission call goes through it over TLS (clientConfig.url to 127.0.0.1, no cert-manager).

A second Manager reuses the Secret; an expiring certificate is renewed in place (the same CA, so
the caBundle stays); two rotators racing for a missing Secret create it once.
A module of its own control plane: webhook configurations are cluster-wide.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from kubeop.client import Client, load_kubeconfig
from kubeop.core.resource import ApiResource
from kubeop.manager import Manager, Serving
from kubeop.testing import ControlPlane
from kubeop.webhook import (
    CertRotator,
    CertSecret,
    Denied,
    Endpoint,
    FieldError,
    Webhooks,
    validating,
    webhook_configurations,
)
from kubeop.webhook.certs import KeyPair, make_serving

pytestmark = pytest.mark.controlplane

NS = "rotator-e2e"
SECRET = "rotator-e2e-cert"
CONFIG = "rotator-e2e-validating"
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
ADMISSION = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


@validating(CONFIGMAPS, name="rotator.e2e.kubeop.dev", object_selector={"matchLabels": {"e2e": "rotator"}})
def no_bad_key(new: dict[str, Any]) -> None:
    if "bad" in (new.get("data") or {}):
        raise Denied(fields=[FieldError("data.bad", "is not allowed here")])


def eventually(check: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spec(**options: Any) -> CertSecret:
    return CertSecret(
        SECRET,
        hosts=("127.0.0.1",),
        namespace=NS,
        inject=(f"validatingwebhookconfigurations/{CONFIG}",),
        **options,
    )


class Served:
    """A Manager serving the webhook with self-managed certificates, on its own loop in a thread."""

    def __init__(self, kubeconfig: str, port: int, cert_dir: Path, cert: CertSecret) -> None:
        self.kubeconfig, self.port, self.cert_dir, self.cert = kubeconfig, port, cert_dir, cert
        self.manager: Manager | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop_event: asyncio.Event | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._thread, daemon=True)

    def _thread(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as e:  # shown by start()
            self.error = e

    async def _main(self) -> None:
        async with Client(load_kubeconfig(self.kubeconfig, qps=None)) as client:
            self.loop, self.stop_event = asyncio.get_running_loop(), asyncio.Event()
            self.manager = Manager(
                client,
                name="rotator-e2e",
                webhooks=Webhooks([no_bad_key]),
                serving=Serving(
                    metrics_address=None,
                    health_address=None,
                    webhook_address=f"127.0.0.1:{self.port}",
                    webhook_cert_dir=str(self.cert_dir),
                    webhook_cert_secret=self.cert,
                ),
            )
            await self.manager.start(self.stop_event)

    def start(self) -> Manager:
        self.thread.start()
        eventually(
            lambda: (
                self.error is not None
                or (
                    self.manager is not None
                    and self.manager.webhook_server is not None
                    and self.manager.webhook_server.ready()
                )
            ),
            "the webhook server to listen",
        )
        assert self.error is None, self.error
        assert self.manager is not None
        return self.manager

    def stop(self) -> None:
        if self.loop is not None and self.stop_event is not None:
            self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(15)


@pytest.fixture(scope="module")
def cp() -> Iterator[ControlPlane]:
    with ControlPlane(full=False) as plane:
        plane.create_namespace(NS)
        yield plane


@pytest.fixture(scope="module")
def port(cp: ControlPlane) -> int:
    """The configuration, as kubeop manifests writes it for self-managed certificates: no caBundle."""
    port = free_port()
    (config,) = webhook_configurations([no_bad_key], "rotator-e2e", Endpoint.url(f"https://127.0.0.1:{port}"))
    assert "caBundle" not in json.dumps(config)
    cp.api.call("POST", ADMISSION, config)
    return port


def secret(cp: ControlPlane) -> dict[str, bytes]:
    obj = cp.api.call("GET", f"/api/v1/namespaces/{NS}/secrets/{SECRET}")
    return {k: base64.b64decode(v) for k, v in obj["data"].items()}


def ca_bundle(cp: ControlPlane) -> bytes:
    config = cp.api.call("GET", f"{ADMISSION}/{CONFIG}")
    return base64.b64decode(config["webhooks"][0]["clientConfig"].get("caBundle", ""))


def create(cp: ControlPlane, name: str, data: dict[str, str]) -> Any:
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "labels": {"e2e": "rotator"}},
        "data": data,
    }
    return cp.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)


def test_the_manager_creates_the_secret_injects_the_ca_and_admission_works(
    cp: ControlPlane, port: int, tmp_path: Path
) -> None:
    first = Served(cp.kubeconfig_path, port, tmp_path / "a", spec())
    manager = first.start()
    try:
        assert manager.cert_rotator is not None and manager.cert_rotator.renewals == 1
        stored = secret(cp)
        assert set(stored) == {"tls.crt", "tls.key", "ca.crt", "ca.key"}
        assert (tmp_path / "a" / "tls.crt").read_bytes() == stored["tls.crt"]
        assert ca_bundle(cp) == stored["ca.crt"]
        # kube-apiserver calls the webhook over TLS, trusting the injected CA
        denied = eventually(lambda: (r := create(cp, "bad", {"bad": "1"})).returncode != 0 and r, "a denial")
        assert "data.bad" in denied.stderr and "is not allowed here" in denied.stderr
        assert create(cp, "good", {"ok": "1"}).returncode == 0

        # a second replica reuses what the first one made
        second = Served(cp.kubeconfig_path, free_port(), tmp_path / "b", spec())
        other = second.start()
        try:
            assert other.cert_rotator is not None and other.cert_rotator.renewals == 0
            assert (tmp_path / "b" / "tls.crt").read_bytes() == stored["tls.crt"]
            assert secret(cp) == stored
        finally:
            second.stop()
    finally:
        first.stop()


def test_an_expiring_certificate_is_renewed_with_the_same_ca(
    cp: ControlPlane, port: int, tmp_path: Path
) -> None:
    served = Served(cp.kubeconfig_path, port, tmp_path / "c", spec(check_interval=0.5))
    manager = served.start()
    try:
        rotator = manager.cert_rotator
        assert rotator is not None and rotator.renewals == 0
        # the Secret now holds a certificate about to expire (as if a year had passed)
        stored = secret(cp)
        expiring = make_serving(
            KeyPair(stored["ca.key"], stored["ca.crt"]), ["127.0.0.1"], dt.timedelta(minutes=2)
        )
        obj = cp.api.call("GET", f"/api/v1/namespaces/{NS}/secrets/{SECRET}")
        obj["data"]["tls.crt"] = base64.b64encode(expiring.cert_pem).decode()
        obj["data"]["tls.key"] = base64.b64encode(expiring.key_pem).decode()
        cp.api.call("PUT", f"/api/v1/namespaces/{NS}/secrets/{SECRET}", obj)
        eventually(lambda: rotator.renewals == 1, "the running Manager to renew the certificate")
        renewed = secret(cp)
        assert renewed["tls.crt"] not in (stored["tls.crt"], expiring.cert_pem)
        cert = x509.load_pem_x509_certificate(renewed["tls.crt"])
        assert cert.not_valid_after_utc - dt.datetime.now(dt.UTC) > dt.timedelta(days=300)
        assert renewed["ca.crt"] == stored["ca.crt"] == ca_bundle(cp)
        assert (tmp_path / "c" / "tls.crt").read_bytes() == renewed["tls.crt"]
        denied = eventually(lambda: (r := create(cp, "bad2", {"bad": "1"})).returncode != 0 and r, "a denial")
        assert "data.bad" in denied.stderr
    finally:
        served.stop()


async def test_two_rotators_racing_for_a_missing_secret_create_it_once(
    cp: ControlPlane, tmp_path: Path
) -> None:
    race = CertSecret("rotator-e2e-race", hosts=("svc.rotator-e2e.svc",), namespace=NS)
    async with Client(load_kubeconfig(cp.kubeconfig_path, qps=None)) as client:
        rotators = [CertRotator(client, race, cert_dir=tmp_path / str(i)) for i in range(3)]
        bundles = await asyncio.gather(*(r.ensure() for r in rotators))
    assert sum(r.renewals for r in rotators) == 1
    assert len(set(bundles)) == 1
    assert len({(tmp_path / str(i) / "tls.crt").read_bytes() for i in range(3)}) == 1
