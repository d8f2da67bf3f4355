"""Shard membership reading Leases anyone in the namespace may have written: unparsable
generations, holder identities that are not member names, and a ring that flaps, on
kubeop.testing.FakeCluster. None of them stops a replica or drives it into a write loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import pytest

from kubeop.client import Client
from kubeop.controller import Context, Controller, Request
from kubeop.core.errors import Conflict
from kubeop.manager import Manager, Serving, Sharding
from kubeop.manager import membership as membership_module
from kubeop.manager.membership import (
    DRAINED,
    GENERATION,
    MEMBERS,
    Membership,
    is_member_name,
    member_identity,
)
from kubeop.testing import FakeCluster

from .test_sharding import CONFIGMAPS, LEASES, eventually, write_all

RING = "shared-shards"


def lease(name: str, role: str, *, holder: str | None = None, **annotations: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "labels": {"kubeop.io/shard-ring": "shared", "kubeop.io/shard-role": role},
            "annotations": annotations,
        },
        "spec": {},
    }
    if holder is not None:
        body["spec"] = {"holderIdentity": holder, "renewTime": "2026-01-01T00:00:00.000000Z"}
    return body


class Replica:
    """One Manager with sharding on the cluster, identity ``a``; counts its ring writes."""

    def __init__(self, cluster: FakeCluster) -> None:
        self.transport = cluster.transport()
        self.manager = Manager(
            Client(transport=self.transport),
            name="shared",
            lease_duration=3.0,
            renew_deadline=2.0,
            retry_period=0.5,
            sharding=Sharding(identity="a"),
            serving=Serving(metrics_address=None, health_address=None),
        )
        self.reconciled: set[str] = set()

        async def reconcile(req: Request, ctx: Context) -> None:
            self.reconciled.add(req.name)

        self.manager.add(Controller.for_(CONFIGMAPS, namespace="default").reconcile(reconcile))
        self.stop = asyncio.Event()
        self.task = asyncio.ensure_future(self.manager.start(self.stop))

    def ring_writes(self) -> int:
        return sum(1 for r in self.transport.sent if r.method == "PUT" and r.path.endswith(f"/leases/{RING}"))

    def settled(self, members: tuple[str, ...] = ("a",)) -> bool:
        if self.task.done():
            self.task.result()  # a replica that stopped says why
        sharder = self.manager.sharder
        return sharder is not None and sharder.handover.settled() and sharder.handover.members == members

    @property
    def generation(self) -> int:
        assert self.manager.sharder is not None
        return self.manager.sharder.handover.generation

    async def close(self) -> None:
        self.stop.set()
        async with asyncio.timeout(10):
            await self.task


async def ring_annotations(api: Client) -> dict[str, str]:
    return dict((await api.get(LEASES, RING, namespace="default"))["metadata"]["annotations"])


def warnings(caplog: pytest.LogCaptureFixture, *words: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and all(w in r.getMessage() for w in words)
    ]


@pytest.mark.parametrize(
    "bad",
    [
        "x",
        "",
        "-3",
        "+4",
        " 7",
        "7\r\n",
        "1\r\nkubeop.io/x: y",
        "0x10",
        "1_000",
        "\u0663",
        "9" * 30,
        "9" * 5000,
    ],
)
async def test_an_unparsable_ring_generation_is_rewritten_not_fatal(
    bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = FakeCluster()
    async with cluster.client() as api:
        await api.create(lease(RING, "ring", **{GENERATION: bad, MEMBERS: "a"}), resource=LEASES)
        await write_all(api, 10, "1", create=True)
        replica = Replica(cluster)
        try:
            with caplog.at_level(logging.WARNING, logger="kubeop.sharding"):
                await eventually(replica.settled)
                await eventually(lambda: len(replica.reconciled) == 10)
            generation = (await ring_annotations(api))[GENERATION]
            assert generation.isascii() and generation.isdigit() and 1 <= int(generation) <= 3, generation
            found = warnings(caplog, f"Lease default/{RING}", f"annotation {GENERATION}", "rewritten")
            assert len(found) == 1, caplog.text
        finally:
            await replica.close()


async def test_a_ring_that_went_back_or_broke_while_running_moves_on_above_the_generation_seen() -> None:
    cluster = FakeCluster()
    async with cluster.client() as api:
        replica = Replica(cluster)
        try:
            await eventually(replica.settled)
            for bad in ("x", "1", "0"):
                before = replica.generation
                ring = await api.get(LEASES, RING, namespace="default")
                ring["metadata"]["annotations"][GENERATION] = bad
                await api.update(ring, resource=LEASES)
                await eventually(lambda before=before: replica.generation > before and replica.settled())  # type: ignore[misc]
                assert int((await ring_annotations(api))[GENERATION]) == replica.generation
            assert replica.generation <= 6
            await api.delete(LEASES, RING, namespace="default")  # deleted: created again, above
            before = replica.generation
            await eventually(lambda: replica.generation > before and replica.settled())
            assert int((await ring_annotations(api))[GENERATION]) == before + 1
        finally:
            await replica.close()


async def test_member_leases_whose_holder_is_not_a_member_name_are_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = FakeCluster()
    bad = {
        "shared-shard-bc": "b,c",  # joined with ',' and split apart on read: a rewrite loop before
        "shared-shard-d": "d e",
        "shared-shard-upper": "UPPER",
        "shared-shard-long": "x" * 64,
        "shared-shard-crlf": "f\r\ng",
        "shared-shard-impostor": "a",  # a member name, in another member's name: not its Lease
    }
    async with cluster.client() as api:
        for name, holder in bad.items():
            await api.create(lease(name, "member", holder=holder, **{DRAINED: "0"}), resource=LEASES)
        renewals = 0

        async def renew() -> None:  # the bad members look alive: renewed all along
            nonlocal renewals
            while True:
                for name in bad:
                    obj = await api.get(LEASES, name, namespace="default")
                    obj["spec"]["renewTime"] = f"2026-01-01T00:00:{renewals % 60:02d}.000000Z"
                    with contextlib.suppress(Conflict):
                        await api.update(obj, resource=LEASES)
                renewals += 1
                await asyncio.sleep(0.05)

        renewing = asyncio.ensure_future(renew())
        replica = Replica(cluster)
        try:
            with caplog.at_level(logging.WARNING, logger="kubeop.sharding"):
                await eventually(replica.settled)
                await write_all(api, 20, "1", create=True)
                await eventually(lambda: len(replica.reconciled) == 20)
                t0 = time.monotonic()
                while time.monotonic() - t0 < 1.5:  # a bounded run: the ring stays put
                    assert replica.settled()
                    await asyncio.sleep(0.05)
            assert renewals >= 10
            assert replica.generation <= 2, replica.generation
            assert (await ring_annotations(api))[MEMBERS] == "a"
            assert replica.ring_writes() <= 2
            for name in bad:
                assert len(warnings(caplog, f"Lease default/{name}:", "spec.holderIdentity")) == 1, name
        finally:
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
            await replica.close()


async def test_a_flapping_ring_cannot_drive_more_than_the_rate_limit_of_rewrites(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = FakeCluster()
    async with cluster.client() as api:
        replica = Replica(cluster)
        try:
            await eventually(replica.settled)
            before = replica.ring_writes()
            flips = 0
            seconds = 2.0
            t0 = time.monotonic()
            with caplog.at_level(logging.WARNING, logger="kubeop.sharding"):
                while time.monotonic() - t0 < seconds:  # another writer puts a member that is not live
                    ring = await api.get(LEASES, RING, namespace="default")
                    annotations = ring["metadata"]["annotations"]
                    annotations[GENERATION] = str(int(annotations[GENERATION]) + 1)
                    annotations[MEMBERS] = "a,ghost"
                    with contextlib.suppress(Conflict):
                        await api.update(ring, resource=LEASES)
                        flips += 1
                    await asyncio.sleep(0.005)
            elapsed = time.monotonic() - t0
            writes = replica.ring_writes() - before
            burst = membership_module._RING_WRITE_BURST
            per_second = membership_module._RING_WRITES_PER_SECOND
            assert flips >= 30, flips  # the input flapped far faster than the limit
            assert 1 <= writes <= burst + per_second * elapsed + 1, (writes, flips)
            assert len(warnings(caplog, f"shard ring default/{RING}", "held back")) == 1
            await eventually(replica.settled)  # the flapping stopped: the ring converges
        finally:
            await replica.close()


def test_member_names() -> None:
    for _ in range(20):
        assert is_member_name(member_identity())
    for good in ("a", "a-b", "a.b", "0", "x" * 63, "web-7d9f8-abcde"):
        assert is_member_name(good), good
    for bad in ("", "-a", "a-", ".a", "A", "a_b", "a,b", "a b", "a\r\nb", "x" * 64, "a/b", "\u00e9", None, 7):
        assert not is_member_name(bad), bad


def observed(**annotations: str) -> Membership:
    m = Membership(FakeCluster().client(), None, "shared", "default", identity="a")  # type: ignore[arg-type]
    m._observe(lease("shared-shard-b", "member", holder="b", **annotations))
    return m


def test_an_unparsable_drained_annotation_is_no_acknowledgement(caplog: pytest.LogCaptureFixture) -> None:
    assert observed(**{DRAINED: "7"}).handover.acks == {"b": 7}
    with caplog.at_level(logging.WARNING, logger="kubeop.sharding"):
        for bad in ("x", "-1", "", " 7", "\u0663", "9" * 5000):
            assert observed(**{DRAINED: bad}).handover.acks == {}, bad
    assert len(warnings(caplog, "Lease default/shared-shard-b:", f"annotation {DRAINED}")) == 6


def test_ring_entries_that_are_not_member_names_are_dropped(caplog: pytest.LogCaptureFixture) -> None:
    m = Membership(FakeCluster().client(), None, "shared", "default", identity="a")  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="kubeop.sharding"):
        m._observe(lease(RING, "ring", **{GENERATION: "5", MEMBERS: "a,B,c d,b"}))
        m._observe(lease("other-shards", "ring", **{GENERATION: "9", MEMBERS: "z"}))  # not the ring
    assert (m.handover.generation, m.handover.members) == (5, ("a", "b"))
    assert len(warnings(caplog, f"annotation {MEMBERS}", "['B', 'c d']")) == 1
    assert len(warnings(caplog, "Lease default/other-shards:", f"the ring is the Lease {RING}")) == 1
