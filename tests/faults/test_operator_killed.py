"""(d) The operator is SIGKILLed at random points while it converges N Widgets (created, then
changed again each round) and started again at once, KILLS times: every time, everything
converges, without a duplicate child; the restarted operator writes only what is still missing
(its initial list sees what its predecessor had written; compare-before-write skips the rest)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from kubeop.cache import SharedInformerFactory
from kubeop.testing import ControlPlane

from .support import (
    CONFIGMAPS,
    WIDGETS,
    OperatorProcess,
    assert_converged,
    client_for,
    create_widgets,
    names,
    report,
    rng,
    scale,
    set_values,
    summary,
    wait_converged,
    with_value,
)

pytestmark = pytest.mark.controlplane

N = scale(200, 1000)
KILLS = scale(3, 10)


async def test_operator_sigkilled_at_random_points_converges_every_time_without_duplicates(
    fault_plane: ControlPlane, fault_namespace: str, tmp_path: Path
) -> None:
    plane, ns = fault_plane, fault_namespace
    chance = rng("operator-killed")
    all_names = names(N)
    rounds: list[dict[str, Any]] = []
    with OperatorProcess(plane, ns, tmp_path, log_level="WARNING") as op:
        op.start()
        async with client_for(plane) as client, SharedInformerFactory(client) as factory:
            stores = (factory.informer(WIDGETS, namespace=ns), factory.informer(CONFIGMAPS, namespace=ns))
            assert await factory.wait_for_cache_sync(timeout=30)
            for kill in range(KILLS):
                value = f"k{kill}"
                expected = dict.fromkeys(all_names, value)
                started = time.monotonic()
                if kill == 0:
                    writes = asyncio.ensure_future(create_widgets(client, ns, all_names, value))
                else:
                    writes = asyncio.ensure_future(set_values(client, ns, expected))
                # A random point of the convergence: 0 to 95 % of the ConfigMaps have the new
                # value (0: possibly before the operator has even seen the change).
                at = int(N * chance.uniform(0.0, 0.95))
                while (done := with_value(stores[1], ns, value)) < at:  # noqa: ASYNC110
                    await asyncio.sleep(0.002)
                op.kill()
                killed = time.monotonic()
                await writes  # the test's own writes finish (they may outlast the kill)
                missing = N - with_value(stores[1], ns, value)
                op.start(wait=None)
                restarted = time.monotonic()
                synced = op.wait_for("synced", 60) - restarted
                converged = await wait_converged(client, ns, expected, timeout=120, informers=stores)
                await assert_converged(client, ns, expected)  # one child each, no duplicate, no orphan
                await asyncio.sleep(0.5)
                made = op.writes()
                rounds.append(
                    {
                        "killed_after_s": round(killed - started, 2),
                        "converged_at_kill": done,
                        "missing_after_kill": missing,
                        "restart_to_synced_s": round(synced, 2),
                        "restart_to_converged_s": round(converged - restarted, 2),
                        "writes_after_restart": made,
                    }
                )
                print(f"kill {kill}: {rounds[-1]}", flush=True)
                # At most a ConfigMap write and a status write for each Widget whose ConfigMap was
                # not done at the kill, plus a status write for each reconcile the kill cut between
                # its two writes (16 workers).
                assert made <= 2 * missing + 16, f"{made} writes after a restart for {missing} missing"
            assert op.alive, f"the operator died:\n{op.log_tail()}"
    report(
        "operator-sigkill",
        objects=N,
        kills=KILLS,
        restart_to_converged=summary([r["restart_to_converged_s"] for r in rounds]),
        rounds=rounds,
    )
