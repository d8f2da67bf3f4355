"""The MySQL and DatabaseCluster examples without a cluster: their manifests, quantities, the
mail retry schedule, and the MySQL operator's transition bookkeeping (what makes a mail once)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from examples.dbcluster.api.v1alpha1 import CRD as DBCLUSTER_CRD
from examples.dbcluster.controllers.databasecluster import config_hash, render_config
from examples.kube import Pod, parse_quantity
from examples.mysql.api.v1alpha1 import CRD as MYSQL_CRD
from examples.mysql.api.v1alpha1 import MySQL, MySQLStatus
from examples.mysql.controllers.mysql import MySQLController
from examples.mysql.controllers.notify import Mailer

ROOT = Path(__file__).resolve().parents[3] / "examples"


@pytest.mark.parametrize(
    ("path", "crd"),
    [
        ("mysql/config/crd/bases/db.example.com_mysqls.yaml", MYSQL_CRD),
        ("dbcluster/config/crd/bases/db.example.com_databaseclusters.yaml", DBCLUSTER_CRD),
    ],
)
def test_committed_crds_are_what_the_models_generate(path: str, crd: dict[str, Any]) -> None:
    assert yaml.safe_load((ROOT / path).read_text()) == crd


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1Gi", 2**30),
        ("500Mi", 500 * 2**20),
        ("10G", 10 * 10**9),
        ("1.5Ki", 1536),
        ("100m", Decimal("0.1")),
        ("1e3", 1000),
    ],
)
def test_quantities(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["lots", "12 apples", "1Gb", "", "Gi", "1..2Gi"])
def test_bad_quantities(text: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(text)


def test_mail_backoff_doubles_up_to_its_cap() -> None:
    mailer = Mailer("127.0.0.1", backoff=0.5, backoff_cap=3.0)
    assert [mailer.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_config_hash_ignores_key_order() -> None:
    assert config_hash({"a": "1", "b": "2"}) == config_hash({"b": "2", "a": "1"})
    assert config_hash({"a": "1"}) != config_hash({"a": "2"})
    assert render_config({"b": "2", "a": "1"}) == "a = 1\nb = 2\n"


def _pod(name: str, uid: str, phase: str = "Running", deleting: bool = False) -> Pod:
    md: dict[str, Any] = {"name": name, "uid": uid}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec = {"nodeName": "n1", "containers": [{"name": "mysql"}]}  # kubeop.kinds.Pod requires containers
    return Pod.model_validate({"metadata": md, "spec": spec, "status": {"phase": phase}})


def test_each_transition_is_recorded_once() -> None:
    rec = MySQLController(Mailer("127.0.0.1"))
    db = MySQL.model_validate({"metadata": {"name": "db", "uid": "u"}, "spec": {"notify": ["a@example.com"]}})
    status = MySQLStatus()
    assert rec._notice(db, status, [_pod("db-0", "p0"), _pod("db-1", "p1", phase="Pending")])
    assert [n.id for n in status.outbox] == ["p0/started"]
    # The same observation again (a resync, a restart reading the status back): nothing new.
    status = MySQLStatus.model_validate(status.model_dump(by_alias=True))
    assert not rec._notice(db, status, [_pod("db-0", "p0"), _pod("db-1", "p1", phase="Pending")])
    # db-0 is being deleted, db-1 runs: a stop and a start.
    assert rec._notice(db, status, [_pod("db-0", "p0", deleting=True), _pod("db-1", "p1")])
    assert [n.id for n in status.outbox] == ["p0/started", "p0/stopped", "p1/started"]
    assert [t.name for t in status.pods] == ["db-1"]
    # A failed pod has stopped too.
    assert rec._notice(db, status, [_pod("db-1", "p1", phase="Failed")])
    assert status.outbox[-1].id == "p1/stopped" and not status.pods


def test_no_notify_addresses_no_outbox() -> None:
    rec = MySQLController(Mailer("127.0.0.1"))
    db = MySQL.model_validate({"metadata": {"name": "db", "uid": "u"}, "spec": {}})
    status = MySQLStatus()
    assert rec._notice(db, status, [_pod("db-0", "p0")])
    assert status.pods and not status.outbox
