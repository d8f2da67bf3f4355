"""(c) A conflict storm: 10 writers change the objects the operator writes, as fast as they can
(each Widget's spec and labels; each child ConfigMap's data, which the operator puts back), for a
while; the operator's own ConfigMap updates meet 409 Conflicts. After the writers stop every
object converges (none is stuck behind a grown backoff), and the operator's writes stay within
20 % of what the changes call for (2 per spec change, 1 per ConfigMap change; counted by the
operator itself: rest_client_requests_total on its /metrics, every write method and answer, 409s
included); once converged it makes no write at all.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kubeop.cache import SharedInformerFactory
from kubeop.client import Client
from kubeop.core.errors import Conflict
from kubeop.testing import ControlPlane

from .support import (
    CONFIGMAPS,
    WIDGETS,
    OperatorProcess,
    assert_converged,
    assert_store_matches,
    client_for,
    create_widgets,
    names,
    report,
    rng,
    scale,
    wait_converged,
)

pytestmark = pytest.mark.controlplane

N = scale(40, 200)
HOT = scale(10, 40)  # the writers pick among these Widgets: every write lands on a contested object
WRITERS = 10
STORM = scale(8.0, 30.0)
PAUSE = 0.02  # between one writer's writes: 10 writers, ~350 writes/s in all
SETTLE = 10.0  # after the writers stop, every object converges within this
# The operator's writes against what the writers' changes call for (a spec change: the ConfigMap
# and the status, 2; a ConfigMap change: putting it back, 1). Several changes to one object before
# its reconcile need one answer, and each 409 is one more write; in all at most 20 % over.
NEEDED_RATIO = 1.2


async def _writer(
    client: Client, ns: str, hot: list[str], until: float, seed: int, done: Counter[str]
) -> None:
    chance = rng(f"conflict-storm-writer-{seed}")
    i = 0
    while time.monotonic() < until:
        i += 1
        name = chance.choice(hot)
        what = chance.choice(("spec", "spec-put", "labels", "data", "data-put"))
        value = f"w{seed}-{i}"
        try:
            if what == "spec":
                await client.patch(WIDGETS, name, {"spec": {"value": value}}, namespace=ns)
            elif what == "labels":
                await client.patch(WIDGETS, name, {"metadata": {"labels": {"writer": value}}}, namespace=ns)
            elif what == "data":
                await client.patch(CONFIGMAPS, name, {"data": {"value": value}}, namespace=ns)
            else:  # read, change, write back with the resourceVersion read: 409 if anyone wrote since
                res = WIDGETS if what == "spec-put" else CONFIGMAPS
                obj: dict[str, Any] = await client.get(res, name, namespace=ns)
                if res is WIDGETS:
                    obj["spec"] = {"value": value}
                else:
                    obj["data"] = {"value": value}
                await client.update(obj, resource=res)
            done[what.removesuffix("-put")] += 1
        except Conflict:
            done["conflicts"] += 1
        await asyncio.sleep(PAUSE)


async def test_conflict_storm_leaves_nothing_stuck_and_bounded_writes(
    fault_plane: ControlPlane, fault_namespace: str, tmp_path: Path
) -> None:
    plane, ns = fault_plane, fault_namespace
    all_names = names(N)
    with OperatorProcess(plane, ns, tmp_path, log_level="WARNING") as op:
        op.start()
        async with client_for(plane) as client, SharedInformerFactory(client) as factory:
            stores = (factory.informer(WIDGETS, namespace=ns), factory.informer(CONFIGMAPS, namespace=ns))
            assert await factory.wait_for_cache_sync(timeout=30)
            await create_widgets(client, ns, all_names, "v0")
            await wait_converged(client, ns, timeout=60, informers=stores)
            await asyncio.sleep(1.0)
            before = op.requests()

            done: Counter[str] = Counter()
            hot = rng("conflict-storm").sample(all_names, HOT)
            until = time.monotonic() + STORM
            await asyncio.gather(*(_writer(client, ns, hot, until, seed, done) for seed in range(WRITERS)))
            stopped = time.monotonic()
            # The last value each Widget was given stands: read it back, every ConfigMap must follow.
            widgets = await client.list_all(WIDGETS, namespace=ns)
            expected = {w["metadata"]["name"]: w["spec"]["value"] for w in widgets.items}
            converged = await wait_converged(client, ns, expected, timeout=60, informers=stores)
            settle = converged - stopped
            await assert_converged(client, ns, expected)
            for res, informer in zip((WIDGETS, CONFIGMAPS), stores, strict=True):
                await assert_store_matches(informer, client, res, ns)

            await asyncio.sleep(1.0)  # trailing writes land
            after = op.requests()
            await asyncio.sleep(2.0)
            idle = op.requests()
            assert op.alive, f"the operator died:\n{op.log_tail()}"
    by_code = Counter({f"{m} {c}": n - before.get((m, c), 0) for (m, c), n in after.items() if m != "GET"})
    writes = sum(n for key, n in by_code.items() if key.split()[0] in ("POST", "PUT", "PATCH", "DELETE"))
    idle_writes = sum(
        n - after.get(key, 0) for key, n in idle.items() if key[0] in ("POST", "PUT", "PATCH", "DELETE")
    )
    changes = done["spec"] + done["data"]
    per_change = writes / max(changes, 1)
    needed = 2 * done["spec"] + done["data"]
    ratio = writes / max(needed, 1)
    report(
        "conflict-storm",
        objects=N,
        contested=HOT,
        writers=WRITERS,
        storm_s=STORM,
        writer_changes=dict(done),
        operator_writes=writes,
        operator_writes_by_answer=dict(by_code),
        writes_per_change=round(per_change, 3),
        writes_needed=needed,
        writes_over_needed=round(ratio, 3),
        converged_after_writers_stopped_s=round(settle, 2),
        writes_when_idle=idle_writes,
    )
    assert settle < SETTLE, f"converged {settle:.1f} s after the writers stopped"
    assert idle_writes == 0, f"{idle_writes} writes after convergence: the operator is fighting someone"
    assert ratio <= NEEDED_RATIO, (
        f"{writes} operator writes where the {done['spec']} spec and {done['data']} data changes call "
        f"for {needed} ({ratio:.2f}x): {dict(by_code)}"
    )
