"""Admission and conversion webhooks called by the real kube-apiserver on loopback.

The Manager serves the CronTab example's webhooks (validation on v1beta1, defaulting on v1,
conversion between them) plus a raising validator on labelled ConfigMaps, over HTTPS with a
generated CA; the API server reaches them at clientConfig.url https://127.0.0.1:PORT.
A module of its own control plane: webhook configurations are cluster-wide.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from examples.crontab.main import install, manifests, webhooks

from kubeop.client import Client, load_kubeconfig
from kubeop.core.resource import ApiResource
from kubeop.kinds import ConfigMap
from kubeop.manager import Manager, Serving
from kubeop.testing import ControlPlane
from kubeop.webhook import (
    Denied,
    Endpoint,
    FieldError,
    Webhooks,
    issue_serving,
    local_certificates,
    validating,
    webhook_configurations,
)

pytestmark = pytest.mark.controlplane

NS = "webhook-e2e"
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
CRONTABS = "/apis/stable.example.com/{version}/namespaces/webhook-e2e/crontabs"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"


@validating(CONFIGMAPS, name="raising.e2e.kubeop.dev", object_selector={"matchLabels": {"e2e": "raise"}})
def raising(new: dict[str, Any]) -> None:
    raise RuntimeError("the quota service is unreachable")


@validating(
    CONFIGMAPS,
    name="slow.e2e.kubeop.dev",
    timeout_seconds=2,
    object_selector={"matchLabels": {"e2e": "slow"}},
)
async def slow(new: dict[str, Any]) -> None:
    await asyncio.sleep(30)


@validating(ConfigMap, name="typed.e2e.kubeop.dev", object_selector={"matchLabels": {"e2e": "typed"}})
def typed(new: ConfigMap) -> None:
    """A typed built-in kind, as the client verbs take it: the handler gets a ConfigMap."""
    if not isinstance(new, ConfigMap):
        raise TypeError(f"got a {type(new).__name__}, not a ConfigMap")
    if "forbidden" in (new.data or {}):
        raise Denied(fields=[FieldError("data.forbidden", "this key is not allowed")])


def _down(policy: str) -> Any:
    @validating(
        CONFIGMAPS,
        name=f"{policy.lower()}.down.e2e.kubeop.dev",
        path=f"/down-{policy.lower()}",
        failure_policy=policy,  # type: ignore[arg-type]
        timeout_seconds=2,
        object_selector={"matchLabels": {"e2e": f"down-{policy.lower()}"}},
    )
    def never_called(new: dict[str, Any]) -> None:
        raise AssertionError("no server listens for this webhook")

    return never_called


class ManagerThread:
    """A Manager serving only webhooks, on its own event loop in a thread."""

    def __init__(self, kubeconfig: str, served: Webhooks, cert_dir: Path) -> None:
        self.kubeconfig, self.served, self.cert_dir = kubeconfig, served, cert_dir
        self.manager: Manager | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop_event: asyncio.Event | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        async with Client(load_kubeconfig(self.kubeconfig, qps=None)) as client:
            self.loop, self.stop_event = asyncio.get_running_loop(), asyncio.Event()
            self.manager = Manager(
                client,
                name="webhook-e2e",
                webhooks=self.served,
                serving=Serving(
                    metrics_address=None,
                    health_address=None,
                    webhook_address="127.0.0.1:0",
                    webhook_cert_dir=str(self.cert_dir),
                ),
            )
            await self.manager.start(self.stop_event)

    def start(self) -> Any:
        self.thread.start()
        eventually(
            lambda: (
                self.manager is not None
                and self.manager.webhook_server is not None
                and self.manager.webhook_server.ready()
            ),
            "the webhook server to listen",
        )
        assert self.manager is not None and self.manager.webhook_server is not None
        return self.manager.webhook_server

    def stop(self) -> None:
        if self.loop is not None and self.stop_event is not None:
            self.loop.call_soon_threadsafe(self.stop_event.set)
        self.thread.join(15)


def eventually(check: Callable[[], Any], what: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def cp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with ControlPlane(full=False) as plane:
        plane.create_namespace(NS)
        yield plane


@pytest.fixture(scope="module")
def env(cp: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    cert_dir = tmp_path_factory.mktemp("webhook-certs")
    certs = local_certificates(cert_dir)
    runner = ManagerThread(cp.kubeconfig_path, Webhooks([*webhooks, raising, slow, typed]), cert_dir)
    server = runner.start()
    try:
        endpoint = Endpoint.url(server.url, ca_bundle=certs.ca_pem)
        down = Endpoint.url(f"https://127.0.0.1:{free_port()}", ca_bundle=certs.ca_pem)
        crd, *crontab_configs = manifests(endpoint)  # the example's: python -m examples.crontab
        cp.install_crds([crd])
        configs = [
            *crontab_configs,
            *webhook_configurations([raising, slow, typed], "e2e-raising", endpoint),
            *webhook_configurations([_down("Fail"), _down("Ignore")], "e2e-down", down),
        ]
        for config in configs:
            plural = config["kind"].lower() + "s"
            cp.api.call("POST", f"{ADMISSION}/{plural}", config)
        # The API server picks configurations up from its informer: wait until a denial shows.
        eventually(
            lambda: "spec.cronSpec" in create_v1beta1(cp, "probe", "x").stderr, "the webhooks to apply"
        )
        yield {"server": server, "cert_dir": cert_dir, "configs": configs, "endpoint": endpoint}
    finally:
        runner.stop()


def create_v1beta1(cp: ControlPlane, name: str, cron: str, **spec: Any) -> Any:
    obj = {
        "apiVersion": "stable.example.com/v1beta1",
        "kind": "CronTab",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"cronSpec": cron, "image": "busybox", **spec},
    }
    return cp.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)


def create_v1(cp: ControlPlane, name: str, schedule: dict[str, str], **spec: Any) -> Any:
    obj = {
        "apiVersion": "stable.example.com/v1",
        "kind": "CronTab",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"schedule": schedule, "image": "busybox", **spec},
    }
    return cp.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)


def get(cp: ControlPlane, version: str, name: str) -> Any:
    return cp.api.call("GET", f"{CRONTABS.format(version=version)}/{name}")


def test_an_invalid_cron_expression_is_denied_naming_the_field(cp: ControlPlane, env: Any) -> None:
    res = create_v1beta1(cp, "bad", "61 * * * *")
    assert res.returncode != 0
    # kubectl prints an Invalid status by its causes, as for the API server's own validation
    assert "The CronTab \"bad\" is invalid: spec.cronSpec: minute '61' is outside 0-59" in res.stderr
    obj = {
        "apiVersion": "stable.example.com/v1beta1",
        "kind": "CronTab",
        "metadata": {"name": "bad"},
        "spec": {"cronSpec": "* * * * * *", "image": "i"},
    }
    status, body = cp.api.raw("POST", CRONTABS.format(version="v1beta1"), obj)
    error = json.loads(body)
    assert (status, error["reason"]) == (422, "Invalid")
    assert error["message"] == (
        'admission webhook "vcrontab.stable.example.com" denied the request: '
        "spec.cronSpec: '* * * * * *' has 6 space-separated fields, a cron expression has 5"
    )
    assert [c["field"] for c in error["details"]["causes"]] == ["spec.cronSpec"]
    # matchPolicy Equivalent: a v1 write is converted to v1beta1 for the validator
    res = create_v1(cp, "bad-v1", {"minute": "*", "hour": "25"})
    assert res.returncode != 0 and "spec.cronSpec: hour '25' is outside 0-23" in res.stderr


def test_what_a_cronjob_accepts_is_accepted(cp: ControlPlane, env: Any) -> None:
    assert create_v1beta1(cp, "hourly", "@hourly").returncode == 0
    # the defaulter writes a descriptor as five fields, so the object converts to v1 (storage)
    assert get(cp, "v1beta1", "hourly")["spec"]["cronSpec"] == "0 * * * *"
    assert get(cp, "v1", "hourly")["spec"]["schedule"]["minute"] == "0"
    assert create_v1beta1(cp, "mondays", "0 0 * * MON").returncode == 0
    assert create_v1(cp, "januaries", {"minute": "0", "hour": "0", "month": "JAN"}).returncode == 0
    assert get(cp, "v1beta1", "januaries")["spec"]["cronSpec"] == "0 0 * JAN *"
    res = create_v1beta1(cp, "zoned", "TZ=Europe/Berlin 0 0 * * *")
    assert res.returncode != 0 and "set the timeZone field instead" in res.stderr


def test_a_typed_built_in_kinds_webhook(cp: ControlPlane, env: Any) -> None:
    res = cp.kubectl("create", "configmap", "typed", "-n", NS, "--dry-run=client", "-o", "json")
    cm = json.loads(res.stdout)
    cm["metadata"]["labels"] = {"e2e": "typed"}
    cm["data"] = {"fine": "1"}
    assert cp.kubectl("create", "-f", "-", input=json.dumps(cm), check=False).returncode == 0
    cm["metadata"]["name"], cm["data"] = "typed-denied", {"forbidden": "1"}
    res = cp.kubectl("create", "-f", "-", input=json.dumps(cm), check=False)
    assert res.returncode != 0
    assert 'The ConfigMap "typed-denied" is invalid: data.forbidden: this key is not allowed' in res.stderr


def test_replicas_is_defaulted_on_create(cp: ControlPlane, env: Any) -> None:
    assert create_v1beta1(cp, "defaulted", "*/5 * * * *").returncode == 0
    assert create_v1(cp, "defaulted-v1", {"minute": "0"}).returncode == 0
    assert create_v1(cp, "given", {"minute": "0"}, replicas=3).returncode == 0
    assert get(cp, "v1beta1", "defaulted")["spec"]["replicas"] == 1
    assert get(cp, "v1", "defaulted-v1")["spec"]["replicas"] == 1
    assert get(cp, "v1", "given")["spec"]["replicas"] == 3


def test_objects_convert_both_ways(cp: ControlPlane, env: Any) -> None:
    assert create_v1beta1(cp, "written-v1beta1", "0 3 * * 1-5").returncode == 0
    assert create_v1(cp, "written-v1", {"minute": "*/10", "dayOfWeek": "0"}).returncode == 0
    v1 = get(cp, "v1", "written-v1beta1")
    assert v1["apiVersion"] == "stable.example.com/v1"
    assert v1["spec"]["schedule"] == {
        "minute": "0",
        "hour": "3",
        "dayOfMonth": "*",
        "month": "*",
        "dayOfWeek": "1-5",
    }
    old = get(cp, "v1beta1", "written-v1")
    assert old["apiVersion"] == "stable.example.com/v1beta1"
    assert old["spec"] == {"cronSpec": "*/10 * * * 0", "image": "busybox", "replicas": 1}
    assert old["metadata"]["uid"] == get(cp, "v1", "written-v1")["metadata"]["uid"]
    listed = cp.api.call("GET", CRONTABS.format(version="v1beta1"))
    assert {o["metadata"]["name"]: o["spec"]["cronSpec"] for o in listed["items"]}["written-v1"] == (
        "*/10 * * * 0"
    )
    res = cp.kubectl("get", "crontabs.v1beta1.stable.example.com", "-n", NS, "written-v1", "-o", "yaml")
    assert yaml.safe_load(res.stdout)["spec"]["cronSpec"] == "*/10 * * * 0"
    assert "deprecated" in res.stderr  # the v1beta1 deprecation warning
    crd = cp.api.call(
        "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com"
    )
    assert crd["status"]["storedVersions"] == ["v1"]
    assert crd["spec"]["conversion"]["strategy"] == "Webhook"


def test_warnings_reach_the_client(cp: ControlPlane, env: Any) -> None:
    res = create_v1beta1(cp, "many", "* * * * *", replicas=7)
    assert res.returncode == 0
    assert "Warning: spec.replicas is 7: more than 5 runs at once" in res.stderr


def test_a_raising_handler_denies_with_its_message(cp: ControlPlane, env: Any) -> None:
    res = cp.kubectl("create", "configmap", "raise", "-n", NS, "--dry-run=client", "-o", "json")
    cm = json.loads(res.stdout)
    cm["metadata"]["labels"] = {"e2e": "raise"}
    res = cp.kubectl("create", "-f", "-", input=json.dumps(cm), check=False)
    assert res.returncode != 0
    assert (
        'admission webhook "raising.e2e.kubeop.dev" denied the request: the quota service is unreachable'
        in res.stderr
    )
    assert env["server"].ready()  # the manager carries on serving
    assert create_v1beta1(cp, "after-raise", "* * * * *").returncode == 0


def test_the_example_installs_itself_with_server_side_apply(cp: ControlPlane, env: Any) -> None:
    async def run() -> None:
        async with Client(load_kubeconfig(cp.kubeconfig_path, qps=None)) as client:
            await install(client, env["endpoint"])  # what python -m examples.crontab does first

    asyncio.run(run())
    assert create_v1beta1(cp, "reinstalled", "1 * * * *").returncode == 0
    assert create_v1beta1(cp, "reinstalled-bad", "1 * * *").returncode != 0


def configmap(cp: ControlPlane, name: str, label: str) -> Any:
    cm = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "labels": {"e2e": label}},
    }
    return cp.kubectl("create", "-f", "-", input=json.dumps(cm), check=False)


def test_a_handler_slower_than_timeout_seconds_is_a_denial_in_time(cp: ControlPlane, env: Any) -> None:
    t0 = time.monotonic()
    res = configmap(cp, "slow", "slow")
    elapsed = time.monotonic() - t0
    assert res.returncode != 0
    assert 'admission webhook "slow.e2e.kubeop.dev" denied the request' in res.stderr
    assert "did not answer within 2 s" in res.stderr
    assert elapsed < 5


def test_failure_policy_with_the_webhook_server_down(cp: ControlPlane, env: Any) -> None:
    res = configmap(cp, "fail", "down-fail")
    assert res.returncode != 0
    assert 'failed calling webhook "fail.down.e2e.kubeop.dev"' in res.stderr
    assert "connection refused" in res.stderr
    assert configmap(cp, "ignore", "down-ignore").returncode == 0


def test_a_rotated_certificate_is_used_without_a_restart(cp: ControlPlane, env: Any) -> None:
    server, cert_dir = env["server"], env["cert_dir"]
    # 1. A new serving certificate from the same CA: the next call shakes hands with it.
    issue_serving(cert_dir)
    eventually(lambda: server.certificate_reloads == 1, "the new certificate to load")
    assert create_v1beta1(cp, "after-rotation", "* * * * *").returncode == 0
    assert server.handshakes_since_reload >= 1
    # 2. A certificate from a CA the API server does not trust yet: calls fail, which shows the
    #    server presents the new certificate; registering the new CA makes them work again.
    other = cert_dir.parent / "other-ca"
    new = issue_serving(other)
    shutil.copy(other / "tls.key", cert_dir / "tls.key")
    shutil.copy(other / "tls.crt", cert_dir / "tls.crt")
    eventually(lambda: server.certificate_reloads == 2, "the certificate of the new CA to load")
    res = create_v1beta1(cp, "untrusted", "* * * * *")
    assert res.returncode != 0 and "x509" in res.stderr
    bundle = base64.b64encode(new.ca_pem).decode()
    for config in env["configs"]:
        if config["metadata"]["name"].startswith("e2e-down"):
            continue
        plural = config["kind"].lower() + "s"
        patch = [
            {"op": "replace", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
            for i in range(len(config["webhooks"]))
        ]
        cp.api.call(
            "PATCH",
            f"{ADMISSION}/{plural}/{config['metadata']['name']}",
            patch,
            "application/json-patch+json",
        )
    cp.api.call(
        "PATCH",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/crontabs.stable.example.com",
        [{"op": "replace", "path": "/spec/conversion/webhook/clientConfig/caBundle", "value": bundle}],
        "application/json-patch+json",
    )
    eventually(
        lambda: create_v1beta1(cp, "trusted-again", "* * * * *").returncode == 0, "the new CA to apply"
    )
