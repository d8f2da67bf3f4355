"""Seed 000's MySQL operator on the full local control plane, with a real SMTP server.

One run: create -> Secret, Services, StatefulSet (owner references), PVCs bound by the hostPath
provisioner, pods Running, status; a mail per pod start; the operator restarted while a pod is
replaced (exactly one stop and one start mail, none repeated); an SMTP outage during a scale
down (Warning Events, Notified=False, backoff, the mail delivered once SMTP is back); a deleted
Service restored; delete -> the finalizer stops the pods and mails their stops, then garbage
collection leaves nothing.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from examples.kube import PODS, PVCS, SECRETS, SERVICES, STATEFULSETS
from examples.mysql.api.v1alpha1 import CRD, MySQL, sample
from examples.mysql.controllers.mysql import FINALIZER
from examples.mysql.controllers.mysql import controller as mysql_controller
from examples.mysql.controllers.notify import Mailer

from kubeop.client import Client
from kubeop.testing import ControlPlane
from tests.e2e.controller.conftest import client_for, eventually

from .example_support import MailServer, events, gone, mail_server, operator

pytestmark = [pytest.mark.controlplane, pytest.mark.full]

MYSQLS = MySQL.resource
LABELS = "app.kubernetes.io/instance=db"


def _conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in (obj.get("status") or {}).get("conditions", [])}


async def _running_pods(client: Client, ns: str) -> dict[str, dict[str, Any]]:
    pods = await client.list(PODS, namespace=ns, label_selector=LABELS)
    return {
        p["metadata"]["name"]: p
        for p in pods.items
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    }


async def _mails(smtp: MailServer, n: int, what: str, timeout: float = 30) -> list[Any]:
    async def enough() -> Any:
        got = smtp.received()
        return got if len(got) >= n else None

    got = await eventually(enough, timeout, what)
    await asyncio.sleep(1.0)  # and no more than that
    got = smtp.received()
    assert len(got) == n, [m.subject for m in got]
    return got


def _mailer(port: int) -> Mailer:
    return Mailer("127.0.0.1", port, timeout=2.0, backoff=0.3, backoff_cap=2.0)


async def _wait_pods(client: Client, ns: str, n: int, image: str | None = None) -> dict[str, Any]:
    async def ready() -> Any:
        pods = await _running_pods(client, ns)
        if image is not None and any(p["spec"]["containers"][0]["image"] != image for p in pods.values()):
            return None
        return pods if len(pods) == n else None

    result: dict[str, Any] = await eventually(ready, 60, f"{n} pods Running")
    return result


async def test_mysql_statefulset_volumes_and_exactly_once_mail(
    control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.install_crds([CRD])
    ns = namespace
    kubeconfig = control_plane.kubeconfig_path
    with mail_server() as smtp:
        async with operator(kubeconfig, "mysql-operator", [mysql_controller(_mailer(smtp.port))]) as client:
            await client.create(sample("db", ns, replicas=2, notify=["dba@example.com"]))

            async def running() -> Any:
                db = await client.get(MYSQLS, "db", namespace=ns)
                st = db.get("status") or {}
                return db if st.get("readyReplicas") == 2 and st.get("phase") == "Running" else None

            db = await eventually(running, 90, "2 ready pods and phase Running")
            uid = db["metadata"]["uid"]
            assert FINALIZER in db["metadata"]["finalizers"]
            assert _conditions(db)["Ready"] == ("True", "PodsReady")
            for res, name in (
                (STATEFULSETS, "db"),
                (SERVICES, "db"),
                (SERVICES, "db-headless"),
                (SECRETS, "db-root-password"),
            ):
                child = await client.get(res, name, namespace=ns)
                ref = child["metadata"]["ownerReferences"][0]
                assert ref["uid"] == uid and ref["controller"], (res, name)
            headless = await client.get(SERVICES, "db-headless", namespace=ns)
            assert headless["spec"]["clusterIP"] == "None"
            pvcs = await client.list(PVCS, namespace=ns, label_selector=LABELS)
            assert sorted(p["metadata"]["name"] for p in pvcs.items) == ["data-db-0", "data-db-1"]
            assert all(p["status"]["phase"] == "Bound" for p in pvcs.items)
            mails = await _mails(smtp, 2, "a start mail per pod")
            assert sorted(m.subject.split()[3] for m in mails) == ["db-0", "db-1"]
            assert all("started on kwok-node-" in m.subject and m.to == "dba@example.com" for m in mails)
            assert "node:  kwok-node-" in mails[0].body

            # The generated password is never overwritten: change it by hand, it stays.
            await client.patch(SECRETS, "db-root-password", {"data": {"password": "aGFuZA=="}}, namespace=ns)
            # A spec change rolls the pods (one stop and one start mail each).
            await client.patch(MYSQLS, "db", {"spec": {"version": "8.4.1"}}, namespace=ns)
            await _wait_pods(client, ns, 2, image="mysql:8.4.1")
            await _mails(smtp, 6, "a stop and a start mail per rolled pod")
            secret = await client.get(SECRETS, "db-root-password", namespace=ns)
            assert secret["data"]["password"] == "aGFuZA=="

            # Operator down: db-1 is deleted and replaced by the StatefulSet controller meanwhile.
        async with client_for(kubeconfig) as client:
            before = await _running_pods(client, ns)
            await client.delete(PODS, "db-1", namespace=ns, grace_period_seconds=0)

            async def replaced() -> Any:
                pods = await _running_pods(client, ns)
                new = pods.get("db-1")
                return new is not None and new["metadata"]["uid"] != before["db-1"]["metadata"]["uid"]

            await eventually(replaced, 60, "db-1 replaced while the operator is down")

        async with operator(kubeconfig, "mysql-operator", [mysql_controller(_mailer(smtp.port))]) as client:
            # A new process, a new leader: exactly the two transitions it missed, nothing again.
            mails = await _mails(smtp, 8, "the stop and start of db-1 mailed after the restart")
            assert [m.subject.split()[3:5] for m in mails[6:]] == [["db-1", "stopped"], ["db-1", "started"]]

            # SMTP outage during a scale down: Warning Events, a condition, backoff; then delivered once.
            smtp.stop()
            await client.patch(MYSQLS, "db", {"spec": {"replicas": 1}}, namespace=ns)
            failures = await eventually(
                lambda: _at_least(events(client, ns, "MailFailed"), 2), 30, "2 MailFailed events"
            )
            assert failures[0]["type"] == "Warning" and "attempt" in failures[0]["note"]
            db = await client.get(MYSQLS, "db", namespace=ns)
            assert _conditions(db)["Notified"] == ("False", "SMTPUnavailable")
            outbox = db["status"]["outbox"]
            assert len(outbox) == 1 and outbox[0]["event"] == "Stopped" and outbox[0]["attempts"] >= 1
            smtp.start()
            mails = await _mails(smtp, 9, "the stop mail delivered once SMTP is back")
            assert mails[8].subject.split()[3:5] == ["db-1", "stopped"]

            async def notified() -> Any:
                db = await client.get(MYSQLS, "db", namespace=ns)
                return db if _conditions(db).get("Notified") == ("True", "Delivered") else None

            db = await eventually(notified, 20, "Notified=True again")
            assert db["status"]["readyReplicas"] == 1 and db["status"]["mailsSent"] == 9

            # A deleted child comes back.
            svc = await client.get(SERVICES, "db", namespace=ns)
            await client.delete(SERVICES, "db", namespace=ns)

            async def restored() -> bool:
                new = await client.get(SERVICES, "db", namespace=ns)
                return bool(new["metadata"]["uid"] != svc["metadata"]["uid"])

            await eventually(restored, 30, "the client Service restored")

            # Delete: the finalizer stops the pod and mails it, then everything is collected.
            await client.delete(MYSQLS, "db", namespace=ns)
            await eventually(lambda: gone(client, MYSQLS, "db", ns), 60, "the MySQL to go")
            mails = await _mails(smtp, 10, "the last stop mail")
            assert mails[9].subject.split()[3:5] == ["db-0", "stopped"]
            for res in (STATEFULSETS, SERVICES, SECRETS, PVCS, PODS):

                async def empty(res: Any = res) -> bool:
                    return not (await client.list(res, namespace=ns)).items

                await eventually(empty, 60, f"no {res.plural} left")

    # Exactly once: every pod that started stopped, each mailed once.
    ids = Counter(m.message_id for m in smtp.received())
    assert all(n == 1 for n in ids.values()), ids
    events_ = Counter(m.subject.split()[4] for m in smtp.received())
    assert events_ == {"started": 5, "stopped": 5}


async def _at_least(aw: Any, n: int) -> Any:
    got = await aw
    return got if len(got) >= n else None


async def test_mysql_bad_input_is_a_condition_and_an_event_and_creates_nothing(
    control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.install_crds([CRD])
    ns = namespace
    async with operator(control_plane.kubeconfig_path, "mysql-operator", [mysql_controller(None)]) as client:
        negative = sample("neg", ns, replicas=-1)
        bad_size = sample("size", ns)
        bad_size["spec"]["storage"] = "lots"
        no_secret = sample("ref", ns)
        no_secret["spec"]["rootPasswordSecret"] = {"name": "missing"}
        for obj in (negative, bad_size, no_secret):
            await client.create(obj)
        for name, reason, words in (
            ("neg", "InvalidReplicas", "-1"),
            ("size", "InvalidStorage", "'lots'"),
            ("ref", "SecretNotFound", "'missing'"),
        ):

            async def reported(name: str = name, reason: str = reason) -> Any:
                db = await client.get(MYSQLS, name, namespace=ns)
                found = [e for e in await events(client, ns, reason) if e["regarding"]["name"] == name]
                return (db, found) if _conditions(db).get("Ready") == ("False", reason) and found else None

            db, found = await eventually(reported, 30, f"{reason} on {name}")
            cond = next(c for c in db["status"]["conditions"] if c["type"] == "Ready")
            assert words in cond["message"] and found[0]["type"] == "Warning"
            assert db["status"]["phase"] == "Invalid"
        # Nothing half-created, and no hot loop: the objects stay as they are.
        rvs = {
            n: (await client.get(MYSQLS, n, namespace=ns))["metadata"]["resourceVersion"]
            for n in ("neg", "size", "ref")
        }
        await asyncio.sleep(2.0)
        for n, rv in rvs.items():
            assert (await client.get(MYSQLS, n, namespace=ns))["metadata"]["resourceVersion"] == rv
        for res in (STATEFULSETS, SERVICES, SECRETS):
            assert not (await client.list(res, namespace=ns)).items, res.plural
        assert len(await events(client, ns, "SecretNotFound")) == 1  # repeats become a series, not a storm

        # Fixing the input (or creating the Secret) carries on from there.
        await client.patch(MYSQLS, "neg", {"spec": {"replicas": 1}}, namespace=ns)
        await client.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "missing", "namespace": ns},
                "data": {"password": "c2VjcmV0"},
            }
        )

        async def created() -> bool:
            names = {s["metadata"]["name"] for s in (await client.list(STATEFULSETS, namespace=ns)).items}
            return names == {"neg", "ref"}

        await eventually(created, 30, "StatefulSets for the fixed MySQLs")
        sts = await client.get(STATEFULSETS, "ref", namespace=ns)
        env = sts["spec"]["template"]["spec"]["containers"][0]["env"][0]
        assert env["valueFrom"]["secretKeyRef"] == {"name": "missing", "key": "password"}
        assert await gone(client, SECRETS, "ref-root-password", ns)
        for n in ("neg", "size", "ref"):
            await client.delete(MYSQLS, n, namespace=ns)
        for n in ("neg", "size", "ref"):
            await eventually(lambda n=n: gone(client, MYSQLS, n, ns), 60, f"MySQL {n} deleted")
