"""Manager(sharding=...) on kubeop.testing.FakeCluster: replicas in one process share the objects,
hand them over on a graceful leave, and never reconcile one object in two replicas at once
(checked exactly: the replicas share this process's memory)."""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Awaitable, Callable

import pytest

from kubeop.client import Client
from kubeop.controller import Context, Controller, Request, set_controller_reference
from kubeop.core.resource import ApiResource
from kubeop.manager import Manager, Serving, Sharding
from kubeop.testing import FakeCluster

CONFIGMAPS = ApiResource("", "v1", "configmaps", kind="ConfigMap")
LEASES = ApiResource("coordination.k8s.io", "v1", "leases", kind="Lease")
SECRETS = ApiResource("", "v1", "secrets", kind="Secret")


async def eventually(check: Callable[[], bool | Awaitable[bool]], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout} s")
        await asyncio.sleep(0.01)


class Fleet:
    def __init__(self, cluster: FakeCluster, sharding: Sharding, *, children: bool = False) -> None:
        self.cluster = cluster
        self.sharding = sharding
        self.children = children  # each ConfigMap owns a Secret of its name, written by its reconcile
        self.running: dict[str, str] = {}  # key -> replica reconciling it now
        self.overlaps: list[str] = []
        self.seen: dict[str, str] = {}  # key -> "replica:value" of the last reconcile
        self.by: collections.Counter[str] = collections.Counter()
        self.missing: list[str] = []  # keys reconciled while their object was gone
        self.replicas: dict[str, tuple[Manager, asyncio.Event, asyncio.Future[None]]] = {}

    def start(self, name: str) -> Manager:
        manager = Manager(
            self.cluster.client(),
            name="shared",
            lease_duration=3.0,
            renew_deadline=2.0,
            retry_period=0.5,
            sharding=Sharding(identity=name, unsharded=self.sharding.unsharded, labels=self.sharding.labels),
            serving=Serving(metrics_address=None, health_address=None),
        )

        async def reconcile(req: Request, ctx: Context) -> None:
            key = str(req)
            other = self.running.get(key)
            if other is not None:
                self.overlaps.append(f"{key} in {name} while in {other}")
            self.running[key] = name
            try:
                await asyncio.sleep(0.002)
                cm = await ctx.client.get(CONFIGMAPS, req.name, namespace=req.namespace)
                if cm is not None:
                    if self.children:
                        secret = {
                            "apiVersion": "v1",
                            "kind": "Secret",
                            "metadata": {"name": req.name, "namespace": req.namespace},
                            "stringData": {"v": (cm.get("data") or {}).get("v", "")},
                        }
                        set_controller_reference(cm, secret)
                        await ctx.client.create_or_update(secret)
                    self.seen[key] = f"{name}:{(cm.get('data') or {}).get('v')}"
                    self.by[name] += 1
                else:
                    self.missing.append(key)
            finally:
                del self.running[key]

        controller = Controller.for_(CONFIGMAPS, namespace="default")
        if self.children:
            controller = controller.owns(SECRETS)
        manager.add(controller.max_concurrent(4).reconcile(reconcile))
        stop = asyncio.Event()
        self.replicas[name] = (manager, stop, asyncio.ensure_future(manager.start(stop)))
        return manager

    def settled(self, members: int) -> bool:
        """Has every replica settled into a ring of ``members``?"""
        sharders = [m.sharder for m, _, _ in self.replicas.values()]
        return all(
            s is not None and s.handover.settled() and len(s.handover.members) == members for s in sharders
        )

    async def stop(self, name: str) -> None:
        _, stop, task = self.replicas.pop(name)
        stop.set()
        await task

    async def close(self) -> None:
        for name in list(self.replicas):
            await self.stop(name)


async def write_all(api: Client, n: int, value: str, create: bool = False) -> None:
    for i in range(n):
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"cm-{i}"},
            "data": {"v": value},
        }
        if create:
            await api.create(body, namespace="default")
        else:
            await api.patch(CONFIGMAPS, f"cm-{i}", {"data": {"v": value}}, namespace="default")


async def test_replicas_share_objects_and_take_over_on_a_graceful_leave() -> None:
    cluster = FakeCluster()
    fleet = Fleet(cluster, Sharding())
    api = cluster.client()
    n = 60
    try:
        for name in ("a", "b", "c"):
            fleet.start(name)
        await eventually(lambda: fleet.settled(3))
        await write_all(api, n, "1", create=True)
        await eventually(lambda: len([v for v in fleet.seen.values() if v.endswith(":1")]) == n)
        assert set(fleet.by) == {"a", "b", "c"}, fleet.by
        owners = {k: v.split(":")[0] for k, v in fleet.seen.items()}

        await fleet.stop("a")  # deletes its lease: b and c take its keys without waiting for expiry
        leases = await api.list(LEASES, namespace="default")
        assert sorted(lease["metadata"]["name"] for lease in leases) == [
            "shared-shard-b",
            "shared-shard-c",
            "shared-shards",
        ]
        fleet.by.clear()
        await write_all(api, n, "2")
        await eventually(lambda: len([v for v in fleet.seen.values() if v.endswith(":2")]) == n)
        assert set(fleet.by) == {"b", "c"}
        # Only a's keys moved.
        for key, value in fleet.seen.items():
            if owners[key] != "a":
                assert value.split(":")[0] == owners[key], (key, value, owners[key])

        manager = fleet.start("d")
        await eventually(lambda: manager.sharder is not None and manager.sharder.handover.settled())
        fleet.by.clear()
        await write_all(api, n, "3")
        await eventually(lambda: len([v for v in fleet.seen.values() if v.endswith(":3")]) == n)
        assert set(fleet.by) == {"b", "c", "d"}
        assert manager.sharder is not None and manager.sharder.owned["configmap"] == sum(
            v.startswith("d:") for v in fleet.seen.values()
        )
        assert not fleet.overlaps, fleet.overlaps
    finally:
        await fleet.close()
        await api.close()


async def test_label_mode_caches_only_the_own_shard_and_moves_labels_with_the_keys() -> None:
    cluster = FakeCluster()
    fleet = Fleet(cluster, Sharding(labels=True))
    api = cluster.client()
    n = 60
    label = "shard.kubeop.io/shared"

    async def labels() -> dict[str, str]:
        cms = await api.list(CONFIGMAPS, namespace="default")
        return {cm["metadata"]["name"]: (cm["metadata"].get("labels") or {}).get(label, "") for cm in cms}

    def cached(name: str) -> set[str]:
        sharder = fleet.replicas[name][0].sharder
        assert sharder is not None
        return {cm["metadata"]["name"] for cm in sharder._shards["configmap"].store.list()}

    try:
        for name in ("a", "b", "c"):
            fleet.start(name)
        await eventually(lambda: fleet.settled(3))
        await write_all(api, n, "1", create=True)
        await eventually(lambda: len([v for v in fleet.seen.values() if v.endswith(":1")]) == n)
        assert set(fleet.by) == {"a", "b", "c"}, fleet.by
        shard = await labels()
        # Every object is labelled with the replica that reconciled it, and that replica's cache
        # holds exactly the objects labelled with its name.
        assert {k.split("/")[1]: v.split(":")[0] for k, v in fleet.seen.items()} == shard
        for name in ("a", "b", "c"):
            assert cached(name) == {k for k, v in shard.items() if v == name}
        # Only the labeller's replica (the ring's leader) watches the unlabelled objects.
        leading, watching = [], []
        for name in ("a", "b", "c"):
            sharder = fleet.replicas[name][0].sharder
            assert sharder is not None and sharder.labeller is not None
            if sharder.labeller.leads():
                leading.append(name)
            if any(kind.unlabelled is not None for kind in sharder.labeller.kinds):
                watching.append(name)
        assert len(leading) == 1 and watching == leading, (leading, watching)
        # Idle replicas stay idle (the replicas that do not label waited on a set event: a spin).
        cpu = time.process_time()
        await asyncio.sleep(1.0)
        assert time.process_time() - cpu < 0.3

        await fleet.stop("a")
        fleet.by.clear()
        await write_all(api, n, "2")
        await eventually(lambda: len([v for v in fleet.seen.values() if v.endswith(":2")]) == n)
        assert set(fleet.by) == {"b", "c"}, fleet.by
        moved = await labels()
        assert set(moved.values()) == {"b", "c"}
        assert all(moved[k] == v for k, v in shard.items() if v != "a"), "only a's objects move"
        await eventually(lambda: cached("b") | cached("c") == set(moved) and not cached("b") & cached("c"))
        assert not fleet.overlaps, fleet.overlaps
    finally:
        await fleet.close()
        await api.close()


async def test_label_mode_labels_children_with_their_owners_shard_and_moves_them_first() -> None:
    cluster = FakeCluster()
    fleet = Fleet(cluster, Sharding(labels=True), children=True)
    api = cluster.client()
    n = 45
    label = "shard.kubeop.io/shared"

    async def labels(kind: ApiResource) -> dict[str, str]:
        objs = await api.list(kind, namespace="default")
        return {o["metadata"]["name"]: (o["metadata"].get("labels") or {}).get(label, "") for o in objs}

    def cached_children(name: str) -> set[str]:
        cache = fleet.replicas[name][0].cache
        assert cache is not None
        informer = cache.informer(SECRETS, namespace="default", label_selector=f"{label}={name}")
        return {s["metadata"]["name"] for s in informer.store.list()}

    def labeller_patches() -> int:
        return sum(
            m.sharder.labeller.patches
            for m, _, _ in fleet.replicas.values()
            if m.sharder is not None and m.sharder.labeller is not None
        )

    try:
        for name in ("a", "b", "c"):
            fleet.start(name)
        await eventually(lambda: fleet.settled(3))
        await write_all(api, n, "1", create=True)
        await eventually(lambda: len([v for v in fleet.seen.values() if v.endswith(":1")]) == n)
        parents, children = await labels(CONFIGMAPS), await labels(SECRETS)
        # Each Secret was created with its ConfigMap's label (the labeller wrote only the
        # ConfigMaps' labels: no extra write per child), and each replica caches only its own.
        assert children == parents
        assert labeller_patches() == n
        for name in ("a", "b", "c"):
            assert cached_children(name) == {k for k, v in children.items() if v == name}

        # A child written by other means (no label) gets its owner's from the labeller.
        stray = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "stray", "namespace": "default"}}
        cm0 = await api.get(CONFIGMAPS, "cm-0", namespace="default")
        set_controller_reference(cm0, stray)
        await api.create(stray, resource=SECRETS)
        await eventually(lambda: "stray" in cached_children(parents["cm-0"]))

        # a leaves: its objects' children move with them.
        await fleet.stop("a")
        fleet.by.clear()
        await write_all(api, n, "2")
        await eventually(lambda: len([v for v in fleet.seen.values() if v.endswith(":2")]) == n)
        moved = await labels(CONFIGMAPS)
        assert set(moved.values()) == {"b", "c"}

        async def children_follow() -> bool:
            now = await labels(SECRETS)
            return all(now[k] == moved[k] for k in moved) and now["stray"] == moved["cm-0"]

        await eventually(children_follow)
        await eventually(
            lambda: (
                cached_children("b") | cached_children("c") == {*moved, "stray"}
                and not cached_children("b") & cached_children("c")
            )
        )
        assert not fleet.overlaps, fleet.overlaps
    finally:
        await fleet.close()
        await api.close()


@pytest.mark.parametrize("owner_first", [False, True])
async def test_label_mode_refuses_a_kind_that_is_one_controllers_primary_and_anothers_child(
    owner_first: bool,
) -> None:
    manager = Manager(
        FakeCluster().client(),
        name="shared",
        sharding=Sharding(identity="a", labels=True),
        serving=Serving(metrics_address=None, health_address=None),
    )

    async def reconcile(req: Request, ctx: Context) -> None:
        pass

    configmaps = Controller.for_(CONFIGMAPS, namespace="default").reconcile(reconcile)
    secrets = Controller.for_(SECRETS, namespace="default").owns(CONFIGMAPS).reconcile(reconcile)
    for controller in (secrets, configmaps) if owner_first else (configmaps, secrets):
        manager.add(controller)
    with pytest.raises(ValueError, match=r"ConfigMap is controller '(configmap|secret)''s primary kind"):
        async with asyncio.timeout(10):
            await manager.start(asyncio.Event())


async def test_label_mode_reconciles_a_deletion_but_not_an_object_it_has_not_received() -> None:
    cluster = FakeCluster()
    fleet = Fleet(cluster, Sharding(labels=True))
    api = cluster.client()
    try:
        manager = fleet.start("a")
        await eventually(lambda: fleet.settled(1))
        await write_all(api, 3, "1", create=True)
        await eventually(lambda: len(fleet.seen) == 3)
        await api.delete(CONFIGMAPS, "cm-0", namespace="default")
        await eventually(lambda: fleet.missing == ["default/cm-0"])
        # A key this replica owns by the ring whose object has not reached its cache (its label
        # has not moved here yet, or it does not exist): not reconciled, the object's arrival is.
        sharder = manager.sharder
        assert sharder is not None and sharder.admits("configmap", Request("default", "elsewhere"))
        assert not await sharder.begin("configmap", Request("default", "elsewhere"))
        assert sharder.handover.running() == {}
        assert fleet.missing == ["default/cm-0"]
    finally:
        await fleet.close()
        await api.close()


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (Sharding(labels=True, identity="x" * 64), r"identity 'x+' is not a member name \(at most 63"),
        (Sharding(identity="x" * 64), r"identity 'x+' is not a member name"),
        (Sharding(labels=True, identity="a/b"), r"Lease name 'x-shard-a/b' .* is not a DNS-1123 subdomain"),
        (Sharding(identity="Replica_A"), r"'x-shard-Replica_A' .* Sharding\(identity=\.\.\.\) in that form"),
        (Sharding(identity="a" * 250), r"is not a DNS-1123 subdomain"),
        (Sharding(labels=True, name="r" * 64), r"ring name 'r+' cannot name the label shard\.kubeop\.io/"),
        (Sharding(labels=True, name="-ring"), r"pass Sharding\(name=\.\.\.\)"),
    ],
)
def test_label_mode_needs_an_identity_and_ring_usable_in_the_label(options: Sharding, error: str) -> None:
    from kubeop.manager.sharding import Sharder

    with pytest.raises(ValueError, match=error):
        Sharder(
            options,
            FakeCluster().client(),
            None,  # type: ignore[arg-type]
            name="x",
            namespace="default",
            lease_duration=3,
            renew_deadline=2,
            retry_period=0.5,
        )


async def test_an_unsharded_controller_runs_whole_in_one_replica() -> None:
    cluster = FakeCluster()
    fleet = Fleet(cluster, Sharding(unsharded={"configmap"}))
    api = cluster.client()
    try:
        for name in ("a", "b"):
            fleet.start(name)
        await eventually(lambda: fleet.settled(2))
        await write_all(api, 20, "1", create=True)
        await eventually(lambda: len(fleet.seen) == 20)
        assert len(fleet.by) == 1, fleet.by
    finally:
        await fleet.close()
        await api.close()


def test_sharding_and_leader_election_exclude_each_other() -> None:
    with pytest.raises(ValueError, match="choose one"):
        Manager(sharding=Sharding(), leader_election=True)


def test_unsharded_takes_controller_names() -> None:
    from kubeop.manager.sharding import Sharder

    with pytest.raises(TypeError, match="controller names"):
        Sharder(
            Sharding(unsharded=[Controller]),  # type: ignore[list-item]
            FakeCluster().client(),
            None,  # type: ignore[arg-type]
            name="x",
            namespace="default",
            lease_duration=3,
            renew_deadline=2,
            retry_period=0.5,
        )


async def test_a_replica_stops_promptly_while_its_ring_is_not_settled() -> None:
    cluster = FakeCluster()
    fleet = Fleet(cluster, Sharding())
    api = cluster.client()
    try:
        manager = fleet.start("a")
        await eventually(lambda: fleet.settled(1))
        await write_all(api, 10, "1", create=True)
        await eventually(lambda: len(fleet.seen) == 10)
        # A member that never acknowledges: the ring does not settle (until its lease expires,
        # 3 s after it was first seen), requests wait.
        ghost = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": "shared-shard-ghost",
                "labels": {"kubeop.io/shard-ring": "shared", "kubeop.io/shard-role": "member"},
            },
            "spec": {"holderIdentity": "ghost", "renewTime": "2026-01-01T00:00:00.000000Z"},
        }
        await api.create(ghost, namespace="default", resource=LEASES)
        ring = await api.get(LEASES, "shared-shards", namespace="default")
        ring["metadata"]["annotations"]["kubeop.io/shard-members"] = "a,ghost"
        ring["metadata"]["annotations"]["kubeop.io/shard-generation"] = "99"
        await api.update(ring, resource=LEASES)
        assert manager.sharder is not None
        await eventually(lambda: manager.sharder is not None and manager.sharder.handover.generation == 99)
        await write_all(api, 10, "2")
        await asyncio.sleep(0.2)
        t0 = time.monotonic()
        assert manager.sharder.handover.generation == 99 and not manager.sharder.handover.settled()
        await fleet.stop("a")
        assert time.monotonic() - t0 < 1.0
    finally:
        await fleet.close()
        await api.close()


async def test_a_dead_member_leaves_the_ring_and_its_lease_is_deleted() -> None:
    cluster = FakeCluster()
    fleet = Fleet(cluster, Sharding())
    api = cluster.client()
    try:
        manager = fleet.start("a")
        await eventually(lambda: fleet.settled(1))
        ghost = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": "shared-shard-ghost",
                "labels": {"kubeop.io/shard-ring": "shared", "kubeop.io/shard-role": "member"},
            },
            "spec": {"holderIdentity": "ghost", "renewTime": "2026-01-01T00:00:00.000000Z"},
        }
        await api.create(ghost, namespace="default", resource=LEASES)
        ring = await api.get(LEASES, "shared-shards", namespace="default")
        ring["metadata"]["annotations"]["kubeop.io/shard-members"] = "a,ghost"
        ring["metadata"]["annotations"]["kubeop.io/shard-generation"] = "99"
        await api.update(ring, resource=LEASES)
        await eventually(lambda: manager.sharder is not None and manager.sharder.handover.generation == 99)
        t0 = time.monotonic()

        async def gone() -> bool:
            names = [lease["metadata"]["name"] for lease in await api.list(LEASES, namespace="default")]
            return "shared-shard-ghost" not in names

        await eventually(gone, timeout=6.0)
        assert 2.5 < time.monotonic() - t0 < 4.5  # the lease duration (3 s) after it was first seen
        assert manager.sharder is not None
        assert manager.sharder.handover.members == ("a",) and manager.sharder.handover.settled()
    finally:
        await fleet.close()
        await api.close()
