"""The dashboard in a real browser (headless Debian chromium, driven by Selenium and chromedriver)
against a Manager on the local control plane: the overview lists the controllers and its webhook
with the requests it answered and denied; a Widget made to fail is on the errors page with its
message within 2 s and gone once fixed; the object page shows its reconciles and the ConfigMap it
owns. Each page's screenshot goes to docs/assets/.

Without chromium (``/usr/bin/chromium``) the tests are skipped on a developer's machine and fail
in CI (``KUBEOP_CI`` or ``CI`` set: ``.ci/run`` installs chromium and sets ``KUBEOP_CI``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import ssl
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubeop.controller import Context, Controller, Request, set_condition, set_controller_reference
from kubeop.core.resource import ApiResource
from kubeop.manager import Dashboard, Manager, Serving
from kubeop.testing import ControlPlane
from kubeop.webhook import Denied, Webhooks, validating
from kubeop.webhook.certs import local_certificates
from tests.e2e.controller.conftest import client_for, running
from tests.support.crds import widget_crd

pytestmark = pytest.mark.controlplane

GROUP = "dashboard.kubeop.dev"
WIDGETS = ApiResource(GROUP, "v1", "widgets", kind="Widget")
CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ASSETS = Path(__file__).resolve().parents[3] / "docs" / "assets"


def _browser_or_skip() -> Any:
    """A headless chromium (Selenium); skipped without it on a dev box, a failure in CI."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not (os.path.exists(p) or shutil.which(p))]
    if missing:
        message = f"{' and '.join(missing)} missing: apt-get install chromium chromium-driver"
        if os.environ.get("KUBEOP_CI") or os.environ.get("CI"):
            pytest.fail(f"the dashboard's browser tests run in CI: {message}")
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,900"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@pytest.fixture
def browser() -> Iterator[Any]:
    driver = _browser_or_skip()
    driver.set_page_load_timeout(20)
    try:
        yield driver
    finally:
        driver.quit()


def _widget(ns: str, name: str, value: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"value": value},
    }


@validating(WIDGETS, name="vwidget.dashboard.kubeop.dev")
def _no_forbidden_values(new: dict[str, Any]) -> None:
    if new.get("spec", {}).get("value") == "forbidden":
        raise Denied("value 'forbidden' is not allowed")


def _admit(url: str, ca: Path, value: str) -> bool:
    """Post an AdmissionReview of a Widget to the webhook server, as the API server would."""
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": value, "operation": "CREATE", "object": _widget("default", value, value)},
    }
    body = orjson.dumps(review)
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, context=ssl.create_default_context(cafile=str(ca)), timeout=5) as resp:
        return bool(orjson.loads(resp.read())["response"]["allowed"])


def _operator(namespace: str, kubeconfig: str, cert_dir: Path) -> Manager:
    async def reconcile(req: Request, ctx: Context) -> None:
        widget = await ctx.client.get(WIDGETS, req.name, namespace=req.namespace)
        if widget is None:
            return
        value = widget.get("spec", {}).get("value", "")
        ctx.log.info("widget %s has value %r", req.name, value)
        if value == "fail":
            raise RuntimeError(f"widget {req.name}: value 'fail' is refused")
        config = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"{req.name}-config", "namespace": req.namespace},
            "data": {"value": value},
        }
        set_controller_reference(widget, config)
        await ctx.client.apply(config)
        conditions = list(widget.get("status", {}).get("conditions") or [])
        if set_condition(
            conditions, "Ready", True, "Configured", f"ConfigMap {req.name}-config holds {value!r}"
        ):
            await ctx.client.patch_status(widget, {"conditions": conditions})
            ctx.recorder.event(widget, "Normal", "Configured", f"ConfigMap {req.name}-config written")

    manager = Manager(
        client_for(kubeconfig),
        name="widget-operator",
        serving=Serving(
            metrics_address=None,
            health_address=None,
            webhook_address="127.0.0.1:0",
            webhook_cert_dir=str(cert_dir),
        ),
        webhooks=Webhooks([_no_forbidden_values]),
        dashboard=Dashboard(address="127.0.0.1:0"),
    )
    manager.add(
        Controller.for_(WIDGETS, namespace=namespace).owns(CONFIGMAPS).named("widgets").reconcile(reconcile)
    )
    return manager


async def _until(browser: Any, check: Callable[[Any], Any], timeout: float, what: str) -> float:
    """Seconds until ``check(browser)`` is truthy (polled in a thread: Selenium blocks)."""
    started = time.monotonic()
    last: Any = None
    while time.monotonic() - started < timeout:
        try:
            last = await asyncio.to_thread(check, browser)
        except Exception as exc:  # the page is being re-rendered: try again
            last = exc
        if last:
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {what} within {timeout} s (last: {last!r})")


def _text(selector: str) -> Callable[[Any], str]:
    from selenium.webdriver.common.by import By

    return lambda browser: browser.find_element(By.CSS_SELECTOR, selector).text


def _cells(selector: str) -> Callable[[Any], list[str]]:
    from selenium.webdriver.common.by import By

    return lambda browser: [td.text for td in browser.find_elements(By.CSS_SELECTOR, selector + " td")]


def _texts(selector: str) -> Callable[[Any], list[str]]:
    from selenium.webdriver.common.by import By

    return lambda browser: [e.text for e in browser.find_elements(By.CSS_SELECTOR, selector)]


async def _shot(browser: Any, name: str) -> None:
    ASSETS.mkdir(parents=True, exist_ok=True)
    await asyncio.to_thread(browser.save_screenshot, str(ASSETS / f"dashboard-{name}.png"))


@pytest.fixture
def info_logs() -> Iterator[None]:
    """The reconciles' INFO lines are logged (the object page shows them), as an operator's are."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.setLevel(level)


@pytest.mark.usefixtures("info_logs")
async def test_the_dashboard_in_a_browser(
    control_plane: ControlPlane, namespace: str, browser: Any, tmp_path: Path
) -> None:
    control_plane.install_crds([widget_crd(GROUP)])
    local_certificates(tmp_path)
    async with client_for(control_plane.kubeconfig_path) as client:
        for name in ("alpha", "beta", "gamma"):
            await client.create(_widget(namespace, name, name))
        async with running(_operator(namespace, control_plane.kubeconfig_path, tmp_path)) as manager:
            server = manager.dashboard_server
            assert server is not None and manager.webhook_server is not None
            url = server.url
            hook = manager.webhook_server.url + _no_forbidden_values.path
            verdicts = [
                await asyncio.to_thread(_admit, hook, tmp_path / "ca.crt", value)
                for value in ("one", "forbidden", "two")
            ]
            assert verdicts == [True, False, True]

            # Overview: the controller, live
            await asyncio.to_thread(browser.get, url + "#overview")
            await _until(browser, lambda b: "widgets" in _text("#controllers tbody")(b), 10, "controller row")
            await _until(browser, lambda b: "live" in _text("#live")(b), 10, "live stream")
            await _until(browser, lambda b: "syncing" not in _text("#cache")(b), 10, "synced caches")
            webhook_row = f'#webhooks tr[data-webhook="{_no_forbidden_values.path}"]'
            await _until(browser, lambda b: _cells(webhook_row)(b)[2] == "3", 10, "the webhook's requests")
            cells = _cells(webhook_row)(browser)
            assert (cells[1], cells[2], cells[4], cells[7], cells[8]) == ("validating", "3", "0", "1", "0")
            assert cells[5].endswith("ms") and cells[6].endswith("ms")  # p50, p99
            await _shot(browser, "overview")

            # Errors: a Widget made to fail shows within 2 s, with its message; gone once fixed
            await asyncio.to_thread(browser.get, url + "#errors")
            await _until(
                browser, lambda b: "No object is failing" in _text("#page-errors")(b), 10, "empty errors"
            )
            await client.patch(WIDGETS, "beta", {"spec": {"value": "fail"}}, namespace=namespace)
            seconds = await _until(
                browser,
                lambda b: "value 'fail' is refused" in _text("#error-groups")(b),
                2.0,
                "failing widget",
            )
            assert "beta" in _text("#error-groups")(browser)
            await _shot(browser, "errors")
            await client.patch(WIDGETS, "beta", {"spec": {"value": "fixed"}}, namespace=namespace)
            await _until(browser, lambda b: "beta" not in _text("#error-groups")(b), 10, "fixed widget gone")
            print(f"failing widget on the errors page after {seconds:.2f} s")

            # Object: its reconciles and the ConfigMap it owns
            await asyncio.to_thread(
                browser.get, url + f"#object?kind=Widget&namespace={namespace}&name=alpha"
            )
            await _until(browser, lambda b: "alpha-config" in _text("#owned")(b), 10, "owned ConfigMap")
            await _until(browser, lambda b: "success" in _text("#reconciles")(b), 10, "reconciles")
            await _until(browser, lambda b: "Configured" in _text("#events")(b), 10, "the Widget's Events")
            await _until(browser, lambda b: "Ready" in _text("#conditions")(b), 10, "the Widget's conditions")
            await _until(browser, lambda b: "lines" in _text("#reconciles")(b), 10, "a reconcile's log lines")
            # the first reconcile applied the ConfigMap and patched the status: 2 writes; later ones apply
            await _until(
                browser, lambda b: "2" in _texts("#reconciles td.writes")(b), 10, "a reconcile's writes"
            )
            assert set(_texts("#reconciles td.writes")(browser)) <= {"0", "1", "2"}
            assert "widgets" in _text("#shard-owner")(browser)
            assert "this replica" in _text("#shard-owner")(browser)
            await _shot(browser, "object")
