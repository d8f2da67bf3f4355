"""The Manager serves its webhooks over HTTPS, on every replica, with readiness covering them."""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from pathlib import Path

import orjson
from examples.crontab.webhooks.crontab_v1 import conversion
from examples.crontab.webhooks.crontab_v1beta1 import default, validate

from kubeop.client import Client
from kubeop.client.config import ClientConfig
from kubeop.manager import Manager, Serving
from kubeop.webhook import Webhooks
from kubeop.webhook.certs import local_certificates


def _post(url: str, body: bytes, ca: Path) -> dict[str, object]:
    ctx = ssl.create_default_context(cafile=str(ca))
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
        return orjson.loads(resp.read())  # type: ignore[no-any-return]


def _get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return str(resp.read().decode())
    except urllib.error.HTTPError as exc:
        return str(exc.read().decode())


async def test_the_manager_serves_webhooks_and_reports_them_ready(tmp_path: Path) -> None:
    local_certificates(tmp_path)
    client = Client(ClientConfig(server="https://127.0.0.1:1"))  # never called: no controllers
    manager = Manager(
        client,
        name="webhooks-only",
        webhooks=Webhooks([validate, conversion]),
        serving=Serving(
            metrics_address="127.0.0.1:0",
            health_address="127.0.0.1:0",
            webhook_address="127.0.0.1:0",
            webhook_cert_dir=str(tmp_path),
        ),
    )
    manager.add_webhook(default)
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    try:
        for _ in range(200):
            if manager.webhook_server is not None and manager.webhook_server.ready() and manager.servers:
                break
            await asyncio.sleep(0.01)
        server = manager.webhook_server
        assert server is not None and server.ready()
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": "DELETE", "object": None},
        }
        out = await asyncio.to_thread(
            _post, f"{server.url}{default.path}", orjson.dumps(review), tmp_path / "ca.crt"
        )
        assert out["response"] == {"uid": "u", "allowed": True}
        readyz = await asyncio.to_thread(_get, f"http://127.0.0.1:{manager.servers[0].port}/readyz?verbose")
        assert "[+]webhook ok" in readyz
        for hook in (validate, default, conversion):  # each webhook's stuck calls, on /metrics
            stuck = manager.metrics.registry.get_sample_value(
                "kubeop_webhook_stuck_calls", {"webhook": hook.path}
            )
            assert stuck == 0
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        await client.close()
    assert manager.webhook_server is not None and not manager.webhook_server.ready()
