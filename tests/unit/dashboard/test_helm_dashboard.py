"""A Helm operator runs on the same Manager: its watches' controllers are on the dashboard, and
the object page shows a release's reconciles with the writes each made (FakeHelm stands in for
the helm binary; its own writes go through its own client and are not the reconciler's)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from kubeop.helm import HelmOperator
from kubeop.helm.operator import run as helm_run
from kubeop.helm.watches import Watch
from kubeop.manager import Dashboard, Manager
from kubeop.testing import FakeCluster
from tests.unit.helm.fakes import PHP_CRD, FakeHelm

from .test_manager_dashboard import _NO_PORTS, _eventually, _get, _running


async def test_a_helm_operators_controllers_appear_with_their_reconciles(tmp_path: Path) -> None:
    chart = tmp_path / "php"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: php\nversion: 0.1.0\n")
    fake = FakeCluster()
    fake.add_crd(PHP_CRD)
    admin = fake.client()
    await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns"}})
    await admin.create(
        {
            "apiVersion": "web.example.com/v1",
            "kind": "PhpDeployment",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"image": "php:8.3"},
        }
    )
    operator = HelmOperator(
        [Watch("web.example.com", "v1", "PhpDeployment", chart)],
        helm=FakeHelm(admin),  # type: ignore[arg-type]
    )
    manager = Manager(
        fake.client(),
        name="php-operator",
        serving=_NO_PORTS,
        dashboard=Dashboard(address="127.0.0.1:0", refresh=0.1),
    )
    operator.add_to(manager)
    try:
        async with _running(manager):
            assert manager.dashboard_server is not None
            port = manager.dashboard_server.port

            async def reconciled() -> list[dict[str, Any]]:
                page = orjson.loads((await _get(port, "/api/overview"))[1])
                return [c for c in page["controllers"] if c["reconciles_per_s"]]

            rows = await _eventually(reconciled, 15, "the Helm controller on the overview")
            assert [(c["kind"]) for c in rows] == ["PhpDeployment"]
            assert [c["name"] for c in rows] == [c.name for c in operator.controllers()]

            async def installed() -> dict[str, Any] | None:
                page = orjson.loads(
                    (await _get(port, "/api/object?kind=PhpDeployment&namespace=ns&name=web"))[1]
                )
                return page if any(r["writes"] for r in page["reconciles"]) else None

            page = await _eventually(installed, 15, "the release's reconcile with its writes")
            assert page["found"] is True
            assert page["owner"] == [
                {"controller": rows[0]["name"], "replica": "this replica", "this_replica": True}
            ]
    finally:
        await admin.close()


def test_kubeop_run_dashboard_reaches_the_helm_operators_manager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kubeop run --dashboard`` on a Helm project runs ``python -m kubeop.helm`` with
    KUBEOP_DASHBOARD set; the Manager its ``run()`` builds reads it."""
    chart = tmp_path / "php"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: php\nversion: 0.1.0\n")
    watches = tmp_path / "watches.yaml"
    watches.write_text(f"- group: web.example.com\n  version: v1\n  kind: PhpDeployment\n  chart: {chart}\n")
    started: list[Manager] = []
    monkeypatch.setattr(Manager, "run", lambda self: started.append(self))
    monkeypatch.setenv("KUBEOP_DASHBOARD", "1")
    helm_run(watches)
    (manager,) = started
    assert manager.dashboard == Dashboard()
    assert [c.name for c in manager.controllers] == ["phpdeployment-controller"]
