"""(a) kube-apiserver SIGKILLed in the middle of converging, back 5 s later: the operator (a
separate process) converges within 3 s of the server's return, in every run, and nothing is
lost; an informer in the test process that watched through the outages matches a fresh list.

"Return" is the moment the server answers /readyz and the Widget endpoint again (a restarted
kube-apiserver serves custom resources only once its CRD informer has caught up)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from kubeop.cache import Informer, SharedInformerFactory
from kubeop.client import Client
from kubeop.core.resource import ApiResource
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
    set_values,
    summary,
    wait_converged,
    wait_server_back,
    with_value,
)

pytestmark = pytest.mark.controlplane

N = scale(150, 500)
RUNS = int(os.environ.get("KUBEOP_FAULTS_OUTAGE_RUNS", scale(2, 10)))
OUTAGE = 5.0
BOUND = 3.0


async def test_apiserver_killed_mid_converge_recovers_within_3s_every_time(
    fault_plane: ControlPlane, fault_namespace: str, tmp_path: Path
) -> None:
    plane, ns = fault_plane, fault_namespace
    widget_names = names(N)
    chance = rng("apiserver-outage")
    recoveries: list[float] = []
    timeline: list[dict[str, float | str]] = []
    with OperatorProcess(plane, ns, tmp_path) as op:
        op.start()
        async with client_for(plane) as client, SharedInformerFactory(client) as factory:
            informers = [(res, factory.informer(res, namespace=ns)) for res in (WIDGETS, CONFIGMAPS)]
            assert await factory.wait_for_cache_sync(timeout=30)
            stores = (informers[0][1], informers[1][1])
            for run in range(RUNS):
                value = f"run{run}"
                expected = dict.fromkeys(widget_names, value)
                if run == 0:
                    await create_widgets(client, ns, widget_names, value)
                else:
                    await set_values(client, ns, expected)
                # Mid-converge, at a random point: between 5 and 50 % of the ConfigMaps have
                # the new value.
                at = int(N * chance.uniform(0.05, 0.5))
                while (done := with_value(stores[1], ns, value)) < at:  # noqa: ASYNC110
                    await asyncio.sleep(0.005)
                t_kill = time.monotonic()
                await asyncio.to_thread(plane.stop_apiserver)  # SIGKILL
                await asyncio.sleep(OUTAGE - (time.monotonic() - t_kill))
                t_start = time.monotonic()
                await asyncio.to_thread(plane.start_apiserver, wait=False)
                seen: dict[str, float] = {}
                back = await wait_server_back(plane, ns, seen=seen)
                converged = await wait_converged(client, ns, expected, timeout=60, informers=stores)
                took = converged - back
                recoveries.append(took)
                timeline.append(
                    {
                        "converged_at_kill": done,
                        "killed": _wall(t_kill),
                        "restarted": _wall(t_start),
                        "readyz": _wall(seen["readyz"]),
                        "widgets": _wall(seen["widgets"]),
                        "converged": _wall(converged),
                        "back_to_converged_s": round(took, 2),
                    }
                )
                print(f"run {run}: {timeline[-1]}", flush=True)
                await assert_converged(client, ns, expected)
                assert op.alive, f"the operator died:\n{op.log_tail()}"
                for res, informer in informers:
                    await _eventually_matches(informer, client, res, ns)
    report(
        "apiserver-outage", objects=N, runs=RUNS, outage_s=OUTAGE, recoveries=recoveries, timeline=timeline
    )
    slow = [round(t, 2) for t in recoveries if t >= BOUND]
    assert not slow, (
        f"converged {slow} s after the API server's return (bound {BOUND} s); all: {summary(recoveries)}"
    )


def _wall(monotonic: float) -> str:
    """A monotonic instant as wall-clock time, to line up with the operator's log."""
    wall = time.time() - (time.monotonic() - monotonic)
    return time.strftime("%H:%M:%S", time.localtime(wall)) + f".{int(wall * 1000) % 1000:03d}"


async def _eventually_matches(informer: Informer, client: Client, resource: ApiResource, ns: str) -> None:
    deadline = time.monotonic() + 15
    while True:
        try:
            await assert_store_matches(informer, client, resource, ns)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
