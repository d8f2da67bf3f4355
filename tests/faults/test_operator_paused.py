"""(b) The operator is frozen (SIGSTOP) while Widgets are updated, deleted, re-created and created,
and etcd is compacted and kube-apiserver restarted, so that the history its watches would resume
from is gone: on SIGCONT its Widget watch gets 410 Gone and relists, and within 2 s every Widget
has converged.

Nothing is lost: every Widget has its one ConfigMap with its latest value and a status for its
generation; the ConfigMaps of deleted Widgets are left to the garbage collector
(kube-controller-manager runs here), which removes every one of them; then the informers of the
test process match fresh lists.

Why the restarts: etcd compaction alone does not expire a watch served from kube-apiserver's watch
cache, which keeps its own history of recent events (and learns nothing of a compaction made
through etcd's API); a new kube-apiserver's cache starts after the compaction, as after a control
plane upgrade or failover. And the server that sees the changes must not be the one the frozen
process was connected to: that one would push them into the process's socket buffers, where it
finds them on SIGCONT (measured: then nothing needs a relist). So kube-apiserver is restarted
right after the freeze and again after the compaction."""

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
    GROUP,
    WIDGETS,
    OperatorProcess,
    assert_converged,
    assert_store_matches,
    client_for,
    create_widgets,
    delete_widgets,
    fresh_namespace,
    names,
    report,
    scale,
    set_values,
    state,
    summary,
    wait_converged,
    wait_server_back,
)

pytestmark = [pytest.mark.controlplane, pytest.mark.full]

N = scale(90, 300)
RUNS = scale(1, 3)
BOUND = 2.0


def _controller_uid(cm: dict[str, Any]) -> str | None:
    for ref in cm["metadata"].get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Widget":
            return str(ref.get("uid"))
    return None


async def test_operator_frozen_through_changes_compaction_and_restart_relists_and_converges_within_2s(
    fault_plane_full: ControlPlane, tmp_path: Path
) -> None:
    plane = fault_plane_full
    ns = fresh_namespace(plane, "frozen")
    expected = dict.fromkeys(names(N), "v0")
    took: list[float] = []
    details: list[dict[str, Any]] = []
    with OperatorProcess(plane, ns, tmp_path) as op:
        op.start()
        async with client_for(plane) as client, SharedInformerFactory(client) as factory:
            stores = (factory.informer(WIDGETS, namespace=ns), factory.informer(CONFIGMAPS, namespace=ns))
            assert await factory.wait_for_cache_sync(timeout=30)
            await create_widgets(client, ns, sorted(expected), "v0")
            await wait_converged(client, ns, expected, timeout=60, informers=stores)
            for run in range(RUNS):
                value = f"v{run + 1}"
                live = sorted(expected)
                third = len(live) // 3
                update, delete = live[:third], live[third : 2 * third]
                recreate = delete[:5]  # deleted and created again under the same name: a new uid
                created = [f"n{run}-{i:04d}" for i in range(third)]

                op.pause()
                paused_at = time.monotonic()
                _, before = await state(client, ns, consistent=True)
                untouched = {c["metadata"]["uid"]: c["metadata"]["resourceVersion"] for c in before}
                # The frozen process's connections go first: a server that lived on would push
                # the changes below into its socket buffers, where it would find them on SIGCONT.
                await _restart_apiserver(plane, ns)
                await set_values(client, ns, dict.fromkeys(update, value))
                await delete_widgets(client, ns, delete)
                await _until_gone(client, ns, recreate)
                await create_widgets(client, ns, [*created, *recreate], value)
                for name in delete:
                    expected.pop(name)
                expected.update(dict.fromkeys([*update, *created, *recreate], value))
                compacted = await asyncio.to_thread(plane.compact_etcd)
                await _restart_apiserver(plane, ns)  # a watch cache without that history
                await asyncio.sleep(0.5)
                frozen_for = time.monotonic() - paused_at

                resumed = time.monotonic()
                op.resume()
                converged = await wait_converged(
                    client, ns, expected, timeout=60, allow_orphans=True, informers=stores
                )
                took.append(converged - resumed)
                # Its Widget watch cannot resume (410): it relisted. (Its ConfigMap watch may
                # resume where it stopped, when the new server still has that version.)
                relisted = {"widgets": round(op.wait_for("lists widgets ", 10, since=resumed) - resumed, 2)}
                relisted.update(_relisted(op, "configmaps", resumed))
                # Children of deleted Widgets that are still there: the garbage collector's to
                # remove. Those written after the freeze were made by the operator from its stale
                # Widget cache (its ConfigMap relist can land before its Widget relist, and a child
                # the collector deleted is made again for the Widget it still believes in); they
                # are reported, and must be collected like the others.
                ws, cms = await state(client, ns, consistent=True)
                alive = {w["metadata"]["uid"] for w in ws}
                orphans = [c for c in cms if _controller_uid(c) not in alive]
                written = [
                    c["metadata"]["name"]
                    for c in orphans
                    if untouched.get(c["metadata"]["uid"]) != c["metadata"]["resourceVersion"]
                ]
                # The collector's own latency (it takes up the Widget CRD up to ~45 s after the
                # control plane starts, and re-lists after each restart): a generous bound.
                gc_at = await wait_converged(client, ns, expected, timeout=150, informers=stores)
                await assert_converged(client, ns, expected)
                for res, informer in zip((WIDGETS, CONFIGMAPS), stores, strict=True):
                    await assert_store_matches(informer, client, res, ns)
                details.append(
                    {
                        "frozen_s": round(frozen_for, 1),
                        "compacted_at": compacted,
                        "updated": len(update),
                        "deleted": len(delete),
                        "created": len(created) + len(recreate),
                        "relisted_after_s": relisted,
                        "converged_after_s": round(took[-1], 2),
                        "orphans_at_convergence": len(orphans),
                        "orphans_made_from_stale_cache": len(written),
                        "gc_done_after_s": round(gc_at - resumed, 2),
                    }
                )
                print(f"run {run}: {details[-1]}", flush=True)
                assert op.alive, f"the operator died:\n{op.log_tail()}"
    report("operator-frozen", objects=N, runs=RUNS, converged_after_s=took, runs_detail=details)
    slow = [round(t, 2) for t in took if t >= BOUND]
    assert not slow, f"converged {slow} s after SIGCONT (bound {BOUND} s); all: {summary(took)}"


async def _restart_apiserver(plane: ControlPlane, ns: str) -> None:
    """SIGKILL kube-apiserver, start it again, and wait until it serves Widget watches (a
    restarted server answers /readyz before its custom resources' watch caches are filled; until
    then a watch gets 429 "storage is (re)initializing")."""
    await asyncio.to_thread(plane.stop_apiserver)
    await asyncio.to_thread(plane.start_apiserver, wait=False)
    await wait_server_back(plane, ns)
    path = f"/apis/{GROUP}/v1/namespaces/{ns}/widgets?watch=true&resourceVersion=0&timeoutSeconds=1"
    deadline = time.monotonic() + 30
    while (await asyncio.to_thread(plane.api.raw, "GET", path))[0] != 200:
        assert time.monotonic() < deadline, (
            "kube-apiserver does not serve Widget watches 30 s after its start"
        )
        await asyncio.sleep(0.05)


def _relisted(op: OperatorProcess, kind: str, since: float) -> dict[str, float]:
    for at, line in op.lines:
        if line.startswith(f"lists {kind} ") and at >= since:
            return {kind: round(at - since, 2)}
    return {}


async def _until_gone(client: Any, ns: str, widget_names: list[str]) -> None:
    """Deleted Widgets have no finalizers; wait until the API server has removed them."""
    deadline = time.monotonic() + 30
    for name in widget_names:
        while await client.get_or_none(WIDGETS, name, namespace=ns) is not None:
            assert time.monotonic() < deadline, f"Widget {name} still there 30 s after its deletion"
            await asyncio.sleep(0.05)
