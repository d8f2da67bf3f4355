"""The webhook server's caps set from the Manager: ``Serving(webhook_limits=WebhookLimits(...))``
reaches the server it starts (a body over ``max_body`` gets 413, a silent connection is closed
after ``header_timeout``); the defaults are the server's own; nonsense is refused when built."""

from __future__ import annotations

import asyncio
import inspect
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest
from examples.crontab.webhooks.crontab_v1beta1 import default

from kubeop.client import Client
from kubeop.client.config import ClientConfig
from kubeop.manager import Manager, Serving, WebhookLimits
from kubeop.webhook import Webhooks
from kubeop.webhook.certs import local_certificates
from kubeop.webhook.server import WebhookServer

BOUND = 10.0


def _post(url: str, body: bytes, ca: Path) -> int:
    ctx = ssl.create_default_context(cafile=str(ca))
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return exc.code


async def test_the_managers_webhook_limits_reach_its_webhook_server(tmp_path: Path) -> None:
    local_certificates(tmp_path)
    client = Client(ClientConfig(server="https://127.0.0.1:1"))  # never called: no controllers
    limits = WebhookLimits(max_body=2048, max_connections=8, max_bytes_in_flight=4096, header_timeout=0.3)
    manager = Manager(
        client,
        webhooks=Webhooks([default]),
        serving=Serving(
            metrics_address=None,
            health_address=None,
            webhook_address="127.0.0.1:0",
            webhook_cert_dir=str(tmp_path),
            webhook_limits=limits,
        ),
    )
    stop = asyncio.Event()
    task = asyncio.ensure_future(manager.start(stop))
    try:
        async with asyncio.timeout(BOUND):
            while manager.webhook_server is None or not manager.webhook_server.ready():  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        server = manager.webhook_server
        assert server.max_body == 2048
        review = orjson.dumps(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"uid": "u", "operation": "DELETE", "object": None, "pad": "x" * 100},
            }
        )
        url = f"{server.url}{default.path}"
        assert await asyncio.to_thread(_post, url, review, tmp_path / "ca.crt") == 200
        big = review.replace(b"x" * 100, b"x" * 3000)
        assert await asyncio.to_thread(_post, url, big, tmp_path / "ca.crt") == 413
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        t0 = time.monotonic()
        async with asyncio.timeout(BOUND):
            assert await reader.read() == b""  # a silent connection: closed after header_timeout
        assert 0.2 < time.monotonic() - t0 < 3.0
        writer.close()
    finally:
        stop.set()
        await asyncio.wait_for(task, BOUND)
        await client.close()


def test_the_webhook_limits_default_to_the_servers_own() -> None:
    parameters = inspect.signature(WebhookServer).parameters
    for name, value in vars(WebhookLimits()).items():
        assert parameters[name].default == value, name
    assert Serving().webhook_limits == WebhookLimits()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_body": 0}, r"WebhookLimits\(max_body=0\): must be a whole number of at least 1"),
        ({"max_connections": 1.5}, r"max_connections=1.5"),
        ({"header_timeout": 0}, r"WebhookLimits\(header_timeout=0\): must be a number of seconds above 0"),
        ({"body_timeout": float("nan")}, r"body_timeout=nan"),
        ({"max_body": 10, "max_bytes_in_flight": 5}, r"max_bytes_in_flight=5\) is below max_body=10"),
    ],
)
def test_webhook_limits_that_make_no_sense_are_refused_when_built(
    kwargs: dict[str, float], match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        WebhookLimits(**kwargs)  # type: ignore[arg-type]


def test_webhook_limits_are_no_keyword_of_before() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'webhook_limits'"):
        Manager(webhook_limits=WebhookLimits())  # type: ignore[call-arg]
