"""The Helm reconciler's decisions, on a FakeCluster and a fake Helm, with a virtual clock.

What matters most here is what does *not* happen: no helm process and no write in a steady
state, one dry-run per reconcile period, no retry storm after a chart error.

The reconciler runs as in an operator: a real cached client (informers over the fake cluster's
watches) and a real EventRecorder. Helm and the test's own changes write through other clients,
so the reconciler's writes are exactly what its transport sent.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubeop.cache import SharedInformerFactory
from kubeop.client import Client
from kubeop.controller import Context, EventRecorder, ReconcilerClient, Request, Result
from kubeop.core.patch import PatchType
from kubeop.core.request import ApiRequest
from kubeop.core.resource import ApiResource
from kubeop.helm.ownership import owner_labels
from kubeop.helm.postrender import inject_owner_references
from kubeop.helm.reconciler import (
    FINALIZER,
    RECONCILE_PERIOD_ANNOTATION,
    UNINSTALL_WAIT_ANNOTATION,
    UPGRADE_FORCE_ANNOTATION,
    HelmReconciler,
    ReleaseError,
    annotation_bool,
    chart_digest,
    period_from_annotation,
    reconcile_period,
)
from kubeop.helm.runtime import HelmRuntime
from kubeop.helm.watches import Watch
from kubeop.testing import FakeCluster

from .fakes import DEPLOYMENTS, PHP, PHP_CRD, RELEASE_SECRETS, SERVICES, FakeHelm

NS, NAME = "ns", "web"
HOLD = "test.example.com/hold"
EVENTS = ApiResource("events.k8s.io", "v1", "events", kind="Event")
_PATH = re.compile(r"^/apis?/(?:[^/]+/)?[^/]+/namespaces/([^/]+)/([^/]+)(?:/([^/]+))?(/status)?$")
_KINDS = {
    "phpdeployments": "PhpDeployment",
    "deployments": "Deployment",
    "services": "Service",
    "secrets": "Secret",
}


class World:
    """A fake cluster with the PhpDeployment CRD and namespace ``ns``, the reconciler's cached
    client of it, a fake Helm, and the reconciler on a clock the test moves (``now``)."""

    def __init__(self, chart: Path, **watch: Any) -> None:
        self.cluster = FakeCluster()
        self.cluster.add_crd(PHP_CRD)
        self.transport = self.cluster.transport()
        self.normalise: set[str] = set()  # names whose merge patches the "server" normalises away
        self._request = self.transport.request
        self.transport.request = self._normalising_request  # type: ignore[method-assign]
        self.api = Client(transport=self.transport)
        self.cache = SharedInformerFactory(self.api)
        self.client = ReconcilerClient(self.api, self.cache)
        self.admin = self.cluster.client()  # the test's and Helm's writes: not the reconciler's
        self.helm = FakeHelm(self.admin)
        self.recorder = EventRecorder(self.cluster.client(), "phpdeployment-controller")
        self.now = 1000.0
        self.enqueued: list[Request] = []
        self._mark = 0
        self.reconciler = HelmReconciler(
            Watch("web.example.com", "v1", "PhpDeployment", chart, **watch),
            HelmRuntime(self.helm),  # type: ignore[arg-type]
            reconcile_period=60.0,
            clock=lambda: self.now,
        )
        self.reconciler._enqueue = self.enqueued.append  # type: ignore[method-assign]

    async def _normalising_request(self, req: ApiRequest) -> Any:
        # The fake cluster does not default or normalise values; a server that stores a patched
        # value in another form answers a dry run with the object unchanged. Do that here.
        if req.method == "PATCH" and dict(req.query).get("dryRun") == "All":
            m = _PATH.match(req.path)
            if m and m.group(3) in self.normalise:
                self.transport.sent.append(req)
                return await self._request(ApiRequest("GET", req.path))
        return await self._request(req)

    async def start(self) -> World:
        await self.admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        self.cache.start()
        return self

    async def close(self) -> None:
        await self.recorder.flush()
        await self.cache.stop()
        for client in (self.api, self.admin, self.recorder._client):
            assert client is not None
            await client.close()

    async def settle(self) -> None:
        """Wait until every informer has seen every write so far (as a controller's next
        reconcile, started by the events of those writes, would)."""
        rv = int(self.cluster.resource_version)
        self.cluster.step(0)  # a bookmark to every watch: informers of untouched kinds move on too
        for _ in range(400):
            synced = [i.last_sync_resource_version for i in self.cache.informers]
            if all(v.isdigit() and int(v) >= rv for v in synced):
                break
            await asyncio.sleep(0.005)
        else:
            raise AssertionError(f"informers did not reach resourceVersion {rv}: {synced}")
        for _ in range(5):
            await asyncio.sleep(0)

    async def create(self, spec: dict[str, Any], annotations: dict[str, str] | None = None) -> None:
        md: dict[str, Any] = {"name": NAME, "namespace": NS}
        if annotations:
            md["annotations"] = annotations
        await self.admin.create(
            {"apiVersion": "web.example.com/v1", "kind": "PhpDeployment", "metadata": md, "spec": spec}
        )

    async def owner_labels(self) -> dict[str, str]:
        """The release labels that record the resource as the owner."""
        cr = await self.cr()
        assert cr is not None
        return owner_labels(cr)

    async def cr(self) -> dict[str, Any] | None:
        obj: dict[str, Any] | None = await self.admin.get_or_none(PHP, NAME, namespace=NS)
        return obj

    async def edit(self, **spec: Any) -> None:
        cr = await self.cr()
        assert cr is not None
        cr["spec"].update(spec)
        await self.admin.update(cr)  # the server bumps metadata.generation

    async def delete_cr(self) -> None:
        """Delete the resource: with the finalizer on it, it stays, with a deletionTimestamp."""
        await self.admin.delete(PHP, NAME, namespace=NS)

    async def reconcile(self) -> Result | None:
        await self.settle()
        ctx = Context(Request(NS, NAME), self.client, self.recorder, "phpdeployment-controller")
        return await self.reconciler.reconcile(Request(NS, NAME), ctx)

    async def conditions(self) -> dict[str, dict[str, Any]]:
        cr = await self.cr()
        assert cr is not None
        return {c["type"]: c for c in cr.get("status", {}).get("conditions", [])}

    def helm_ops(self) -> list[str]:
        return [c[0] for c in self.helm.calls]

    async def child(self, res: Any) -> dict[str, Any] | None:
        obj: dict[str, Any] | None = await self.admin.get_or_none(res, NAME, namespace=NS)
        return obj

    async def change_child(self, res: Any, change: Callable[[dict[str, Any]], None]) -> None:
        obj = await self.child(res)
        assert obj is not None
        change(obj)
        await self.admin.update(obj)

    async def release_secrets(self) -> list[dict[str, Any]]:
        return list((await self.admin.list(RELEASE_SECRETS, namespace=NS, label_selector="owner=helm")).items)

    def _sent(self) -> list[ApiRequest]:
        return self.transport.sent[self._mark :]

    def writes(self) -> list[tuple[str, str, str]]:
        """(what, kind, namespace/name) of the reconciler's writes since :meth:`clear`: create,
        delete, status, finalizer (a patch of the resource itself), patch (of another object)."""
        out = []
        for req in self._sent():
            if req.method == "GET" or dict(req.query).get("dryRun") == "All":
                continue
            m = _PATH.match(req.path)
            assert m is not None, req.path
            ns, plural, name, status = m.groups()
            kind = _KINDS[plural]
            if req.method == "POST":
                what, name = "create", orjson.loads(req.body or b"{}")["metadata"]["name"]
            elif req.method == "DELETE":
                what = "delete"
            elif status:
                what = "status"
            else:
                what = "finalizer" if plural == "phpdeployments" else "patch"
            out.append((what, kind, f"{ns}/{name}"))
        return out

    def dry_runs(self) -> int:
        return sum(1 for r in self._sent() if dict(r.query).get("dryRun") == "All")

    async def events(self) -> list[tuple[str, str, str]]:
        """(type, reason, note) of the Events recorded so far."""
        await self.recorder.flush()
        found = await self.admin.list(EVENTS, namespace=NS)
        return [(e["type"], e["reason"], e["note"]) for e in found.items]

    async def clear(self) -> None:
        """Forget the reconciler's writes, helm calls and enqueued requests so far."""
        await self.settle()
        self._mark = len(self.transport.sent)
        self.helm.calls.clear()
        self.enqueued.clear()


async def eventually(check: Callable[[], bool]) -> None:
    for _ in range(400):
        if check():
            return
        await asyncio.sleep(0.005)
    assert check()


@pytest.fixture
def chart(tmp_path: Path) -> Path:
    chart = tmp_path / "php"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: php\nversion: 0.1.0\n")
    return chart


@pytest.fixture
async def make_world(chart: Path) -> AsyncIterator[Callable[..., Any]]:
    worlds: list[World] = []

    async def make(**watch: Any) -> World:
        world = World(chart, **watch)
        worlds.append(world)
        return await world.start()

    yield make
    for world in worlds:
        await world.close()


@pytest.fixture
async def world(make_world: Callable[..., Any]) -> World:
    w: World = await make_world()
    return w


async def installed(world: World) -> World:
    await world.create({"image": "php:8.3"})
    result = await world.reconcile()
    assert result == Result(requeue_after=60.0)
    await world.clear()
    return world


async def test_install(world: World) -> None:
    await world.create({"image": "php:8.3", "replicas": 2})
    assert await world.reconcile() == Result(requeue_after=60.0)
    assert world.helm_ops() == ["install"]
    cr = await world.cr()
    assert cr is not None
    assert cr["metadata"]["finalizers"] == [FINALIZER]
    conds = await world.conditions()
    assert conds["Initialized"]["status"] == "True"
    assert (conds["Deployed"]["status"], conds["Deployed"]["reason"], conds["Deployed"]["message"]) == (
        "True",
        "InstallSuccessful",
        "notes",
    )
    assert cr["status"]["deployedRelease"]["name"] == NAME
    deployment = await world.child(DEPLOYMENTS)
    assert deployment is not None and deployment["spec"]["replicas"] == 2
    [ref] = deployment["metadata"]["ownerReferences"]  # set by the post-renderer
    assert ref == {
        "apiVersion": "web.example.com/v1", "kind": "PhpDeployment", "name": NAME,
        "uid": cr["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
    }  # fmt: skip
    assert ("Normal", "InstallSuccessful", "installed release web") in await world.events()
    # Finalizer first, then the status: two writes to the resource, none to its children.
    assert [w[0] for w in world.writes()] == ["finalizer", "status"]


async def test_steady_state_runs_no_helm_and_writes_nothing(world: World) -> None:
    await installed(world)
    for _ in range(20):
        world.now += 2.0  # 40 s: within the reconcile period
        assert (await world.reconcile()).requeue_after > 0  # type: ignore[union-attr]
    assert world.helm.calls == []
    assert world.writes() == []
    assert world.dry_runs() == 0


async def test_one_dry_run_per_reconcile_period(world: World) -> None:
    await installed(world)
    world.now += 59.5  # within a second of the period: due (requeues are not exact)
    result = await world.reconcile()
    assert world.helm_ops() == ["dry-run"]
    assert result == Result(requeue_after=60.0)
    world.now += 30
    await world.reconcile()
    assert world.helm_ops() == ["dry-run"]
    world.now += 31
    await world.reconcile()
    assert world.helm_ops() == ["dry-run", "dry-run"]
    assert world.writes() == []


async def test_requeue_after_counts_down_to_the_next_render(world: World) -> None:
    await installed(world)
    world.now += 45
    assert await world.reconcile() == Result(requeue_after=15.0)


async def test_a_deleted_child_is_recreated_without_helm(world: World) -> None:
    await installed(world)
    await world.admin.delete(DEPLOYMENTS, NAME, namespace=NS)
    await eventually(lambda: world.enqueued == [Request(NS, NAME)])  # the dependent watch noticed
    await world.clear()
    await world.reconcile()
    assert world.helm.calls == []
    assert world.writes() == [("create", "Deployment", f"{NS}/{NAME}")]
    deployment = await world.child(DEPLOYMENTS)
    assert deployment is not None
    assert deployment["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert deployment["metadata"]["annotations"]["meta.helm.sh/release-name"] == NAME
    assert deployment["metadata"]["ownerReferences"][0]["controller"] is True
    assert ("Normal", "Reconciled", "created Deployment ns/web") in await world.events()


async def test_drift_is_reverted_and_normalised_values_are_left_alone(world: World) -> None:
    await installed(world)
    await world.change_child(DEPLOYMENTS, lambda d: d["spec"].update(replicas=5))
    await eventually(lambda: world.enqueued == [Request(NS, NAME)])
    await world.reconcile()
    assert [w[0] for w in world.writes()] == ["patch"]
    assert world.dry_runs() == 1  # the patch was tried first
    restored = await world.child(DEPLOYMENTS)
    assert restored is not None and restored["spec"]["replicas"] == 1

    # A value the server stores in another form: the dry run shows no change, so no write, and
    # the answer is remembered for this resourceVersion (one dry run, not one per reconcile).
    await world.clear()
    await world.change_child(SERVICES, lambda s: s["spec"]["ports"][0].update(port=8080))
    world.normalise.add(NAME)
    await world.reconcile()
    await world.reconcile()
    assert world.dry_runs() == 1  # the Service's, then remembered
    assert world.writes() == []


async def test_status_only_changes_of_children_do_not_reconcile(world: World) -> None:
    await installed(world)
    await world.admin.patch(
        DEPLOYMENTS,
        NAME,
        {"status": {"readyReplicas": 1}},
        namespace=NS,
        type=PatchType.MERGE,
        subresource="status",
    )
    await world.settle()
    assert world.enqueued == []


async def test_spec_change_upgrades_once(world: World) -> None:
    await installed(world)
    await world.edit(image="php:8.4")
    await world.reconcile()
    assert world.helm_ops() == ["dry-run", "upgrade"]
    deployment = await world.child(DEPLOYMENTS)
    assert deployment is not None
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "php:8.4"
    assert (await world.conditions())["Deployed"]["reason"] == "UpgradeSuccessful"
    await world.clear()
    world.now += 10
    await world.reconcile()
    assert world.helm.calls == [] and world.writes() == []


async def test_values_change_without_manifest_change_still_upgrades(world: World) -> None:
    await installed(world)
    await world.edit(unused="x")
    await world.reconcile()
    assert world.helm_ops() == ["dry-run", "upgrade"]


async def test_upgrade_force_annotation(make_world: Any) -> None:
    world = await make_world()
    await world.create({"image": "php:8.3"}, annotations={UPGRADE_FORCE_ANNOTATION: "true"})
    await world.reconcile()
    await world.edit(image="php:8.4")
    await world.reconcile()
    assert world.helm_ops() == ["install", "dry-run", "upgrade-force"]


async def test_chart_error_on_install_does_not_hot_loop(world: World) -> None:
    await world.create({"image": ""})
    result = await world.reconcile()
    assert result == Result(requeue_after=60.0)  # not an error: no backoff storm, the period
    assert world.helm_ops() == ["install"]
    failed = (await world.conditions())["ReleaseFailed"]
    assert (failed["status"], failed["reason"]) == ("True", "InstallError")
    assert "spec.image is required" in failed["message"]
    assert ("Warning", "InstallError") in [(e[0], e[1]) for e in await world.events()]
    writes = world.writes()
    for _ in range(10):  # events and resyncs keep coming: no helm, no writes
        world.now += 5
        await world.reconcile()
    assert world.helm_ops() == ["install"]
    assert world.writes() == writes
    world.now += 11  # the period has passed: one more attempt
    await world.reconcile()
    assert world.helm_ops() == ["install", "install"]
    # Fixing the spec retries at once and clears the failure.
    await world.edit(image="php:8.3")
    await world.reconcile()
    assert world.helm_ops() == ["install", "install", "install"]
    assert "ReleaseFailed" not in (await world.conditions())
    assert (await world.conditions())["Deployed"]["status"] == "True"


async def test_chart_error_on_upgrade_keeps_the_release(world: World) -> None:
    await installed(world)
    await world.edit(image="")
    assert await world.reconcile() == Result(requeue_after=60.0)
    assert world.helm_ops() == ["dry-run"]  # rendered, failed, nothing upgraded
    assert (await world.conditions())["ReleaseFailed"]["reason"] == "UpgradeError"
    assert (await world.conditions())["Deployed"]["status"] == "True"
    for _ in range(5):
        world.now += 5
        await world.reconcile()
    assert world.helm_ops() == ["dry-run"]
    await world.edit(image="php:8.3")  # reverted: nothing to upgrade, the failure is cleared
    await world.reconcile()
    assert world.helm_ops() == ["dry-run", "dry-run"]
    assert "ReleaseFailed" not in (await world.conditions())


async def test_failed_upgrade_is_rolled_back_and_retried_with_backoff(world: World) -> None:
    await installed(world)
    await world.edit(image="php:8.4")
    world.helm.fail_apply = True
    with pytest.raises(ReleaseError, match="cannot patch"):
        await world.reconcile()
    assert world.helm.calls == [("dry-run", NAME), ("upgrade", NAME), ("rollback", NAME, "1", "True")]
    assert (await world.conditions())["ReleaseFailed"]["reason"] == "UpgradeError"
    deployment = await world.child(DEPLOYMENTS)
    assert deployment is not None
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "php:8.3"
    # Our own revisions (the failed one, the rollback's) did not bring the resource back.
    await world.settle()
    assert Request(NS, NAME) not in world.enqueued
    # Whatever else brings it back within the backoff runs no helm...
    assert await world.reconcile() == Result(requeue_after=pytest.approx(0.5))
    assert len(world.helm.calls) == 3
    # ... and after it, the retry upgrades again. A second failure doubles the wait.
    world.now += 0.5
    world.helm.fail_apply = True
    with pytest.raises(ReleaseError):
        await world.reconcile()
    assert world.reconciler._failures[Request(NS, NAME)].until == pytest.approx(world.now + 1.0)
    world.now += 1.0
    await world.reconcile()
    assert world.helm_ops()[-2:] == ["dry-run", "upgrade"]
    assert "ReleaseFailed" not in (await world.conditions())
    assert Request(NS, NAME) not in world.reconciler._failures
    # A spec change does not wait for the backoff.
    await world.edit(image="php:9")
    world.helm.fail_apply = True
    with pytest.raises(ReleaseError):
        await world.reconcile()
    await world.edit(image="php:9.1")
    await world.reconcile()
    assert world.helm_ops()[-2:] == ["dry-run", "upgrade"]


async def test_failed_install_is_uninstalled_and_retried_with_backoff(world: World) -> None:
    await world.create({"image": "php:8.3"})
    world.helm.fail_apply = True
    with pytest.raises(ReleaseError, match="invalid"):
        await world.reconcile()
    assert world.helm_ops() == ["install", "uninstall"]
    assert await world.release_secrets() == []
    await world.settle()
    assert Request(NS, NAME) not in world.enqueued
    world.now += 0.5
    await world.reconcile()
    assert world.helm_ops() == ["install", "uninstall", "install"]
    assert (await world.conditions())["Deployed"]["status"] == "True"


async def test_leftover_failed_revisions_are_cleared_before_installing(world: World) -> None:
    await world.create({"image": "php:8.3"})
    await world.helm._record(NS, NAME, 1, "failed", "", {}, labels=await world.owner_labels())
    await world.reconcile()
    assert world.helm_ops() == ["uninstall", "install"]


async def test_pending_revisions_of_a_dead_helm_are_dropped(world: World) -> None:
    await installed(world)
    await world.helm._record(NS, NAME, 2, "pending-upgrade", "", {}, labels=await world.owner_labels())
    await world.reconcile()
    assert ("delete", "Secret", f"{NS}/sh.helm.release.v1.{NAME}.v2") in world.writes()
    assert world.helm.calls == []


async def test_delete_uninstalls_and_removes_the_finalizer(world: World) -> None:
    await installed(world)
    await world.delete_cr()
    cr = await world.cr()
    assert cr is not None and cr["metadata"]["deletionTimestamp"]  # held by the finalizer
    assert await world.reconcile() is None
    assert world.helm_ops() == ["uninstall"]
    assert await world.cr() is None  # finalizer removed: gone
    assert await world.child(DEPLOYMENTS) is None and await world.child(SERVICES) is None
    assert await world.release_secrets() == []


async def test_uninstall_wait_keeps_the_finalizer_until_the_objects_are_gone(make_world: Any) -> None:
    world = await make_world()
    await world.create({"image": "php:8.3"}, annotations={UNINSTALL_WAIT_ANNOTATION: "true"})
    await world.reconcile()
    # Someone else's finalizer on the Deployment: Helm's delete leaves it terminating.
    await world.change_child(DEPLOYMENTS, lambda d: d["metadata"].update(finalizers=[HOLD]))
    await world.delete_cr()
    assert await world.reconcile() == Result(requeue_after=2.0)
    lingering = await world.child(DEPLOYMENTS)
    assert lingering is not None and lingering["metadata"]["deletionTimestamp"]
    assert await world.cr() is not None
    assert (await world.conditions())["Deployed"]["message"] == "Waiting until all resources are deleted."
    await world.change_child(DEPLOYMENTS, lambda d: d["metadata"].update(finalizers=[]))  # gone now
    assert await world.child(DEPLOYMENTS) is None
    assert await world.reconcile() is None
    assert await world.cr() is None


async def test_a_deleted_resource_is_forgotten(world: World) -> None:
    await installed(world)
    await world.admin.patch(PHP, NAME, {"metadata": {"finalizers": None}}, namespace=NS, type=PatchType.MERGE)
    await world.delete_cr()
    assert await world.cr() is None
    assert await world.reconcile() is None
    assert world.reconciler._memo == {}


async def test_reconcile_period_annotation(make_world: Any) -> None:
    world = await make_world()
    await world.create({"image": "php:8.3"}, annotations={RECONCILE_PERIOD_ANNOTATION: "10s"})
    assert await world.reconcile() == Result(requeue_after=10.0)


async def test_watch_level_options(make_world: Any) -> None:
    world = await make_world(
        reconcile_period=0.0, override_values={"replicas": "3"}, max_concurrent_reconciles=3
    )
    await world.create({"image": "php:8.3", "replicas": 1})
    assert await world.reconcile() == Result()  # period 0: no periodic check
    deployment = await world.child(DEPLOYMENTS)
    assert deployment is not None and deployment["spec"]["replicas"] == 3  # the override wins
    assert ("Warning", "OverrideValuesInUse") in [(e[0], e[1]) for e in await world.events()]
    assert world.reconciler.workers == 3
    controller = world.reconciler.controller()
    assert controller.name == "phpdeployment-controller" and controller is world.reconciler.controller()


async def test_release_storage_changes_enqueue(world: World) -> None:
    await installed(world)
    world.enqueued.clear()
    await world.helm._record(NS, "other", 1, "deployed", "", {})
    await eventually(lambda: Request(NS, "other") in world.enqueued)


def test_annotation_helpers() -> None:
    obj = {
        "metadata": {"annotations": {"a": "true", "b": "F", "c": "maybe", RECONCILE_PERIOD_ANNOTATION: "2m"}}
    }
    assert annotation_bool(obj, "a", False) is True
    assert annotation_bool(obj, "b", True) is False
    assert annotation_bool(obj, "c", True) is True
    assert annotation_bool(obj, "missing", False) is False
    assert reconcile_period(obj, 60.0) == 120.0
    assert reconcile_period({"metadata": {}}, 60.0) == 60.0
    assert reconcile_period({"metadata": {"annotations": {RECONCILE_PERIOD_ANNOTATION: "x"}}}, 60.0) == 60.0


def test_chart_digest_sees_every_file(chart: Path) -> None:
    before = chart_digest(chart)
    (chart / "templates" / "cm.yaml").write_text("kind: ConfigMap\n")
    after = chart_digest(chart)
    assert before != after == chart_digest(chart)


async def test_namespace_and_selector_filter_the_primary_watch(make_world: Any) -> None:
    world = await make_world(selector={"matchLabels": {"team": "web"}})
    world.reconciler.runtime.namespace = "ns"
    preds = world.reconciler._primary_predicates()

    def passes(namespace: str, labels: dict[str, str]) -> bool:
        obj = {"metadata": {"name": "x", "namespace": namespace, "labels": labels, "generation": 1}}
        newer = {"metadata": {**obj["metadata"], "generation": 2}}
        return all(p.create(obj) and p.update(obj, newer) and p.delete(obj) for p in preds)

    assert passes("ns", {"team": "web"})
    assert not passes("other", {"team": "web"})
    assert not passes("ns", {"team": "db"})
    # Our own status and finalizer writes (no generation or annotation change) do not come back.
    obj = {"metadata": {"name": "x", "namespace": "ns", "labels": {"team": "web"}, "generation": 1}}
    assert not all(p.update(obj, {**obj, "status": {"x": 1}}) for p in preds)


async def test_resources_outside_the_selection_are_left_alone(make_world: Any) -> None:
    world = await make_world(selector={"matchLabels": {"team": "web"}})
    await world.create({"image": "php:8.3"})  # no team label: a release event may bring it here anyway
    assert await world.reconcile() is None
    assert world.helm.calls == [] and world.writes() == []


# -- ownership: a release of the resource's name that is not the resource's is never touched ------

OTHER_MANIFEST = (
    "---\n# Source: nginx/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n"
    "data:\n  a: b\n"
)


async def foreign_release(world: World, **labels: str) -> dict[str, Any]:
    """``helm install web nginx`` by a person (chart nginx, no owner), or ``labels`` on it."""
    await world.helm._record(NS, NAME, 1, "deployed", OTHER_MANIFEST, {"x": 1}, labels=labels, chart="nginx")
    [secret] = await world.release_secrets()
    return secret


async def assert_refused(world: World, secret: dict[str, Any], why: str) -> None:
    assert world.helm.calls == []  # no install, upgrade, dry run, rollback or uninstall
    assert await world.release_secrets() == [secret]  # the release is as it was
    conds = await world.conditions()
    assert (conds["ReleaseFailed"]["status"], conds["ReleaseFailed"]["reason"]) == ("True", "ReleaseNotOwned")
    message = conds["ReleaseFailed"]["message"]
    assert "Helm release web in namespace ns is not this PhpDeployment's" in message and why in message
    cr = await world.cr()
    assert cr is not None
    uid = cr["metadata"]["uid"]
    fix = f"kubectl label secret -n ns sh.helm.release.v1.web.v1 --overwrite helm.kubeop.dev/owner-uid={uid}"
    assert fix in message and "helm uninstall web -n ns" in message
    assert (conds["Deployed"]["status"], conds["Deployed"]["reason"]) == ("False", "ReleaseNotOwned")
    assert "deployedRelease" not in cr.get("status", {}) or cr["status"]["deployedRelease"] is None
    warnings = [e for e in await world.events() if e[1] == "ReleaseNotOwned"]
    assert warnings and warnings[0][0] == "Warning" and why in warnings[0][2]


async def test_a_release_of_another_chart_is_not_adopted(world: World) -> None:
    secret = await foreign_release(world)
    await world.create({"image": "php:8.3"})
    assert await world.reconcile() == Result(requeue_after=60.0)
    await assert_refused(
        world, secret, "it is a release of chart nginx-0.1.0, not of this operator's chart php"
    )
    cr = await world.cr()
    assert cr is not None and not cr["metadata"].get("finalizers")  # nothing to clean up for it


async def test_a_release_of_the_same_chart_without_an_owner_is_not_adopted(world: World) -> None:
    # `helm install web ./php` by a person: the operator's chart, but not made for this resource.
    await world.helm._record(NS, NAME, 1, "deployed", world.helm.render(NAME, {"image": "x"}, "install"), {})
    [secret] = await world.release_secrets()
    await world.create({"image": "php:8.3"})
    await world.reconcile()
    await assert_refused(
        world, secret, "records no owner and none of its objects is controlled by this resource"
    )


async def test_a_release_owned_by_another_resource_is_not_adopted(world: World) -> None:
    secret = await foreign_release(
        world, **{"helm.kubeop.dev/owner-uid": "1234", "helm.kubeop.dev/owner-kind": "Other"}
    )
    await world.create({"image": "php:8.3"})
    await world.reconcile()
    await assert_refused(world, secret, "it belongs to another Other (uid 1234)")


async def test_leftovers_of_a_foreign_release_are_not_cleaned_up(world: World) -> None:
    await world.helm._record(NS, NAME, 1, "failed", OTHER_MANIFEST, {}, chart="nginx")
    await world.helm._record(NS, NAME, 2, "pending-upgrade", OTHER_MANIFEST, {}, chart="nginx")
    before = await world.release_secrets()
    await world.create({"image": "php:8.3"})
    await world.reconcile()
    assert world.helm.calls == [] and await world.release_secrets() == before
    assert not [w for w in world.writes() if w[1] == "Secret"]


async def test_a_release_made_by_someone_else_while_installing_is_not_uninstalled(world: World) -> None:
    await world.create({"image": "php:8.3"})
    install = world.helm.install

    async def someone_first(*args: Any, **kwargs: Any) -> Any:
        await foreign_release(world)  # `helm install web nginx`, between our read and our install
        return await install(*args, **kwargs)

    world.helm.install = someone_first  # type: ignore[method-assign]
    await world.reconcile()
    assert world.helm_ops() == ["install"]  # refused by Helm ("cannot re-use a name"); no uninstall
    [secret] = await world.release_secrets()
    assert (
        secret["metadata"]["labels"]["version"] == "1"
        and "helm.kubeop.dev/owner-uid" not in secret["metadata"]["labels"]
    )
    assert (await world.conditions())["ReleaseFailed"]["reason"] == "ReleaseNotOwned"


async def test_deleting_the_resource_leaves_a_foreign_release_installed(world: World) -> None:
    secret = await foreign_release(world)
    await world.create({"image": "php:8.3"})
    await world.admin.patch(
        PHP, NAME, {"metadata": {"finalizers": [FINALIZER]}}, namespace=NS, type=PatchType.MERGE
    )
    await world.delete_cr()
    assert await world.reconcile() is None
    assert world.helm.calls == []  # no uninstall
    assert await world.release_secrets() == [secret]
    assert await world.cr() is None  # the finalizer went: the resource is gone, the release stays
    notes = [e[2] for e in await world.events() if e[1] == "ReleaseNotOwned"]
    assert notes and "It was not uninstalled." in notes[0]


async def test_the_release_records_its_owner_and_a_new_resource_of_the_name_is_refused(world: World) -> None:
    await installed(world)
    cr = await world.cr()
    assert cr is not None
    labels = (await world.release_secrets())[0]["metadata"]["labels"]
    assert labels["helm.kubeop.dev/owner-uid"] == cr["metadata"]["uid"]
    assert (labels["helm.kubeop.dev/owner-kind"], labels["helm.kubeop.dev/owner-group"]) == (
        "PhpDeployment", "web.example.com"
    )  # fmt: skip
    # Upgrades keep the mark.
    await world.edit(image="php:8.4")
    await world.reconcile()
    assert world.helm_ops() == ["dry-run", "upgrade"]
    latest = max((await world.release_secrets()), key=lambda s: int(s["metadata"]["labels"]["version"]))
    assert latest["metadata"]["labels"]["helm.kubeop.dev/owner-uid"] == cr["metadata"]["uid"]
    # The resource is replaced behind the operator's back (finalizer removed by hand): the
    # release stays the old resource's, and the new resource of the same name does not get it.
    await world.admin.patch(PHP, NAME, {"metadata": {"finalizers": None}}, namespace=NS, type=PatchType.MERGE)
    await world.delete_cr()
    await world.create({"image": "php:8.3"})
    await world.clear()
    await world.reconcile()
    assert world.helm.calls == []
    assert (await world.conditions())["ReleaseFailed"]["reason"] == "ReleaseNotOwned"


async def test_a_release_made_before_owners_were_recorded_is_adopted(world: World) -> None:
    # What this operator installed before it recorded owners: its chart, objects controlled by
    # this very resource (the post-renderer's references), no owner label.
    await world.create({"image": "php:8.3"})
    cr = await world.cr()
    assert cr is not None
    owner = {
        "apiVersion": "web.example.com/v1",
        "kind": "PhpDeployment",
        "name": NAME,
        "uid": cr["metadata"]["uid"],
    }
    manifest = inject_owner_references(
        world.helm.render(NAME, {"image": "php:8.3"}, "install"), owner, NS, {"/Service", "apps/Deployment"}
    )
    await world.helm._record(NS, NAME, 1, "deployed", manifest, {"image": "php:8.3"})
    await world.reconcile()
    assert world.helm_ops() == ["upgrade"]  # recorded the owner
    latest = max((await world.release_secrets()), key=lambda s: int(s["metadata"]["labels"]["version"]))
    assert latest["metadata"]["labels"]["helm.kubeop.dev/owner-uid"] == cr["metadata"]["uid"]
    assert ("Normal", "ReleaseAdopted") in [(e[0], e[1]) for e in await world.events()]
    assert (await world.conditions())["Deployed"]["status"] == "True"
    await world.clear()
    await world.reconcile()
    assert world.helm.calls == []  # owned now: the steady state


# -- what the resource shows never holds the chart's Secret values ---------------------------------

MARKER = "s3cr3t-MARKER-7f1c"


def leaks(text: str) -> bool:
    return MARKER in text or base64.b64encode(MARKER.encode()).decode() in text


async def test_secret_values_stay_out_of_the_status_events_and_logs(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    world.helm.secret = MARKER  # the chart renders a Secret holding it (not from the spec)
    await world.create({"image": "php:8.3"})
    await world.reconcile()
    cr = await world.cr()
    assert cr is not None
    manifest = cr["status"]["deployedRelease"]["manifest"]
    assert (
        "kind: Secret" in manifest and "password: <redacted>" in manifest and "token: <redacted>" in manifest
    )
    assert "kind: Deployment" in manifest and "php:8.3" in manifest  # the rest stays as rendered
    # A failing upgrade whose error quotes the value (as the API server does for some fields).
    await world.edit(image="php:8.4")
    world.helm.fail_apply = True
    world.helm.fail_message = (
        f'UPGRADE FAILED: Secret "web" is invalid: data[token]: Invalid value: "{MARKER}"'
    )
    with pytest.raises(ReleaseError) as raised:
        await world.reconcile()
    assert not leaks(str(raised.value)) and "<redacted>" in str(raised.value)
    cr = await world.cr()
    assert cr is not None
    assert (await world.conditions())["ReleaseFailed"]["reason"] == "UpgradeError"
    assert not leaks(json.dumps(cr)), "the resource shows a Secret value"
    assert not leaks(json.dumps(await world.events())), "an event shows a Secret value"
    assert not leaks("\n".join(r.getMessage() for r in caplog.records)), "a log line shows a Secret value"


# -- the reconcile-period annotation ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "period", "warning"),
    [
        ("30s", 30.0, None),
        ("1m30s", 90.0, None),
        ("0", 0.0, None),  # no periodic check, as operator-sdk
        ("0s", 0.0, None),
        ("10s", 10.0, None),
        ("1ms", 10.0, "ReconcilePeriodClamped"),
        ("9.999s", 10.0, "ReconcilePeriodClamped"),
        ("1ns", 10.0, "ReconcilePeriodClamped"),
        ("200h", 7 * 24 * 3600.0, "ReconcilePeriodClamped"),
        ("9" * 60 + "h", 7 * 24 * 3600.0, "ReconcilePeriodClamped"),  # inf seconds
        ("-5s", 60.0, "InvalidReconcilePeriod"),
        ("-1ms", 60.0, "InvalidReconcilePeriod"),
        ("10", 60.0, "InvalidReconcilePeriod"),  # no unit: Go refuses it too
        ("10s\r\nX-Injected: 1", 60.0, "InvalidReconcilePeriod"),
        ("10s\n", 60.0, "InvalidReconcilePeriod"),
        (" 10s", 60.0, "InvalidReconcilePeriod"),
        ("ten seconds", 60.0, "InvalidReconcilePeriod"),
        ("", 60.0, "InvalidReconcilePeriod"),
        ("1s" * 100, 60.0, "InvalidReconcilePeriod"),  # too long to be a period
    ],
)
def test_reconcile_period_annotation_bounds(value: str, period: float, warning: str | None) -> None:
    obj = {"metadata": {"annotations": {RECONCILE_PERIOD_ANNOTATION: value}}}
    got, problem = period_from_annotation(obj, 60.0)
    assert got == period
    assert (problem[0] if problem else None) == warning
    if problem:
        assert RECONCILE_PERIOD_ANNOTATION in problem[1]
        assert "\n" not in problem[1] and "\r" not in problem[1]
        if warning == "InvalidReconcilePeriod":
            assert "a Go duration such as 30s, 5m or 1h30m, at least 10s" in problem[1]
    assert reconcile_period(obj, 60.0) == period


def test_the_floor_is_the_operators_period_when_that_is_shorter() -> None:
    obj = {"metadata": {"annotations": {RECONCILE_PERIOD_ANNOTATION: "1s"}}}
    assert period_from_annotation(obj, 5.0)[0] == 5.0  # the operator's own choice
    assert period_from_annotation(obj, 0.0)[0] == 10.0  # the operator's "no period" is no floor
    assert period_from_annotation({"metadata": {}}, 5.0) == (5.0, None)


async def test_a_too_short_period_is_clamped_with_a_warning(make_world: Any) -> None:
    world = await make_world()
    await world.create({"image": "php:8.3"}, annotations={RECONCILE_PERIOD_ANNOTATION: "1ms"})
    assert await world.reconcile() == Result(requeue_after=10.0)
    world.now += 10.0
    await world.clear()
    await world.reconcile()
    assert world.helm_ops() == ["dry-run"]  # one render per 10 s, not per millisecond
    [(kind, note)] = [(e[0], e[2]) for e in await world.events() if e[1] == "ReconcilePeriodClamped"]
    assert kind == "Warning" and "below the minimum of 10s" in note


async def test_an_invalid_period_is_reported(make_world: Any) -> None:
    world = await make_world()
    await world.create({"image": "php:8.3"}, annotations={RECONCILE_PERIOD_ANNOTATION: "5 minutes"})
    assert await world.reconcile() == Result(requeue_after=60.0)
    [(kind, note)] = [(e[0], e[2]) for e in await world.events() if e[1] == "InvalidReconcilePeriod"]
    assert (
        kind == "Warning"
        and "'5 minutes' is not valid" in note
        and "Using the operator's period, 1m0s" in note
    )


async def test_a_redacted_status_is_stable(world: World) -> None:
    world.helm.secret = MARKER
    await installed(world)
    for _ in range(3):
        world.now += 61.0  # a dry run each time: same manifest, nothing to write
        await world.reconcile()
    assert world.helm_ops() == ["dry-run"] * 3
    assert world.writes() == []
