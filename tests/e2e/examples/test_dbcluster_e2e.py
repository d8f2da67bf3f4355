"""Seed 002's DatabaseCluster operator on the full local control plane.

Create -> ConfigMap, a Service per role, a StatefulSet (owner references), members added one at
a time, volumes bound, status and conditions; a deleted member pod and a deleted ConfigMap
restored; a configuration change rolled member by member (highest first, never two down);
scale down and up one member at a time; delete -> the finalizer decommissions the members one
by one, then nothing is left. Bad input: conditions, Warning Events, nothing created.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from examples.dbcluster.api.v1alpha1 import CRD, DatabaseCluster, sample
from examples.dbcluster.controllers.databasecluster import CONFIG_HASH, FINALIZER, config_hash
from examples.dbcluster.controllers.databasecluster import controller as dbc_controller
from examples.kube import CONFIGMAPS, PODS, PVCS, SECRETS, SERVICES, STATEFULSETS

from kubeop.client import Client
from kubeop.testing import ControlPlane
from tests.e2e.controller.conftest import eventually

from .example_support import events, gone, operator

pytestmark = [pytest.mark.controlplane, pytest.mark.full]

DBCS = DatabaseCluster.resource
LABELS = "app.kubernetes.io/instance=kwdb"


def _conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in (obj.get("status") or {}).get("conditions", [])}


@dataclass
class Sampler:
    """Polls the StatefulSet and the members every 50 ms: the replica steps, the fewest ready
    members seen, and the order in which members first ran a given configuration."""

    replicas: list[int] = field(default_factory=list)
    min_ready: int = 1_000
    updated_order: list[str] = field(default_factory=list)
    watch_hash: str | None = None

    def reset(self, watch_hash: str | None = None) -> None:
        self.replicas = self.replicas[-1:]
        self.min_ready = 1_000
        self.updated_order = []
        self.watch_hash = watch_hash

    def _saw(self, replicas: int) -> None:
        if not self.replicas or self.replicas[-1] != replicas:
            self.replicas.append(replicas)

    async def _watch_replicas(self, client: Client, ns: str) -> None:
        # A watch sees every change of spec.replicas; polling missed a step that lasted < 50 ms.
        while True:
            with contextlib.suppress(Exception):
                async for event in client.watch(
                    STATEFULSETS, namespace=ns, field_selector="metadata.name=kwdb", timeout_seconds=300
                ):
                    spec = event.object.get("spec") or {}
                    if event.type in ("ADDED", "MODIFIED") and "replicas" in spec:
                        self._saw(spec["replicas"])
            await asyncio.sleep(0.05)

    async def run(self, client: Client, ns: str) -> None:
        watcher = asyncio.create_task(self._watch_replicas(client, ns))
        try:
            await self._poll(client, ns)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)

    async def _poll(self, client: Client, ns: str) -> None:
        while True:
            with contextlib.suppress(Exception):
                pods = (await client.list(PODS, namespace=ns, label_selector=LABELS)).items
                ready = [
                    p
                    for p in pods
                    if not p["metadata"].get("deletionTimestamp")
                    and any(
                        c["type"] == "Ready" and c["status"] == "True"
                        for c in (p.get("status") or {}).get("conditions", [])
                    )
                ]
                self.min_ready = min(self.min_ready, len(ready))
                for p in ready:
                    name = p["metadata"]["name"]
                    h = (p["metadata"].get("annotations") or {}).get(CONFIG_HASH)
                    if self.watch_hash and h == self.watch_hash and name not in self.updated_order:
                        self.updated_order.append(name)
            await asyncio.sleep(0.05)


async def _created_with(client: Client, ns: str, hash_: str, out: list[str]) -> None:
    """Append the members created with configuration ``hash_``, in the order of their creation."""
    async for event in client.watch(PODS, namespace=ns, label_selector=LABELS):
        md = event.object.get("metadata") or {}
        name = md.get("name")
        if (md.get("annotations") or {}).get(CONFIG_HASH) == hash_ and name not in out:
            out.append(name)


async def _steps(sampler: Sampler, expected: list[int]) -> None:
    """The StatefulSet went through exactly these replica counts (once the sampler caught up)."""

    async def caught_up() -> bool:
        return bool(sampler.replicas) and sampler.replicas[-1] == expected[-1]

    await eventually(caught_up, 10, f"the sampler to see {expected[-1]} replicas")
    assert sampler.replicas == expected, sampler.replicas  # one member at a time


@contextlib.asynccontextmanager
async def sampling(client: Client, ns: str) -> AsyncIterator[Sampler]:
    sampler = Sampler()
    task = asyncio.create_task(sampler.run(client, ns))
    try:
        yield sampler
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _settled(client: Client, ns: str, members: int, what: str, timeout: float = 60) -> dict[str, Any]:
    async def check() -> Any:
        dbc = await client.get(DBCS, "kwdb", namespace=ns)
        st = dbc.get("status") or {}
        ok = (
            st.get("phase") == "Running"
            and st.get("members") == members
            and st.get("readyMembers") == members
            and st.get("observedGeneration") == dbc["metadata"]["generation"]
        )
        return dbc if ok else None

    result: dict[str, Any] = await eventually(check, timeout, what)
    return result


async def test_dbcluster_scales_heals_rolls_and_decommissions(
    control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.install_crds([CRD])
    ns = namespace
    async with (
        operator(
            control_plane.kubeconfig_path, "dbcluster-operator", [dbc_controller(progress_requeue=1.0)]
        ) as client,
        sampling(client, ns) as sampler,
    ):
        await client.create(sample("kwdb", ns, replicas=3, config={"max_connections": "100"}))
        dbc = await _settled(client, ns, 3, "3 members Running")
        await _steps(sampler, [1, 2, 3])  # one member at a time
        assert FINALIZER in dbc["metadata"]["finalizers"]
        conds = _conditions(dbc)
        assert conds["Available"] == ("True", "QuorumReady")
        assert conds["Progressing"] == ("False", "Stable")
        assert conds["Degraded"] == ("False", "MembersReady")
        uid = dbc["metadata"]["uid"]
        for res, name in (
            (CONFIGMAPS, "kwdb-config"),
            (SERVICES, "kwdb"),
            (SERVICES, "kwdb-peers"),
            (SERVICES, "kwdb-primary"),
            (STATEFULSETS, "kwdb"),
        ):
            child = await client.get(res, name, namespace=ns)
            ref = child["metadata"]["ownerReferences"][0]
            assert ref["uid"] == uid and ref["controller"], (res, name)
        primary = await client.get(SERVICES, "kwdb-primary", namespace=ns)
        assert primary["spec"]["selector"]["apps.kubernetes.io/pod-index"] == "0"
        assert (await client.get(SERVICES, "kwdb-peers", namespace=ns))["spec"]["clusterIP"] == "None"
        cm = await client.get(CONFIGMAPS, "kwdb-config", namespace=ns)
        assert cm["data"]["cluster.conf"] == "max_connections = 100\n"
        pvcs = (await client.list(PVCS, namespace=ns, label_selector=LABELS)).items
        assert len(pvcs) == 3 and all(p["status"]["phase"] == "Bound" for p in pvcs)
        assert [m["name"] for m in dbc["status"]["memberStatus"]] == ["kwdb-0", "kwdb-1", "kwdb-2"]

        # Self-healing: a deleted member and a deleted ConfigMap come back.
        pod = await client.get(PODS, "kwdb-1", namespace=ns)
        await client.delete(PODS, "kwdb-1", namespace=ns, grace_period_seconds=0)
        await client.delete(CONFIGMAPS, "kwdb-config", namespace=ns)

        async def healed() -> bool:
            new = await client.get(PODS, "kwdb-1", namespace=ns)
            await client.get(CONFIGMAPS, "kwdb-config", namespace=ns)
            ready = any(
                c["type"] == "Ready" and c["status"] == "True" for c in new["status"].get("conditions", [])
            )
            return bool(new["metadata"]["uid"] != pod["metadata"]["uid"] and ready)

        await eventually(healed, 60, "the member (Ready) and the ConfigMap restored")
        await _settled(client, ns, 3, "3 members Running again")

        # A configuration change rolls through the members one by one, highest ordinal first.
        new_hash = config_hash({"max_connections": "200"})
        sampler.reset()
        created: list[str] = []
        watcher = asyncio.create_task(_created_with(client, ns, new_hash, created))
        await asyncio.sleep(1.0)  # the watch is open before the change
        await client.patch(DBCS, "kwdb", {"spec": {"config": {"max_connections": "200"}}}, namespace=ns)

        async def rolled() -> Any:
            dbc = await client.get(DBCS, "kwdb", namespace=ns)
            st = dbc.get("status") or {}
            ok = (
                st.get("updatedMembers") == 3
                and st.get("configHash") == new_hash
                and st.get("phase") == "Running"
            )
            return dbc if ok else None

        dbc = await eventually(rolled, 90, "the configuration rolled to every member")
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        assert created == ["kwdb-2", "kwdb-1", "kwdb-0"], created  # in the order the API server saw them
        assert sampler.min_ready >= 2, sampler.min_ready  # never two members down at once
        cm = await client.get(CONFIGMAPS, "kwdb-config", namespace=ns)
        assert cm["data"]["cluster.conf"] == "max_connections = 200\n"
        assert _conditions(dbc)["Progressing"] == ("False", "Stable")

        # Scale down and up, one member at a time.
        sampler.reset()
        await client.patch(DBCS, "kwdb", {"spec": {"replicas": 1}}, namespace=ns)
        await _settled(client, ns, 1, "1 member Running")
        await _steps(sampler, [3, 2, 1])

        async def volumes(n: int) -> bool:
            return len((await client.list(PVCS, namespace=ns, label_selector=LABELS)).items) == n

        await eventually(lambda: volumes(1), 30, "the decommissioned members' volumes deleted")
        sampler.reset()
        await client.patch(DBCS, "kwdb", {"spec": {"replicas": 2}}, namespace=ns)
        await _settled(client, ns, 2, "2 members Running")
        await _steps(sampler, [1, 2])

        # Delete: the finalizer decommissions member by member, then everything is collected.
        sampler.reset()
        await client.delete(DBCS, "kwdb", namespace=ns)
        await eventually(lambda: gone(client, DBCS, "kwdb", ns), 60, "the DatabaseCluster to go")
        await _steps(sampler, [2, 1, 0])
        decommissioned = await events(client, ns, "MemberDecommissioned")
        assert {e["note"] for e in decommissioned} >= {
            "decommissioning member kwdb-1",
            "decommissioning member kwdb-0",
        }
        for res in (STATEFULSETS, SERVICES, PVCS, PODS):

            async def empty(res: Any = res) -> bool:
                return not (await client.list(res, namespace=ns, label_selector=LABELS)).items

            await eventually(empty, 60, f"no {res.plural} left")
        assert await gone(client, CONFIGMAPS, "kwdb-config", ns)


async def test_dbcluster_bad_input_is_a_condition_and_an_event_and_creates_nothing(
    control_plane: ControlPlane, namespace: str
) -> None:
    control_plane.install_crds([CRD])
    ns = namespace
    async with operator(control_plane.kubeconfig_path, "dbcluster-operator", [dbc_controller()]) as client:
        negative = sample("neg", ns, replicas=-2)
        bad_size = sample("size", ns)
        bad_size["spec"]["storage"] = "12 apples"
        no_secret = sample("ref", ns, replicas=1)
        no_secret["spec"]["credentialsSecret"] = "admin"
        for obj in (negative, bad_size, no_secret):
            await client.create(obj)
        for name, reason, words in (
            ("neg", "InvalidReplicas", "-2"),
            ("size", "InvalidStorage", "'12 apples'"),
            ("ref", "SecretNotFound", "'admin'"),
        ):

            async def reported(name: str = name, reason: str = reason) -> Any:
                dbc = await client.get(DBCS, name, namespace=ns)
                found = [e for e in await events(client, ns, reason) if e["regarding"]["name"] == name]
                return (
                    (dbc, found) if _conditions(dbc).get("Degraded") == ("True", reason) and found else None
                )

            dbc, found = await eventually(reported, 30, f"{reason} on {name}")
            cond = next(c for c in dbc["status"]["conditions"] if c["type"] == "Degraded")
            assert words in cond["message"] and found[0]["type"] == "Warning"
            assert dbc["status"]["phase"] == "Invalid"
            assert _conditions(dbc)["Progressing"] == ("False", "InvalidSpec")
        rvs = {
            n: (await client.get(DBCS, n, namespace=ns))["metadata"]["resourceVersion"]
            for n in ("neg", "size", "ref")
        }
        await asyncio.sleep(2.0)  # no hot loop: nothing is written again
        for n, rv in rvs.items():
            assert (await client.get(DBCS, n, namespace=ns))["metadata"]["resourceVersion"] == rv
        for res in (STATEFULSETS, SERVICES):
            assert not (await client.list(res, namespace=ns)).items, res.plural
        assert not (
            await client.list(CONFIGMAPS, namespace=ns, label_selector="app.kubernetes.io/name=dbcluster")
        ).items

        await client.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "admin", "namespace": ns},
                "data": {"user": "YQ=="},
            }
        )

        async def created() -> bool:
            sts = await client.get(STATEFULSETS, "ref", namespace=ns)
            return bool(
                sts["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]["secretRef"]["name"] == "admin"
            )

        await eventually(created, 30, "the StatefulSet once the Secret exists")
        assert await gone(client, SECRETS, "ref-root-password", ns)
        for n in ("neg", "size", "ref"):
            await client.delete(DBCS, n, namespace=ns)
        for n in ("neg", "size", "ref"):
            await eventually(lambda n=n: gone(client, DBCS, n, ns), 60, f"DatabaseCluster {n} deleted")
