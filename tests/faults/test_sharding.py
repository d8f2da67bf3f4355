"""Sharding a controller across operator processes (issue #19).

Three Widget operators share the Widgets of a namespace (``sharded_operator.py``:
``Manager(sharding=Sharding())``, 6 s leases, 4 s renew deadline, 1 s retry period; the
defaults, 15/10/2 s, under ``KUBEOP_FAULTS=full``). Every
reconcile's start and end is appended to one file with CLOCK_MONOTONIC (one clock for every
process on the machine). The scenario, one step after another, each ending converged:

1. 3 replicas, N Widgets created: all converge, each replica reconciles a share;
2. one replica SIGKILLed: the dead replica's keys are reconciled by the others within lease
   duration + 2 s of the kill (nothing else changes meanwhile: with 10,000 Widgets changing at
   once the saturated API server delivered the dead lease's last renewals seconds late, and its
   expiry was seen 26 s after the kill); then every Widget changed;
3. a fourth replica joins, every Widget changed: it takes a share;
4. scale to 1 (two stopped with SIGTERM), every Widget changed; scale back to 3, changed again.

Checked over the whole run: no key's reconciles overlap in time (a reconcile of a key starts only
after the previous one, in whatever process, ended; a killed process's open reconciles count as
running until the kill).

Both modes run the scenario. Predicate mode (``Sharding()``): each object that moved to the
joining replica says so in a ShardAcquired Event. Label mode (``Sharding(labels=True)``): after
each step every Widget carries ``shard.kubeop.io/widget-operator=<replica>`` naming the replica
that reconciled it last, written by the labeller's field manager, and each replica caches
exactly the Widgets labelled with its name (its ``kubeop_shard_owned_objects``); each ConfigMap
carries its Widget's label (written with the ConfigMap by the operator when it was created, by
the labeller when its Widget moved), so each replica caches only its shard's ConfigMaps; the overlap
check covers the label handover (the old owner drains before the label moves, the new owner
starts only once the object arrived in its cache).

N = 1,000 by default, 10,000 with ``KUBEOP_FAULTS=full``.
"""

from __future__ import annotations

import asyncio
import collections
import re
import time
import urllib.request
from pathlib import Path

import pytest

from kubeop.cache import SharedInformerFactory
from kubeop.client import Client
from kubeop.core.resource import ApiResource
from kubeop.testing import ControlPlane

from .support import (
    CONFIGMAPS,
    HERE,
    WIDGETS,
    OperatorProcess,
    client_for,
    create_widgets,
    names,
    scale,
    set_values,
    wait_converged,
)

SHARDED_SCRIPT = HERE / "sharded_operator.py"
EVENTS = ApiResource("events.k8s.io", "v1", "events", kind="Event")
# Short leases in the short run; the Manager's defaults with 10,000 objects, where the 2 cores are
# saturated: with 6/4/1 s the survivors of the kill could not renew within 4 s while 10,000 Widgets
# changed, lost their leases and stopped (as a leader does).
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = scale((6.0, 4.0, 1.0), (15.0, 10.0, 2.0))
N = scale(1_000, 10_000)
LABEL = "shard.kubeop.io/widget-operator"


class ShardedOperator(OperatorProcess):
    def __init__(
        self,
        plane: ControlPlane,
        namespace: str,
        log_dir: Path,
        name: str,
        reconcile_log: Path,
        labels: bool,
    ) -> None:
        super().__init__(plane, namespace, log_dir, name=name, log_level="INFO")
        self.args[1] = str(SHARDED_SCRIPT)
        self.args += [
            f"--lease-duration={LEASE_DURATION}",
            f"--renew-deadline={RENEW_DEADLINE}",
            f"--retry-period={RETRY_PERIOD}",
            f"--reconcile-log={reconcile_log}",
            "--hold=0.005",
        ]
        if labels:
            self.args.append("--labels")

    def identity(self) -> str:
        return self.wait_for_line("member ").split(" ", 1)[1]

    def wait_for_line(self, prefix: str) -> str:
        self.wait_for(prefix, 30)
        return next(line for _, line in self.lines if line.startswith(prefix))

    def cached(self) -> int:
        """Its ``kubeop_shard_owned_objects`` (label mode: the size of its Widget cache)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        found = re.search(r'^kubeop_shard_owned_objects\{controller="widget"\} (\S+)$', text, re.M)
        assert found, "no kubeop_shard_owned_objects in its metrics"
        return int(float(found.group(1)))

    def members(self) -> int:
        """Its ``kubeop_shard_members``: how many members the ring it settled on has."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as resp:
            text = resp.read().decode()
        found = re.search(r"^kubeop_shard_members\{[^}]*\} (\S+)$", text, re.M)
        return int(float(found.group(1))) if found else 0


async def wait_ring(replicas: list[ShardedOperator], timeout: float) -> None:
    """Wait until every replica has settled on a ring of all of them."""
    deadline = time.monotonic() + timeout
    while True:
        seen = [r.members() for r in replicas]
        if all(n == len(replicas) for n in seen):
            return
        assert time.monotonic() < deadline, f"the ring did not settle on {len(replicas)} members: {seen}"
        await asyncio.sleep(0.2)


def read_log(path: Path) -> list[tuple[str, str, int, int]]:
    out = []
    for line in path.read_text().splitlines():
        what, key, ns, pid = line.split()
        out.append((what, key, int(ns), int(pid)))
    return out


def overlaps(records: list[tuple[str, str, int, int]], killed: dict[int, int]) -> list[str]:
    """Reconciles of one key that overlap in time (any processes); ``killed``: pid -> when."""
    intervals: dict[str, list[tuple[int, int, int]]] = collections.defaultdict(list)
    open_: dict[tuple[str, int], list[int]] = collections.defaultdict(list)
    for what, key, at, pid in records:
        if what == "start":
            open_[(key, pid)].append(at)
        else:
            intervals[key].append((open_[(key, pid)].pop(0), at, pid))
    for (key, pid), starts in open_.items():
        for start in starts:
            assert pid in killed, f"reconcile of {key} in {pid} never ended and {pid} was not killed"
            intervals[key].append((start, killed[pid], pid))
    found = []
    for key, spans in intervals.items():
        spans.sort()
        busy_until, busy_pid = spans[0][1], spans[0][2]
        for start, end, pid in spans[1:]:
            if start < busy_until:
                found.append(
                    f"{key}: pid {pid} started at {start} while pid {busy_pid} ran until {busy_until}"
                )
            if end > busy_until:
                busy_until, busy_pid = end, pid
    return found


def owners(records: list[tuple[str, str, int, int]], since: int) -> collections.Counter[int]:
    return collections.Counter(pid for what, _, at, pid in records if what == "start" and at >= since)


def last_reconciler(records: list[tuple[str, str, int, int]]) -> dict[str, int]:
    """Widget name -> pid of the process that last started reconciling it."""
    return {k.split("/")[1]: pid for what, k, _, pid in records if what == "start"}


async def check_labels(
    client: Client,
    ns: str,
    replicas: list[ShardedOperator],
    log: Path,
    timeout: float,
    *,
    created: bool = False,
) -> None:
    """Label mode: each Widget's label names the replica that reconciled it last (written by the
    labeller's field manager) and each replica caches exactly the Widgets labelled with it; each
    ConfigMap carries its Widget's label (``created``: written by the operator as it created the
    ConfigMap, not by the labeller)."""
    by_identity = {r.identity(): r for r in replicas}
    deadline = time.monotonic() + timeout
    while True:  # the last moves' reconciles may still be on their way
        widgets = await client.list(WIDGETS, namespace=ns)
        labels = {w["metadata"]["name"]: (w["metadata"].get("labels") or {}).get(LABEL) for w in widgets}
        counts = collections.Counter(labels.values())
        cached = {identity: r.cached() for identity, r in by_identity.items()}
        last = last_reconciler(read_log(log))
        wrong = [n for n, who in labels.items() if who not in by_identity or by_identity[who].pid != last[n]]
        cms = await client.list(CONFIGMAPS, namespace=ns)
        children = {c["metadata"]["name"]: (c["metadata"].get("labels") or {}).get(LABEL) for c in cms}
        done = set(counts) == set(by_identity) and not wrong and children == labels
        if (done and cached == {i: counts[i] for i in by_identity}) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert set(counts) == set(by_identity), f"labels {counts} for replicas {sorted(by_identity)}"
    assert cached == {i: counts[i] for i in by_identity}, f"cached {cached}, labelled {counts}"
    assert not wrong, f"{len(wrong)} Widgets labelled with another replica than their last reconciler"
    astray = [n for n, who in labels.items() if children.get(n) != who]
    assert not astray, f"{len(astray)} ConfigMaps not labelled as their Widget, e.g. {astray[:3]}"
    if created:
        by_labeller = [
            c["metadata"]["name"]
            for c in cms
            for m in c["metadata"].get("managedFields") or []
            if m.get("manager") == "widget-operator-labeller"
        ]
        assert not by_labeller, f"{len(by_labeller)} ConfigMaps labelled after their creation"
    managers = {
        m.get("manager")
        for w in widgets.items[:50]
        for m in w["metadata"].get("managedFields") or []
        if LABEL in str(m.get("fieldsV1"))
    }
    assert managers == {"widget-operator-labeller"}, managers


async def check_events(client: Client, ns: str, identity: str, share: int, pid: int, log: Path) -> None:
    """Predicate mode: the objects that moved to replica ``identity`` say so in an Event."""
    reconciled = {k.split("/")[1] for what, k, at, p in read_log(log) if p == pid}
    deadline = time.monotonic() + 15
    while True:
        events = await client.list(EVENTS, namespace=ns)
        acquired = {e["regarding"]["name"] for e in events if f"replica {identity} " in (e.get("note") or "")}
        if len(acquired) >= share // 2 or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert acquired and acquired <= reconciled, f"{len(acquired)} ShardAcquired events for {identity}"


@pytest.mark.parametrize("labels", [False, True], ids=["predicate", "labels"])
async def test_three_replicas_share_and_hand_over_without_double_reconciles(
    fault_plane: ControlPlane, fault_namespace: str, tmp_path: Path, labels: bool
) -> None:
    ns = fault_namespace
    log = tmp_path / "reconciles.log"
    made = 0

    def replica() -> ShardedOperator:
        nonlocal made
        made += 1
        return ShardedOperator(fault_plane, ns, tmp_path, f"replica-{made}", log, labels)

    replicas = [replica() for _ in range(3)]
    killed: dict[int, int] = {}
    client = client_for(fault_plane)
    widget_names = names(N)
    timeout = scale(60.0, 300.0)
    # The test's own informers: polling lists of 10,000 objects would load the API server.
    factory = SharedInformerFactory(client)
    stores = (factory.informer(WIDGETS, namespace=ns), factory.informer(CONFIGMAPS, namespace=ns))
    factory.start()

    async def change_all(value: str) -> int:
        t0 = time.monotonic_ns()
        await set_values(client, ns, dict.fromkeys(widget_names, value), concurrency=64)
        await wait_converged(
            client, ns, dict.fromkeys(widget_names, value), timeout=timeout, informers=stores
        )
        return t0

    try:
        assert await factory.wait_for_cache_sync(timeout=30)
        for r in replicas:
            r.start(wait=None)
        for r in replicas:
            r.wait_for("synced", 60)
        # 1. three replicas share the work.
        t0 = time.monotonic_ns()
        await create_widgets(client, ns, widget_names, "v0", concurrency=64)
        await wait_converged(client, ns, dict.fromkeys(widget_names, "v0"), timeout=timeout, informers=stores)
        share = owners(read_log(log), t0)
        pids = {r.pid for r in replicas}
        assert set(share) == pids, f"reconciles per process: {share}"
        assert all(n >= N / 6 for n in share.values()), f"unbalanced: {share}"
        if labels:
            await check_labels(client, ns, replicas, log, timeout, created=True)

        # 2. SIGKILL one replica; its keys move within lease duration + 2 s.
        victim = replicas.pop(0)
        victim_pid = victim.pid
        assert victim_pid is not None
        victims_keys = {k for what, k, at, pid in read_log(log) if pid == victim_pid and at >= t0}
        victim.kill()
        killed[victim_pid] = kill_at = time.monotonic_ns()
        # Nothing changes meanwhile: on settling without the victim, the survivors enqueue every
        # key they own, the moved ones among them.
        deadline = time.monotonic() + LEASE_DURATION + 15
        while True:
            moved = [
                at
                for what, k, at, pid in read_log(log)
                if what == "start" and at > kill_at and k in victims_keys and pid != victim_pid
            ]
            if moved or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.1)
        assert moved, "nobody reconciled the killed replica's keys"
        took = (min(moved) - kill_at) / 1e9
        assert took <= LEASE_DURATION + 2.0, f"the killed replica's keys moved after {took:.1f} s"
        await change_all("v1")
        if labels:
            await check_labels(client, ns, replicas, log, timeout)

        # 3. a replica joins and takes a share.
        joiner = replica().start()
        replicas.append(joiner)
        # the joiner is in once every replica settled on the ring with it (under load that can
        # come after its cache synced: changes made before then are the others' to reconcile)
        await wait_ring(replicas, LEASE_DURATION + 10)
        t_join = await change_all("v2")
        share = owners(read_log(log), t_join)
        assert joiner.pid in share and share[joiner.pid] >= N / 6, f"reconciles per process: {share}"
        identity = joiner.identity()
        if labels:
            await check_labels(client, ns, replicas, log, timeout)
        else:
            await check_events(client, ns, identity, share[joiner.pid], joiner.pid, log)

        # 4. scale 3 -> 1 -> 3.
        for r in replicas[:2]:
            pid = r.pid
            assert r.stop() == 0, r.log_tail()
            assert pid is not None
            killed[pid] = time.monotonic_ns()  # a reconcile cut by the shutdown ended by now
        survivor = replicas[2]
        t1 = await change_all("v3")
        assert set(owners(read_log(log), t1)) == {survivor.pid}
        replicas = [survivor, replica().start(), replica().start()]
        t3 = await change_all("v4")
        assert set(owners(read_log(log), t3)) == {r.pid for r in replicas}
        if labels:
            await check_labels(client, ns, replicas, log, timeout)

        # Stop them before reading the log: a reconcile still running now is not an overlap.
        for r in replicas:
            pid = r.pid
            assert r.stop() == 0, r.log_tail()
            assert pid is not None
            killed[pid] = time.monotonic_ns()
        found = overlaps(read_log(log), killed)
        assert not found, "\n".join(found[:20])
    finally:
        await factory.stop()
        await client.close()
        for r in replicas:
            r.close()
