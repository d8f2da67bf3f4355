"""The overview's webhooks panel: each webhook path with its requests (and their rate), requests in
flight, p50/p99 latency, denials (admission reviews answered ``allowed: false``) and 5xx errors;
told by the webhooks themselves, only while a dashboard listens."""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubeop.controller import Controller
from kubeop.core.resource import ApiResource
from kubeop.dashboard.traffic import WebhookTraffic
from kubeop.manager import Dashboard, Manager, Serving
from kubeop.testing import FakeCluster
from kubeop.webhook import Denied, Webhooks, validating
from kubeop.webhook import registry as webhook_registry
from kubeop.webhook.certs import local_certificates
from kubeop.webhook.review import admission_denied, admission_response

from .test_manager_dashboard import _eventually, _get, _running

CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")


@validating(CONFIGMAPS, name="vcm.dashboard.kubeop.dev")
def _no_bad_names(new: dict[str, Any]) -> None:
    if new["metadata"]["name"].startswith("bad"):
        raise Denied(f"name {new['metadata']['name']!r} is not allowed")


def _review(name: str, uid: str = "u") -> bytes:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}}
    request = {"uid": uid, "operation": "CREATE", "object": cm, "kind": {"kind": "ConfigMap"}}
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})


def _post(url: str, body: bytes, ca: Path) -> tuple[int, dict[str, Any]]:
    ctx = ssl.create_default_context(cafile=str(ca))
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
            return resp.status, orjson.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, orjson.loads(exc.read())


async def test_the_overview_shows_each_webhooks_requests_latency_and_denials(tmp_path: Path) -> None:
    local_certificates(tmp_path)
    serving = Serving(
        metrics_address=None,  # the panel needs no metrics registry
        health_address=None,
        webhook_address="127.0.0.1:0",
        webhook_cert_dir=str(tmp_path),
    )
    manager = Manager(
        FakeCluster().client(),
        serving=serving,
        webhooks=Webhooks([_no_bad_names]),
        dashboard=Dashboard(address="127.0.0.1:0", refresh=0.1),
    )
    manager.add(Controller.for_("configmaps").named("widgets").reconcile(lambda req, ctx: None))
    path = _no_bad_names.path
    async with _running(manager):
        assert manager.dashboard_server is not None and manager.webhook_server is not None
        port, url = manager.dashboard_server.port, manager.webhook_server.url + path
        overview = orjson.loads((await _get(port, "/api/overview"))[1])
        assert overview["webhooks"] == [
            {
                "path": path,
                "kind": "AdmissionWebhook",
                "type": "validating",
                "requests": 0,
                "requests_per_s": 0.0,
                "in_flight": 0,
                "p50": None,
                "p99": None,
                "denials": 0,
                "errors": 0,
            }
        ]
        answers = []
        for name in ("good-1", "bad-1", "good-2", "bad-2", "good-3"):
            answers.append(await asyncio.to_thread(_post, url, _review(name), tmp_path / "ca.crt"))
        status, _ = await asyncio.to_thread(_post, url, b'{"kind": "nonsense"}', tmp_path / "ca.crt")
        assert [a[1]["response"]["allowed"] for a in answers] == [True, False, True, False, True]
        assert status == 400

        async def served() -> dict[str, Any] | None:
            rows = orjson.loads((await _get(port, "/api/overview"))[1])["webhooks"]
            return rows[0] if rows[0]["requests"] == 6 else None

        row = await _eventually(served, 5, "six webhook requests on the overview")
        assert (row["path"], row["denials"], row["errors"], row["in_flight"]) == (path, 2, 0, 0)
        assert row["requests_per_s"] > 0
        assert 0 < row["p50"] <= row["p99"] < 5
        recorder = manager._dashboard.recorder if manager._dashboard is not None else None
    assert recorder is not None
    # the run over, the recorder is no longer told
    assert manager.webhooks is not None
    await manager.webhooks.handle(path, _review("bad-3"))
    assert recorder.webhooks.row(path, 0.0, 60)["requests"] == 6


async def test_without_listeners_the_answer_is_not_looked_at(monkeypatch: pytest.MonkeyPatch) -> None:
    def looked(payload: bytes) -> bool:
        raise AssertionError("the verdict was read with nobody listening")

    monkeypatch.setattr(webhook_registry, "admission_denied", looked)
    webhooks = Webhooks([_no_bad_names])
    status, body = await webhooks.handle(_no_bad_names.path, _review("bad"))
    assert status == 200 and orjson.loads(body)["response"]["allowed"] is False


async def test_a_listener_is_told_of_each_request_with_its_verdict() -> None:
    told: list[tuple[Any, ...]] = []

    class Listener:
        def started(self, path: str) -> None:
            told.append(("started", path))

        def finished(self, path: str, status: int, seconds: float, denied: bool) -> None:
            told.append(("finished", path, status, denied))

    webhooks = Webhooks([_no_bad_names])
    listener = Listener()
    webhooks.add_listener(listener)
    webhooks.add_listener(listener)  # once only
    path = _no_bad_names.path
    await webhooks.handle(path, _review("good"))
    await webhooks.handle(path, _review("bad"))
    await webhooks.handle(path, b"{}")
    await webhooks.handle("/elsewhere", _review("bad"))  # no webhook there: not told
    assert told == [
        ("started", path),
        ("finished", path, 200, False),
        ("started", path),
        ("finished", path, 200, True),
        ("started", path),
        ("finished", path, 400, False),
    ]
    webhooks.remove_listener(listener)
    await webhooks.handle(path, _review("bad"))
    assert len(told) == 6


@pytest.mark.parametrize(
    "uid",
    ["u", 'x","allowed":false', 'x\\","allowed":false,"y":"', '"allowed":true}', "allowed:false"],
)
@pytest.mark.parametrize("allowed", [True, False])
def test_the_verdict_is_read_from_the_encoded_answer_whatever_the_uid(uid: str, allowed: bool) -> None:
    status = None if allowed else {"message": '"allowed":true', "code": 403}
    payload = admission_response(uid, allowed=allowed, status=status, warnings=['"allowed":false'])
    assert admission_denied(payload) is (not allowed)


def test_traffic_rates_percentiles_and_totals_over_the_window() -> None:
    clock = [1000.0]
    traffic = WebhookTraffic(step=5.0, length=12, clock=lambda: clock[0])
    traffic.started("/v")
    assert traffic.row("/v", 1000.0, 60)["in_flight"] == 1
    traffic.finished("/v", 200, 0.010, False)
    for seconds in (0.020, 0.030, 0.040):
        traffic.started("/v")
        traffic.finished("/v", 200, seconds, True)
    traffic.started("/v")
    traffic.finished("/v", 500, 0.5, False)
    traffic.started("/v")  # one still being answered
    row = traffic.row("/v", 1004.0, 60)
    assert (row["requests"], row["denials"], row["errors"], row["in_flight"]) == (5, 3, 1, 1)
    assert (row["p50"], row["p99"]) == (0.030, 0.5)
    assert row["requests_per_s"] == pytest.approx(5 / 59.0)
    # a minute later the window is empty; the totals stay
    later = traffic.row("/v", 1100.0, 60)
    assert (later["requests"], later["requests_per_s"], later["p50"], later["p99"]) == (5, 0.0, None, None)
    assert traffic.row("/unknown", 1100.0, 60)["requests"] == 0
    assert traffic.paths == ["/v"]
    with pytest.raises(ValueError, match="step > 0"):
        WebhookTraffic(step=0)
